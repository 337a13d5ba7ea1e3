/* The log cleaner's hot loops (log compaction, as Kafka's LogCleaner).
 *
 * Offset map: an open-addressing table of (xxh64(key) | 1, offset) pairs held in memory
 * the caller owns (a numpy array over an anonymous mmap), linear probing, never deleted
 * from. Hash collisions between different keys are possible, as in Kafka's SkimpyOffsetMap
 * (which keeps a hash, not the key): with 64-bit hashes the chance is negligible.
 *
 * Pass 1 (kr_map_records) records each key's latest offset over the dirty section.
 * Pass 2 (kr_clean_batch / kr_filter_records) copies the records that survive: a record
 * stays when no later offset is mapped for its key, and a tombstone (null value) stays
 * only while retain_tombstones says so. Records are copied byte for byte: their offset
 * and timestamp deltas stay relative to the batch's unchanged base offset and base
 * timestamp, and the batch keeps its base offset, last offset delta, producer id, epoch
 * and base sequence (magic v2 rules), so offsets never change and idempotent producers'
 * state survives. Only batchLength, recordsCount and the CRC are rewritten.
 *
 * Every length is checked against the buffer; malformed records are an error, never a
 * read outside [buf, buf + len).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kr_core.h"

static inline int64_t unzigzag(uint64_t u) { return (int64_t)((u >> 1) ^ (~(u & 1) + 1)); }

/* Zigzag varint from [*pp, lim): 0 and advances, or -1 when truncated or over 10 bytes. */
static inline int varint(const uint8_t **pp, const uint8_t *lim, int64_t *out)
{
    const uint8_t *p = *pp;
    uint64_t acc = 0;
    for (int i = 0; i < 10; i++) {
        if (p >= lim)
            return -1;
        uint8_t b = *p++;
        acc |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *out = unzigzag(acc);
            *pp = p;
            return 0;
        }
    }
    return -1;
}

static inline void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* ---- offset map ------------------------------------------------------------------ */

int kr_offset_map_init(kr_offset_map *m, uint64_t *slots, size_t capacity, double load_factor)
{
    if (capacity < 2 || (capacity & (capacity - 1)) || load_factor <= 0 || load_factor > 1)
        return -1;
    m->slots = slots;
    m->capacity = capacity;
    m->used = 0;
    m->limit = (size_t)((double)capacity * load_factor);
    if (m->limit >= capacity)
        m->limit = capacity - 1; /* one free slot always ends a probe */
    memset(slots, 0, capacity * 2 * sizeof(uint64_t));
    return 0;
}

static inline uint64_t key_hash(const uint8_t *key, size_t n)
{
    return kr_xxh64(key, n, 0) | 1; /* 0 marks a free slot */
}

/* Slot of hash h: its own, or the free one where it would go. */
static inline size_t probe(const kr_offset_map *m, uint64_t h)
{
    size_t mask = m->capacity - 1;
    size_t i = (size_t)(h >> 7) & mask;
    while (m->slots[2 * i] != 0 && m->slots[2 * i] != h)
        i = (i + 1) & mask;
    return i;
}

int kr_offset_map_put(kr_offset_map *m, const uint8_t *key, size_t n, int64_t offset)
{
    uint64_t h = key_hash(key, n);
    size_t i = probe(m, h);
    if (m->slots[2 * i] == 0) {
        if (m->used >= m->limit)
            return 1; /* full */
        m->slots[2 * i] = h;
        m->slots[2 * i + 1] = (uint64_t)offset;
        m->used++;
    } else if ((int64_t)m->slots[2 * i + 1] < offset) {
        m->slots[2 * i + 1] = (uint64_t)offset;
    }
    return 0;
}

int64_t kr_offset_map_get(const kr_offset_map *m, const uint8_t *key, size_t n)
{
    uint64_t h = key_hash(key, n);
    size_t i = probe(m, h);
    return m->slots[2 * i] == 0 ? -1 : (int64_t)m->slots[2 * i + 1];
}

/* ---- records ----------------------------------------------------------------------- */

typedef struct {
    const uint8_t *start; /* the record's first byte (its length varint) */
    const uint8_t *end;
    int64_t offset_delta;
    const uint8_t *key; /* NULL: null key */
    int64_t key_len;
    int null_value;
} rec_view;

/* Parses the record at *pp (fields up to the value length); advances *pp past it. */
static int next_record(const uint8_t **pp, const uint8_t *lim, rec_view *r, char *reason, int32_t i)
{
    const uint8_t *p = *pp;
    int64_t len, ts, off, klen, vlen;
    r->start = p;
    if (varint(&p, lim, &len) || len < 1 || len > lim - p) {
        snprintf(reason, KR_REASON_MAX, "record %" PRId32 ": bad length", i);
        return -1;
    }
    const uint8_t *end = p + len;
    p++; /* attributes */
    if (varint(&p, end, &ts) || varint(&p, end, &off) || varint(&p, end, &klen) || klen < -1 ||
        klen > end - p) {
        snprintf(reason, KR_REASON_MAX, "record %" PRId32 ": bad fields before the key", i);
        return -1;
    }
    r->key = klen < 0 ? NULL : p;
    r->key_len = klen < 0 ? 0 : klen;
    p += r->key_len;
    if (varint(&p, end, &vlen) || vlen < -1 || vlen > end - p) {
        snprintf(reason, KR_REASON_MAX, "record %" PRId32 ": bad value length", i);
        return -1;
    }
    r->null_value = vlen < 0;
    r->offset_delta = off;
    r->end = end;
    *pp = end;
    return 0;
}

int kr_map_records(kr_offset_map *m, const uint8_t *recs, size_t len, int32_t count,
                   int64_t base_offset, int32_t *mapped, char *reason)
{
    const uint8_t *p = recs, *lim = recs + len;
    *mapped = 0;
    for (int32_t i = 0; i < count; i++) {
        rec_view r;
        if (next_record(&p, lim, &r, reason, i))
            return KR_RECORDS_CORRUPT;
        if (r.key != NULL) {
            if (kr_offset_map_put(m, r.key, (size_t)r.key_len, base_offset + r.offset_delta))
                return KR_CLEAN_MAP_FULL;
        }
        (*mapped)++;
    }
    return KR_RECORDS_OK;
}

int kr_filter_records(const kr_offset_map *m, const uint8_t *recs, size_t len, int32_t count,
                      int64_t base_offset, int retain_tombstones, uint8_t *out, size_t cap,
                      size_t *out_len, int32_t *kept, char *reason)
{
    const uint8_t *p = recs, *lim = recs + len;
    size_t n = 0;
    *kept = 0;
    for (int32_t i = 0; i < count; i++) {
        rec_view r;
        if (next_record(&p, lim, &r, reason, i))
            return KR_RECORDS_CORRUPT;
        if (r.key == NULL)
            continue; /* keyless records are not kept in a compacted log (Kafka) */
        int64_t latest = kr_offset_map_get(m, r.key, (size_t)r.key_len);
        if (latest > base_offset + r.offset_delta)
            continue; /* superseded by a later record of the same key */
        if (r.null_value && !retain_tombstones)
            continue;
        size_t sz = (size_t)(r.end - r.start);
        if (sz > cap - n) {
            snprintf(reason, KR_REASON_MAX, "output buffer too small");
            return KR_RECORDS_CORRUPT;
        }
        memcpy(out + n, r.start, sz);
        n += sz;
        (*kept)++;
    }
    *out_len = n;
    return KR_RECORDS_OK;
}

int kr_clean_batch(const kr_offset_map *m, const uint8_t *batch, size_t len, int retain_tombstones,
                   int keep_if_empty, uint8_t *out, size_t cap, size_t *out_len, int32_t *kept,
                   char *reason)
{
    kr_batch_info info;
    if (kr_batch_check(batch, len, 0, 0, &info, reason))
        return KR_RECORDS_CORRUPT;
    if ((size_t)info.size != len || info.attributes & 0x07) {
        snprintf(reason, KR_REASON_MAX, "not one uncompressed batch");
        return KR_RECORDS_CORRUPT;
    }
    if (cap < KR_BATCH_HEADER_SIZE) {
        snprintf(reason, KR_REASON_MAX, "output buffer too small");
        return KR_RECORDS_CORRUPT;
    }
    size_t n = 0;
    int rc = kr_filter_records(m, batch + KR_BATCH_HEADER_SIZE, len - KR_BATCH_HEADER_SIZE,
                               info.records_count, info.base_offset, retain_tombstones,
                               out + KR_BATCH_HEADER_SIZE, cap - KR_BATCH_HEADER_SIZE, &n, kept,
                               reason);
    if (rc != KR_RECORDS_OK)
        return rc;
    if (*kept == 0 && !keep_if_empty) {
        *out_len = 0;
        return KR_RECORDS_OK;
    }
    memcpy(out, batch, KR_BATCH_HEADER_SIZE);
    put_be32(out + 8, (uint32_t)(KR_BATCH_HEADER_SIZE - KR_LOG_OVERHEAD + n)); /* batchLength */
    put_be32(out + 57, (uint32_t)*kept);                                      /* recordsCount */
    size_t total = KR_BATCH_HEADER_SIZE + n;
    put_be32(out + 17, kr_crc32c(0, out + 21, total - 21));
    *out_len = total;
    return KR_RECORDS_OK;
}

int kr_records_first_keyless(const uint8_t *recs, size_t len, int32_t count, int32_t *index, char *reason)
{
    const uint8_t *p = recs, *lim = recs + len;
    *index = -1;
    for (int32_t i = 0; i < count; i++) {
        rec_view r;
        if (next_record(&p, lim, &r, reason, i))
            return KR_RECORDS_CORRUPT;
        if (r.key == NULL) {
            *index = i;
            return KR_RECORDS_OK;
        }
    }
    return KR_RECORDS_OK;
}
