/* Bulk work (the log cleaner's segment passes) that yields its core now and then.
 *
 * A cleaner thread runs its segment passes without the GIL, on a core it shares with the
 * broker's event loop on small hosts. When the loop thread wakes on that core (a request,
 * or the GIL the cleaner just released: a wakee lands on its waker's core) the scheduler
 * may leave it waiting behind the cleaner until the next tick (4 ms at HZ=250), even with
 * another core idle: an idle core does not pull a task that ran within the last 0.5 ms,
 * and EEVDF lets a task that just got the core run out its slice. A pass that calls
 * sched_yield(2) as it starts and then every interval bounds that wait; with nothing else
 * runnable on the core the call returns at once (one clock read per batch, one syscall
 * per interval).
 * Lower priorities measured worse: a SCHED_IDLE or nice 19 thread, even one that never
 * takes the GIL, stalled the loop more, preempted while it held what the loop needs next
 * (the process's address space lock, the file system journal). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <time.h>

#include "kr_core.h"

static __thread int64_t bulk_interval_ns; /* per thread: 0, or set by a cleaner thread */
static __thread int64_t bulk_next_ns;     /* when this thread yields next */

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void kr_bulk_set_yield_interval(int64_t ns) { bulk_interval_ns = ns > 0 ? ns : 0; }

int64_t kr_bulk_yield_interval(void) { return bulk_interval_ns; }

void kr_bulk_yield(int now)
{
    if (!bulk_interval_ns)
        return;
    int64_t t = mono_ns();
    if (!now && t < bulk_next_ns)
        return;
    sched_yield();
    bulk_next_ns = t + bulk_interval_ns;
}
