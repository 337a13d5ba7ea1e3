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
