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
 * until its batch's delete horizon (KIP-534). Records are copied byte for byte, their
 * offset and timestamp deltas relative to the batch's unchanged base offset and base
 * timestamp, except when a batch first keeps tombstones: then its base timestamp becomes
 * the horizon (attribute bit 6 set) and each kept record's timestamp delta is re-encoded
 * against it, so every record keeps its exact timestamp (readers compute base + delta,
 * Kafka's DefaultRecordBatch included). The batch keeps its base offset, last offset
 * delta, producer id, epoch and base sequence (magic v2 rules), so offsets never change
 * and idempotent producers' state survives; batchLength, recordsCount, maxTimestamp
 * (CreateTime) and the CRC are rewritten.
 *
 * Every length is checked against the buffer; malformed records are an error, never a
 * read outside [buf, buf + len).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kr_core.h"
#include "kr_bytes.h"

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

/* Zigzag varlong of v at p (room for 10 bytes); returns its size. */
static inline size_t put_varlong(uint8_t *p, int64_t v)
{
    uint64_t u = ((uint64_t)v << 1) ^ (0 - ((uint64_t)v >> 63));
    size_t n = 0;
    while (u >= 0x80) {
        p[n++] = (uint8_t)(u | 0x80);
        u >>= 7;
    }
    p[n++] = (uint8_t)u;
    return n;
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
    /* Up to log.cleaner.dedupe.buffer.size bytes (128 MiB: ~10-20 ms): a MiB at a time,
     * with the cleaner's yield points in between (kr_bulk.c). */
    size_t total = capacity * 2 * sizeof(uint64_t), step = (size_t)1 << 20;
    for (size_t at = 0; at < total; at += step) {
        kr_bulk_yield(0);
        memset((uint8_t *)slots + at, 0, total - at < step ? total - at : step);
    }
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

static inline int put_hash(kr_offset_map *m, uint64_t h, int64_t offset)
{
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

int kr_offset_map_put(kr_offset_map *m, const uint8_t *key, size_t n, int64_t offset)
{
    return put_hash(m, key_hash(key, n), offset);
}

static inline int64_t get_hash(const kr_offset_map *m, uint64_t h)
{
    size_t i = probe(m, h);
    return m->slots[2 * i] == 0 ? -1 : (int64_t)m->slots[2 * i + 1];
}

int64_t kr_offset_map_get(const kr_offset_map *m, const uint8_t *key, size_t n)
{
    return get_hash(m, key_hash(key, n));
}

/* Brings the first slot a probe for h reads into the cache ahead of the probe. */
static inline void prefetch_slot(const kr_offset_map *m, uint64_t h)
{
#if defined(__GNUC__)
    __builtin_prefetch(&m->slots[2 * ((size_t)(h >> 7) & (m->capacity - 1))]);
#else
    (void)m;
    (void)h;
#endif
}

/* ---- records ----------------------------------------------------------------------- */

typedef struct {
    const uint8_t *start; /* the record's first byte (its length varint) */
    const uint8_t *end;
    int64_t timestamp_delta;
    int64_t offset_delta;
    const uint8_t *key; /* NULL: null key */
    int64_t key_len;
    int null_value;
    const uint8_t *value; /* NULL: null value */
    int64_t value_len;
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
    r->value = vlen < 0 ? NULL : p;
    r->value_len = vlen < 0 ? 0 : vlen;
    r->timestamp_delta = ts;
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
                      size_t *out_len, int32_t *kept, int32_t *tombstones, char *reason)
{
    const uint8_t *p = recs, *lim = recs + len;
    size_t n = 0;
    *kept = 0;
    *tombstones = 0;
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
        *tombstones += r.null_value;
    }
    *out_len = n;
    return KR_RECORDS_OK;
}

/* The record rec[0, size) (parsed before: its length is right) written to out (cap bytes)
 * with its timestamp delta against new_base instead of old_base when rebase, else as it
 * is; *n its size there, *ts its timestamp. KR_RECORDS_OK, KR_CLEAN_OUT_FULL or
 * KR_RECORDS_CORRUPT. */
static int copy_record(const uint8_t *rec, size_t size, int64_t old_base, int64_t new_base, int rebase,
                       uint8_t *out, size_t cap, size_t *n, int64_t *ts, char *reason)
{
    const uint8_t *p = rec, *lim = rec + size;
    int64_t len, delta, nd;
    if (varint(&p, lim, &len) || len < 1 || len != lim - p) {
        snprintf(reason, KR_REASON_MAX, "bad record length");
        return KR_RECORDS_CORRUPT;
    }
    const uint8_t *attrs = p++;
    if (varint(&p, lim, &delta) || __builtin_add_overflow(old_base, delta, ts) ||
        __builtin_sub_overflow(*ts, new_base, &nd)) {
        snprintf(reason, KR_REASON_MAX, "bad record timestamp");
        return KR_RECORDS_CORRUPT;
    }
    if (!rebase) {
        if (size > cap)
            return KR_CLEAN_OUT_FULL;
        memcpy(out, rec, size);
        *n = size;
        return KR_RECORDS_OK;
    }
    uint8_t d[10], l[10];
    size_t dn = put_varlong(d, nd), rest = (size_t)(lim - p);
    size_t body = 1 + dn + rest, ln = put_varlong(l, (int64_t)body);
    if (ln + body > cap)
        return KR_CLEAN_OUT_FULL;
    memcpy(out, l, ln);
    out[ln] = *attrs;
    memcpy(out + ln + 1, d, dn);
    memcpy(out + ln + 1 + dn, p, rest);
    *n = ln + body;
    return KR_RECORDS_OK;
}

int kr_rebase_records(const uint8_t *recs, size_t len, int32_t count, int64_t old_base,
                      int64_t new_base, uint8_t *out, size_t cap, size_t *out_len,
                      int64_t *max_timestamp, char *reason)
{
    const uint8_t *p = recs, *lim = recs + len;
    size_t n = 0;
    *max_timestamp = INT64_MIN;
    for (int32_t i = 0; i < count; i++) {
        rec_view r;
        size_t w;
        int64_t ts;
        if (next_record(&p, lim, &r, reason, i))
            return KR_RECORDS_CORRUPT;
        int rc = copy_record(r.start, (size_t)(r.end - r.start), old_base, new_base, 1, out + n, cap - n,
                             &w, &ts, reason);
        if (rc == KR_CLEAN_OUT_FULL)
            snprintf(reason, KR_REASON_MAX, "output buffer too small");
        if (rc)
            return KR_RECORDS_CORRUPT;
        n += w;
        if (ts > *max_timestamp)
            *max_timestamp = ts;
    }
    *out_len = n;
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

int kr_records_outside(const uint8_t *recs, size_t len, int32_t count, int64_t base_timestamp,
                       int64_t low, int64_t high, int32_t *indexes, int64_t *timestamps,
                       int32_t *found, char *reason)
{
    const uint8_t *p = recs, *lim = recs + len;
    *found = 0;
    for (int32_t i = 0; i < count; i++) {
        rec_view r;
        int64_t ts;
        if (next_record(&p, lim, &r, reason, i))
            return KR_RECORDS_CORRUPT;
        if (__builtin_add_overflow(base_timestamp, r.timestamp_delta, &ts)) {
            snprintf(reason, KR_REASON_MAX, "record %" PRId32 ": timestamp overflows", i);
            return KR_RECORDS_CORRUPT;
        }
        if (ts < low || ts > high) {
            indexes[*found] = i;
            timestamps[*found] = ts;
            (*found)++;
        }
    }
    return KR_RECORDS_OK;
}

int kr_records_fields(const uint8_t *recs, size_t len, int32_t count, kr_record_fields *out, char *reason)
{
    const uint8_t *p = recs, *lim = recs + len;
    for (int32_t i = 0; i < count; i++) {
        rec_view r;
        if (next_record(&p, lim, &r, reason, i))
            return KR_RECORDS_CORRUPT;
        out[i].offset_delta = r.offset_delta;
        out[i].key_pos = r.key == NULL ? 0 : r.key - recs;
        out[i].key_len = r.key == NULL ? -1 : r.key_len;
        out[i].value_pos = r.value == NULL ? 0 : r.value - recs;
        out[i].value_len = r.value == NULL ? -1 : r.value_len;
    }
    return KR_RECORDS_OK;
}

/* ---- whole chunks ------------------------------------------------------------------ */

#define ATTR_CODEC 0x07
#define ATTR_TRANSACTIONAL 0x10
#define ATTR_CONTROL 0x20
#define ATTR_LOG_APPEND_TIME 0x08
#define REC_TOMBSTONE 1
#define REC_KEPT 2
/* Records ahead whose slots are prefetched: enough misses in flight to cover the latency. */
#define PREFETCH_DISTANCE 16

struct kr_clean_rec {
    uint64_t hash; /* 0: a null key */
    int64_t offset;
    uint32_t start; /* from the chunk's start */
    uint32_t size;
    uint8_t flags; /* REC_TOMBSTONE (a null value), REC_KEPT */
};

void kr_clean_scratch_free(kr_clean_scratch *s)
{
    free(s->recs);
    free(s->batches);
    s->recs = NULL;
    s->batches = NULL;
    s->recs_cap = s->batches_cap = 0;
}

/* Room for `need` items of `item` bytes in *p; -1 on out-of-memory. */
static int reserve(void **p, size_t *cap, size_t need, size_t item)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 1024;
    while (n < need) {
        if (n > SIZE_MAX / 2 / item)
            return -1;
        n *= 2;
    }
    void *q = realloc(*p, n * item);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

enum { WALK_PLAIN, WALK_STOP, WALK_CORRUPT };

/* The batch at buf[pos]: WALK_PLAIN (a whole, sound plain batch: *info), WALK_STOP (the
 * caller's: not plain, or not ending inside buf) or WALK_CORRUPT (reason set). */
static int walk_batch(const uint8_t *buf, size_t len, size_t pos, kr_batch_info *info, char *reason)
{
    if (len - pos < KR_LOG_OVERHEAD)
        return WALK_STOP;
    int32_t batch_length = (int32_t)be32(buf + pos + 8);
    if (batch_length >= KR_MIN_BATCH_LENGTH && (uint64_t)batch_length > len - pos - KR_LOG_OVERHEAD)
        return WALK_STOP;
    if (kr_batch_check(buf, len, pos, 0, info, reason))
        return WALK_CORRUPT;
    if (info->attributes & (ATTR_CODEC | ATTR_TRANSACTIONAL | ATTR_CONTROL))
        return WALK_STOP;
    return WALK_PLAIN;
}

/* Parses the records of the plain batch *b of buf into s->recs from *n on (keyless ones
 * only when with_keyless). Trailing bytes after the last record are corruption. */
static int parse_batch(const uint8_t *buf, const kr_batch_info *b, kr_clean_scratch *s, size_t *n,
                       int with_keyless, char *reason)
{
    if (reserve((void **)&s->recs, &s->recs_cap, *n + (size_t)b->records_count, sizeof(*s->recs)))
        return -1;
    const uint8_t *p = buf + b->position + KR_BATCH_HEADER_SIZE, *lim = buf + b->position + b->size;
    for (int32_t i = 0; i < b->records_count; i++) {
        rec_view r;
        if (next_record(&p, lim, &r, reason, i))
            return KR_RECORDS_CORRUPT;
        if (r.key == NULL && !with_keyless)
            continue;
        struct kr_clean_rec *c = &s->recs[(*n)++];
        c->hash = r.key == NULL ? 0 : key_hash(r.key, (size_t)r.key_len);
        c->offset = b->base_offset + r.offset_delta;
        c->start = (uint32_t)(r.start - buf);
        c->size = (uint32_t)(r.end - r.start);
        c->flags = r.null_value ? REC_TOMBSTONE : 0;
    }
    if (p != lim) {
        snprintf(reason, KR_REASON_MAX, "bytes after the last record of the batch at %" PRId64,
                 b->position);
        return KR_RECORDS_CORRUPT;
    }
    return KR_RECORDS_OK;
}

static int chunk_args_ok(size_t len, size_t start, char *reason)
{
    if (start > len || len > (size_t)INT32_MAX) {
        snprintf(reason, KR_REASON_MAX, "bad chunk: start %zu, length %zu", start, len);
        return 0;
    }
    return 1;
}

int kr_map_batches(kr_offset_map *m, const uint8_t *buf, size_t len, size_t start,
                   int64_t min_last_offset, kr_clean_scratch *s, size_t *consumed, char *reason)
{
    *consumed = start;
    if (!chunk_args_ok(len, start, reason))
        return KR_RECORDS_CORRUPT;
    size_t pos = start, n = 0;
    for (;;) {
        kr_bulk_yield(0);
        kr_batch_info b;
        int w = walk_batch(buf, len, pos, &b, reason);
        if (w == WALK_CORRUPT)
            return KR_RECORDS_CORRUPT;
        if (w == WALK_STOP)
            break;
        if (b.base_offset + b.last_offset_delta >= min_last_offset) {
            int rc = parse_batch(buf, &b, s, &n, 0, reason);
            if (rc)
                return rc;
        }
        pos += (size_t)b.size;
    }
    const struct kr_clean_rec *r = s->recs;
    for (size_t j = 0; j < n; j++) {
        if (!(j & 1023))
            kr_bulk_yield(0);
        if (j + PREFETCH_DISTANCE < n)
            prefetch_slot(m, r[j + PREFETCH_DISTANCE].hash);
        if (put_hash(m, r[j].hash, r[j].offset))
            return KR_CLEAN_MAP_FULL;
    }
    *consumed = pos;
    return KR_RECORDS_OK;
}

static int retained_if_empty(const kr_clean_opts *o, const kr_batch_info *b)
{
    if (b->producer_id < 0)
        return 0;
    int64_t last = b->base_offset + b->last_offset_delta;
    size_t lo = 0, hi = o->n_retain_empty;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (o->retain_empty[mid] < last)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < o->n_retain_empty && o->retain_empty[lo] == last;
}

/* Whether the plain batch b keeps its tombstones (KIP-534): until its delete horizon. */
static inline int retains_tombstones(const kr_batch_info *b, const kr_clean_opts *o)
{
    return !(b->attributes & KR_ATTR_DELETE_HORIZON) || o->now_ms < b->first_timestamp;
}

/* Writes the cleaned form of the uncompressed batch *b of buf to out (cap bytes): r[0,
 * records_count) are its records, REC_KEPT set on those that stay (kept of them,
 * any_tombstone: one of those is a tombstone). *n = its size (0: dropped), *ob = its
 * info (position left to the caller). KR_RECORDS_OK, KR_CLEAN_OUT_FULL, KR_RECORDS_CORRUPT. */
static int emit_batch(const uint8_t *buf, const kr_batch_info *b, const struct kr_clean_rec *r, size_t kept,
                      int any_tombstone, int keep_if_empty, const kr_clean_opts *o, uint8_t *out, size_t cap,
                      size_t *n, kr_batch_info *ob, int64_t *horizon, char *reason)
{
    const uint8_t *src = buf + b->position;
    int has_horizon = (b->attributes & KR_ATTR_DELETE_HORIZON) != 0;
    int set_horizon = any_tombstone && !has_horizon;
    *n = 0;
    *ob = *b;
    if (kept == 0 && !keep_if_empty)
        return KR_RECORDS_OK;
    if (kept == (size_t)b->records_count && !set_horizon) { /* unchanged: copied as it is */
        if ((size_t)b->size > cap)
            return KR_CLEAN_OUT_FULL;
        memcpy(out, src, (size_t)b->size);
        *n = (size_t)b->size;
        if (has_horizon && any_tombstone && b->first_timestamp < *horizon)
            *horizon = b->first_timestamp;
        return KR_RECORDS_OK;
    }
    if (cap < KR_BATCH_HEADER_SIZE)
        return KR_CLEAN_OUT_FULL;
    memcpy(out, src, KR_BATCH_HEADER_SIZE);
    uint16_t attrs = (uint16_t)b->attributes;
    int64_t base_ts = b->first_timestamp, new_base = base_ts, max_ts = b->max_timestamp;
    size_t at = KR_BATCH_HEADER_SIZE;
    if (kept == 0) { /* the producer's last batch: a bare header, as Kafka's writeEmptyHeader */
        attrs &= (uint16_t)~(ATTR_CODEC | KR_ATTR_DELETE_HORIZON);
        new_base = -1;
    } else {
        if (set_horizon) {
            if (__builtin_add_overflow(o->now_ms, o->delete_retention_ms, &new_base))
                new_base = INT64_MAX;
            attrs |= KR_ATTR_DELETE_HORIZON;
        }
        int64_t greatest = INT64_MIN;
        for (int32_t k = 0; k < b->records_count; k++) {
            if (!(r[k].flags & REC_KEPT))
                continue;
            size_t w;
            int64_t ts;
            int rc = copy_record(buf + r[k].start, r[k].size, base_ts, new_base, set_horizon, out + at,
                                 cap - at, &w, &ts, reason);
            if (rc)
                return rc;
            at += w;
            if (ts > greatest)
                greatest = ts;
        }
        if (!(attrs & ATTR_LOG_APPEND_TIME)) /* LogAppendTime batches keep theirs (Kafka) */
            max_ts = greatest;
    }
    put_be32(out + 8, (uint32_t)(at - KR_LOG_OVERHEAD)); /* batchLength */
    put_be16(out + 21, attrs);
    put_be64(out + 27, (uint64_t)new_base);
    put_be64(out + 35, (uint64_t)max_ts);
    put_be32(out + 57, (uint32_t)kept); /* recordsCount */
    ob->crc = kr_crc32c(0, out + 21, at - 21);
    put_be32(out + 17, ob->crc);
    ob->attributes = (int16_t)attrs;
    ob->first_timestamp = new_base;
    ob->max_timestamp = max_ts;
    ob->size = (int64_t)at;
    ob->records_count = (int32_t)kept;
    if ((attrs & KR_ATTR_DELETE_HORIZON) && any_tombstone && new_base < *horizon)
        *horizon = new_base;
    *n = at;
    return KR_RECORDS_OK;
}

int kr_clean_batch(const kr_offset_map *m, const uint8_t *batch, size_t len, const kr_clean_opts *o,
                   int keep_if_empty, kr_clean_scratch *s, uint8_t *out, size_t cap, size_t *out_len,
                   int32_t *kept, int64_t *horizon, char *reason)
{
    kr_batch_info info, ob;
    *out_len = 0;
    *kept = 0;
    if (kr_batch_check(batch, len, 0, 0, &info, reason))
        return KR_RECORDS_CORRUPT;
    if ((size_t)info.size != len || info.attributes & ATTR_CODEC) {
        snprintf(reason, KR_REASON_MAX, "not one uncompressed batch");
        return KR_RECORDS_CORRUPT;
    }
    size_t n = 0;
    int rc = parse_batch(batch, &info, s, &n, 1, reason);
    if (rc)
        return rc;
    int retain = retains_tombstones(&info, o), any_tombstone = 0;
    size_t nkept = 0;
    for (size_t j = 0; j < n; j++) {
        struct kr_clean_rec *c = &s->recs[j];
        if (c->hash != 0 && get_hash(m, c->hash) <= c->offset && (retain || !(c->flags & REC_TOMBSTONE))) {
            c->flags |= REC_KEPT;
            nkept++;
            any_tombstone |= c->flags & REC_TOMBSTONE;
        }
    }
    rc = emit_batch(batch, &info, s->recs, nkept, any_tombstone, keep_if_empty, o, out, cap, out_len, &ob,
                    horizon, reason);
    if (rc == KR_RECORDS_OK)
        *kept = (int32_t)nkept;
    return rc;
}

int kr_clean_batches(const kr_offset_map *m, const uint8_t *buf, size_t len, size_t start,
                     const kr_clean_opts *o, kr_clean_scratch *s, uint8_t *out, size_t cap,
                     size_t out_pos, size_t *out_len, size_t *consumed, kr_batch_vec *written,
                     int64_t *removed, int64_t *horizon, char *reason)
{
    *out_len = 0;
    *consumed = start;
    if (!chunk_args_ok(len, start, reason))
        return KR_RECORDS_CORRUPT;
    if (out_pos > cap) {
        snprintf(reason, KR_REASON_MAX, "output position %zu past the buffer (%zu bytes)", out_pos, cap);
        return KR_RECORDS_CORRUPT;
    }
    /* Phase 1: every plain batch's header and records. */
    size_t pos = start, n = 0, nb = 0;
    for (;;) {
        kr_bulk_yield(0);
        kr_batch_info b;
        int w = walk_batch(buf, len, pos, &b, reason);
        if (w == WALK_CORRUPT)
            return KR_RECORDS_CORRUPT;
        if (w == WALK_STOP)
            break;
        if (reserve((void **)&s->batches, &s->batches_cap, nb + 1, sizeof(*s->batches)))
            return -1;
        s->batches[nb++] = b;
        int rc = parse_batch(buf, &b, s, &n, 1, reason);
        if (rc)
            return rc;
        pos += (size_t)b.size;
    }
    /* Phase 2: which records survive, batch by batch; the copies. */
    struct kr_clean_rec *r = s->recs;
    size_t j = 0, w = out_pos;
    for (size_t i = 0; i < nb; i++) {
        kr_bulk_yield(0);
        const kr_batch_info *b = &s->batches[i];
        int retain = retains_tombstones(b, o), any_tombstone = 0;
        size_t first = j, kept = 0;
        for (int32_t k = 0; k < b->records_count; k++, j++) {
            if (j + PREFETCH_DISTANCE < n)
                prefetch_slot(m, r[j + PREFETCH_DISTANCE].hash);
            int keep = r[j].hash != 0 && get_hash(m, r[j].hash) <= r[j].offset &&
                       (retain || !(r[j].flags & REC_TOMBSTONE));
            r[j].flags |= keep ? REC_KEPT : 0;
            kept += (size_t)keep;
            any_tombstone |= keep && (r[j].flags & REC_TOMBSTONE);
        }
        size_t size;
        kr_batch_info ob;
        int rc = emit_batch(buf, b, r + first, kept, any_tombstone, retained_if_empty(o, b), o, out + w,
                            cap - w, &size, &ob, horizon, reason);
        if (rc == KR_CLEAN_OUT_FULL) { /* the caller writes out what is there and goes on from b */
            *out_len = w - out_pos;
            *consumed = (size_t)b->position;
            return KR_CLEAN_OUT_FULL;
        }
        if (rc)
            return rc;
        *removed += (int64_t)(b->records_count - (int32_t)kept);
        if (size == 0)
            continue;
        ob.position = (int64_t)w;
        if (kr_batch_vec_push(written, &ob))
            return -1;
        w += size;
    }
    *out_len = w - out_pos;
    *consumed = pos;
    return KR_RECORDS_OK;
}

/* ---- whole segment files ----------------------------------------------------------- */

/* What to do about the batch at buf[at] where a chunk loop stopped, n bytes read: 0 read
 * on from there, 1 stop (w->stop, w->need set), -1 corrupt. */
static int after_stop(const uint8_t *buf, size_t n, size_t at, int64_t file_left, size_t buf_cap,
                      kr_seg_walk *w, char *reason)
{
    if (n - at < KR_LOG_OVERHEAD) {
        if (at == 0) { /* fewer than 12 bytes left in the file */
            snprintf(reason, KR_REASON_MAX, "torn batch at %" PRId64, w->pos);
            return -1;
        }
        return 0;
    }
    int64_t size = (int64_t)(int32_t)be32(buf + at + 8) + KR_LOG_OVERHEAD;
    if (size < KR_BATCH_HEADER_SIZE || size > file_left) {
        snprintf(reason, KR_REASON_MAX, "batch of %" PRId64 " bytes at %" PRId64, size, w->pos);
        return -1;
    }
    if ((size_t)size <= n - at) { /* whole: the chunk loop left it to the caller */
        w->stop = KR_SEG_BATCH;
        w->need = size;
        return 1;
    }
    if (at == 0 && (size_t)size > buf_cap) {
        w->stop = KR_SEG_GROW;
        w->need = size;
        return 1;
    }
    return 0; /* cut by the end of the piece: read on from it */
}

int kr_map_segment(kr_offset_map *m, int in_fd, int64_t end, uint8_t *buf, size_t buf_cap,
                   int64_t min_last_offset, int64_t budget, kr_clean_scratch *s, kr_seg_walk *w,
                   char *reason)
{
    w->stop = KR_SEG_END;
    w->need = 0;
    if (buf_cap < KR_BATCH_HEADER_SIZE || buf_cap > (size_t)INT32_MAX || w->pos < 0) {
        snprintf(reason, KR_REASON_MAX, "bad arguments");
        return KR_RECORDS_CORRUPT;
    }
    kr_bulk_yield(1);
    while (w->pos < end) {
        kr_bulk_yield(0);
        if (budget > 0 && w->read >= budget) {
            w->stop = KR_SEG_BUDGET;
            return KR_RECORDS_OK;
        }
        size_t want = (size_t)(end - w->pos) < buf_cap ? (size_t)(end - w->pos) : buf_cap;
        ssize_t n = kr_pread_full(in_fd, buf, want, w->pos);
        if (n < 0)
            return -1;
        w->read += n;
        if ((size_t)n < want) {
            w->stop = KR_SEG_SHORT;
            return KR_RECORDS_OK;
        }
        size_t consumed = 0;
        int rc = kr_map_batches(m, buf, (size_t)n, 0, min_last_offset, s, &consumed, reason);
        if (rc)
            return rc;
        int a = consumed == (size_t)n ? 0 : after_stop(buf, (size_t)n, consumed, end - w->pos - (int64_t)consumed, buf_cap, w, reason);
        w->pos += (int64_t)consumed;
        if (a < 0)
            return KR_RECORDS_CORRUPT;
        if (a > 0)
            return KR_RECORDS_OK;
    }
    return KR_RECORDS_OK;
}

static int flush_out(int out_fd, const uint8_t *out, size_t *used, int64_t *out_size, kr_seg_walk *w)
{
    if (!*used)
        return 0;
    if (kr_write_all(out_fd, out, *used) < 0)
        return -1;
    kr_writeback_start(out_fd, *out_size, (int64_t)*used); /* a hint: failure is harmless */
    *out_size += (int64_t)*used;
    w->written += (int64_t)*used;
    *used = 0;
    return 0;
}

int kr_clean_segment(const kr_offset_map *m, int in_fd, int64_t end, uint8_t *buf, size_t buf_cap,
                     uint8_t *out, size_t out_cap, size_t flush_at, int out_fd, int64_t out_size,
                     int64_t budget, const kr_clean_opts *o, kr_clean_scratch *s, kr_batch_vec *written,
                     kr_seg_walk *w, char *reason)
{
    w->stop = KR_SEG_END;
    w->need = 0;
    if (buf_cap < KR_BATCH_HEADER_SIZE || buf_cap > (size_t)INT32_MAX || out_cap < buf_cap ||
        flush_at > out_cap || w->pos < 0 || out_size < 0) {
        snprintf(reason, KR_REASON_MAX, "bad arguments");
        return KR_RECORDS_CORRUPT;
    }
    size_t used = 0; /* bytes in out, to go to the file at out_size */
    int rc = KR_RECORDS_OK;
    kr_bulk_yield(1);
    while (w->pos < end) {
        kr_bulk_yield(0);
        if (budget > 0 && w->read >= budget) {
            w->stop = KR_SEG_BUDGET;
            break;
        }
        size_t want = (size_t)(end - w->pos) < buf_cap ? (size_t)(end - w->pos) : buf_cap;
        ssize_t n = kr_pread_full(in_fd, buf, want, w->pos);
        if (n < 0) {
            rc = -1;
            break;
        }
        w->read += n;
        if ((size_t)n < want) {
            w->stop = KR_SEG_SHORT;
            break;
        }
        if (out_cap - used < (size_t)n && flush_out(out_fd, out, &used, &out_size, w)) {
            rc = -1;
            break;
        }
        size_t consumed = 0, out_len = 0, first = written->count;
        rc = kr_clean_batches(m, buf, (size_t)n, 0, o, s, out, out_cap, used, &out_len, &consumed,
                              written, &w->removed, &w->horizon, reason);
        if (rc && rc != KR_CLEAN_OUT_FULL)
            break;
        for (size_t i = first; i < written->count; i++) /* positions in out -> in the file */
            written->items[i].position += out_size;
        if (rc == KR_CLEAN_OUT_FULL) { /* a batch grown by its delete horizon did not fit */
            int empty = used + out_len == 0;
            used += out_len;
            w->pos += (int64_t)consumed;
            rc = KR_RECORDS_OK;
            if (!empty) {
                if (flush_out(out_fd, out, &used, &out_size, w)) {
                    rc = -1;
                    break;
                }
                continue; /* read on from that batch */
            }
            /* alone in an empty out: kr_clean_batch's bound (2.5 times) says out is < 3 times it */
            int64_t size = (int64_t)(int32_t)be32(buf + consumed + 8) + KR_LOG_OVERHEAD;
            if ((uint64_t)size > out_cap / 3) {
                w->stop = KR_SEG_GROW;
                w->need = size;
            } else {
                snprintf(reason, KR_REASON_MAX, "cleaned batch at %" PRId64 " past its bound", w->pos);
                rc = KR_RECORDS_CORRUPT;
            }
            break;
        }
        used += out_len;
        int a = consumed == (size_t)n ? 0 : after_stop(buf, (size_t)n, consumed, end - w->pos - (int64_t)consumed, buf_cap, w, reason);
        w->pos += (int64_t)consumed;
        if (a < 0) {
            rc = KR_RECORDS_CORRUPT;
            break;
        }
        if (a > 0)
            break;
        if (used >= flush_at && flush_out(out_fd, out, &used, &out_size, w)) {
            rc = -1;
            break;
        }
    }
    if (rc == KR_RECORDS_OK && flush_out(out_fd, out, &used, &out_size, w))
        rc = -1;
    return rc;
}
