/* Binary search over Kafka's sparse index files (sorted, big-endian entries). */
#include "kr_core.h"

static inline int64_t be32s(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

static inline int64_t be64s(const uint8_t *p)
{
    uint64_t hi = (uint32_t)be32s(p), lo = (uint32_t)be32s(p + 4);
    return (int64_t)(hi << 32 | lo);
}

int64_t kr_index_lookup(const uint8_t *buf, int64_t n_entries, int64_t target)
{
    int64_t lo = 0, hi = n_entries - 1, found = -1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (be32s(buf + mid * KR_INDEX_ENTRY_SIZE) <= target) {
            found = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return found;
}

int64_t kr_timeindex_lookup(const uint8_t *buf, int64_t n_entries, int64_t target)
{
    int64_t lo = 0, hi = n_entries - 1, found = -1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (be64s(buf + mid * KR_TIMEINDEX_ENTRY_SIZE) <= target) {
            found = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return found;
}

static inline void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

int kr_index_batches(const kr_batch_info *b, size_t n, int64_t base_position, kr_index_state *st,
                     uint8_t *off_out, size_t *n_off, uint8_t *time_out, size_t *n_time)
{
    int64_t since = st->since, seg_max = st->seg_max_ts, seg_max_off = st->seg_max_offset;
    int64_t indexed_ts = st->last_indexed_ts, last = st->last_offset;
    size_t no = 0, nt = 0;
    for (size_t i = 0; i < n; i++) {
        last = b[i].base_offset + b[i].last_offset_delta;
        if (b[i].max_timestamp > seg_max) {
            seg_max = b[i].max_timestamp;
            seg_max_off = last;
        }
        if (since > st->interval) {
            int64_t rel = last - st->seg_base, pos = base_position + b[i].position;
            int64_t trel = seg_max_off - st->seg_base;
            if (rel < 0 || rel > INT32_MAX || pos < 0 || pos > INT32_MAX || trel < 0 || trel > INT32_MAX)
                return -1;
            put_be32(off_out + 8 * no, (uint32_t)rel);
            put_be32(off_out + 8 * no + 4, (uint32_t)pos);
            no++;
            if (seg_max > indexed_ts) {
                put_be32(time_out + 12 * nt, (uint32_t)((uint64_t)seg_max >> 32));
                put_be32(time_out + 12 * nt + 4, (uint32_t)seg_max);
                put_be32(time_out + 12 * nt + 8, (uint32_t)trel);
                nt++;
                indexed_ts = seg_max;
            }
            since = 0;
        }
        since += b[i].size;
    }
    st->since = since;
    st->seg_max_ts = seg_max;
    st->seg_max_offset = seg_max_off;
    st->last_indexed_ts = indexed_ts;
    st->last_offset = last;
    *n_off = no;
    *n_time = nt;
    return 0;
}
