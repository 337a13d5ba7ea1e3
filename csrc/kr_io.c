/* Thin syscall wrappers for segment files and zero-copy fetch responses.
 * Every call retries EINTR; callers (the Cython wrapper) run them without the GIL. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kr_core.h"

/* Linux moves at most this much per sendfile(2)/write(2) call anyway. */
#define MAX_IO_CHUNK ((size_t)0x7ffff000)

ssize_t kr_write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    size_t done = 0;
    while (done < len) {
        size_t chunk = len - done < MAX_IO_CHUNK ? len - done : MAX_IO_CHUNK;
        ssize_t n = write(fd, p + done, chunk);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0) { /* no progress and no error: do not spin */
            errno = EIO;
            return -1;
        }
        done += (size_t)n;
    }
    return (ssize_t)done;
}

ssize_t kr_pread_full(int fd, void *out, size_t len, int64_t offset)
{
    char *p = out;
    size_t done = 0;
    if (offset < 0) {
        errno = EINVAL;
        return -1;
    }
    while (done < len) {
        size_t chunk = len - done < MAX_IO_CHUNK ? len - done : MAX_IO_CHUNK;
        ssize_t n = pread(fd, p + done, chunk, (off_t)(offset + (int64_t)done));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            break; /* end of file */
        done += (size_t)n;
    }
    return (ssize_t)done;
}

int kr_ftruncate(int fd, int64_t size)
{
    if (size < 0) {
        errno = EINVAL;
        return -1;
    }
    while (ftruncate(fd, (off_t)size) < 0) {
        if (errno != EINTR)
            return -1;
    }
    return 0;
}

int64_t kr_file_size(int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -1;
    return (int64_t)st.st_size;
}

int kr_fdatasync(int fd)
{
    while (fdatasync(fd) < 0) {
        if (errno != EINTR)
            return -1;
    }
    return 0;
}

int kr_writeback_start(int fd, int64_t offset, int64_t len)
{
    if (offset < 0 || len < 0) {
        errno = EINVAL;
        return -1;
    }
#ifdef SYNC_FILE_RANGE_WRITE
    while (sync_file_range(fd, offset, len, SYNC_FILE_RANGE_WRITE) < 0) {
        if (errno != EINTR)
            return -1;
    }
#else
    (void)fd;
#endif
    return 0;
}

int kr_syncfs(int fd)
{
    while (syncfs(fd) < 0) {
        if (errno != EINTR)
            return -1;
    }
    return 0;
}

ssize_t kr_sendfile(int out_fd, int in_fd, int64_t offset, size_t count)
{
    if (offset < 0) {
        errno = EINVAL;
        return -1;
    }
    if (count > MAX_IO_CHUNK)
        count = MAX_IO_CHUNK;
    for (;;) {
        off_t off = (off_t)offset;
        ssize_t n = sendfile(out_fd, in_fd, &off, count);
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        return -1;
    }
}

ssize_t kr_sendfile_all(int out_fd, int in_fd, int64_t offset, size_t count,
                        int timeout_ms, size_t *sent)
{
    *sent = 0;
    if (offset < 0) {
        errno = EINVAL;
        return -1;
    }
    while (*sent < count) {
        size_t want = count - *sent < MAX_IO_CHUNK ? count - *sent : MAX_IO_CHUNK;
        off_t off = (off_t)(offset + (int64_t)*sent);
        ssize_t n = sendfile(out_fd, in_fd, &off, want);
        if (n > 0) {
            *sent += (size_t)n;
            continue;
        }
        if (n == 0) { /* the file ended before the promised range */
            errno = ENODATA;
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        /* non-blocking socket with a full send buffer: wait for room */
        struct pollfd pfd = {.fd = out_fd, .events = POLLOUT, .revents = 0};
        int r = poll(&pfd, 1, timeout_ms);
        if (r < 0 && errno != EINTR)
            return -1;
        if (r == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
    }
    return (ssize_t)*sent;
}
