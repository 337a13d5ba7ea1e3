/* Record batches v2 <-> Arrow column buffers (see kr_arrow.h).
 *
 * Record layout (after the 61-byte batch header), all varints zigzag:
 *   length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
 *   keyLength varint (-1 null), key, valueLength varint (-1 null), value,
 *   headerCount varint, headers: keyLength varint, key, valueLength varint (-1 null), value.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kr_arrow.h"
#include "kr_bytes.h"

#define HEADER_SIZE 61
#define ATTR_COMPRESSION 0x07
#define ATTR_LOG_APPEND_TIME 0x08
#define ATTR_CONTROL 0x20
#define MAX_ARROW_BYTES ((size_t)INT32_MAX) /* int32 offsets */

/* ---- small helpers -------------------------------------------------------------- */

static inline uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (v < 0 ? UINT64_MAX : 0); }

static inline int64_t unzigzag(uint64_t u) { return (int64_t)(u >> 1) ^ -(int64_t)(u & 1); }

static inline size_t varint_len(int64_t v)
{
    uint64_t u = zigzag(v);
    size_t n = 1;
    while (u >= 0x80) {
        u >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *put_varint(uint8_t *p, int64_t v)
{
    uint64_t u = zigzag(v);
    while (u >= 0x80) {
        *p++ = (uint8_t)(u | 0x80);
        u >>= 7;
    }
    *p++ = (uint8_t)u;
    return p;
}

/* Reads a zigzag varint of at most 5 bytes (wide: 10) from [*pp, lim). -1 when torn or
 * too long. */
static inline int get_varint(const uint8_t **pp, const uint8_t *lim, int wide, int64_t *out)
{
    const uint8_t *p = *pp;
    int max = wide ? 10 : 5;
    uint64_t acc = 0;
    for (int i = 0; i < max; i++) {
        if (p >= lim)
            return -1;
        uint8_t b = *p++;
        acc |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            int64_t v = unzigzag(acc);
            if (!wide && (v < INT32_MIN || v > INT32_MAX))
                return -1;
            *pp = p;
            *out = v;
            return 0;
        }
    }
    return -1;
}

static inline int bit_is_set(const uint8_t *bits, int64_t i) { return (bits[i >> 3] >> (i & 7)) & 1; }

/* ---- views ------------------------------------------------------------------------ */

static int check_span(const char *what, const uint8_t *validity, size_t validity_len,
                      const int32_t *offsets, size_t offsets_len, int64_t base, int64_t length,
                      uint64_t limit, char *reason)
{
    if (base < 0 || length < 0 || (uint64_t)base + (uint64_t)length >= (uint64_t)INT64_MAX) {
        snprintf(reason, KR_REASON_MAX, "%s: bad base %" PRId64 " / length %" PRId64, what, base, length);
        return -1;
    }
    uint64_t rows_end = (uint64_t)base + (uint64_t)length;
    if (offsets == NULL || ((uintptr_t)offsets & 3) != 0 || offsets_len < rows_end + 1) {
        snprintf(reason, KR_REASON_MAX, "%s: offsets buffer missing, misaligned or shorter than %" PRIu64 " entries",
                 what, rows_end + 1);
        return -1;
    }
    if (validity != NULL && (uint64_t)validity_len * 8 < rows_end) {
        snprintf(reason, KR_REASON_MAX, "%s: validity bitmap of %zu bytes for %" PRIu64 " rows", what,
                 validity_len, rows_end);
        return -1;
    }
    for (int64_t i = base; i <= (int64_t)rows_end; i++) {
        int32_t o = offsets[i];
        if (o < 0 || (uint64_t)o > limit || (i > base && o < offsets[i - 1])) {
            snprintf(reason, KR_REASON_MAX, "%s: offset %" PRId32 " at entry %" PRId64 " is out of order or outside [0, %" PRIu64 "]",
                     what, o, i, limit);
            return -1;
        }
    }
    return 0;
}

int kr_bin_view_check(const kr_bin_view *v, char *reason)
{
    if (v->data == NULL && v->data_len != 0) {
        snprintf(reason, KR_REASON_MAX, "binary column: no data buffer");
        return -1;
    }
    return check_span("binary column", v->validity, v->validity_len, v->offsets, v->offsets_len, v->base,
                      v->length, (uint64_t)v->data_len, reason);
}

int kr_headers_view_check(const kr_headers_view *h, char *reason)
{
    if (kr_bin_view_check(&h->key, reason) != 0 || kr_bin_view_check(&h->value, reason) != 0)
        return -1;
    if (h->key.length != h->value.length) {
        snprintf(reason, KR_REASON_MAX, "headers: %" PRId64 " keys but %" PRId64 " values", h->key.length,
                 h->value.length);
        return -1;
    }
    return check_span("headers column", h->validity, h->validity_len, h->offsets, h->offsets_len, h->base,
                      h->length, (uint64_t)h->key.length, reason);
}

static inline int bv_null(const kr_bin_view *v, int64_t i)
{
    return v->validity != NULL && !bit_is_set(v->validity, v->base + i);
}

static inline const uint8_t *bv_get(const kr_bin_view *v, int64_t i, int32_t *n)
{
    int32_t a = v->offsets[v->base + i];
    *n = v->offsets[v->base + i + 1] - a;
    return v->data + a;
}

/* ---- sink ------------------------------------------------------------------------- */

/* Size of row r's header entries [*first, *last) as encoded, or -1 (reason) when one has
 * a null key. */
static int64_t headers_size(const kr_headers_view *h, int64_t r, int64_t *first, int64_t *last,
                            char *reason)
{
    *first = *last = 0;
    if (h == NULL || (h->validity != NULL && !bit_is_set(h->validity, h->base + r)))
        return 0;
    *first = h->offsets[h->base + r];
    *last = h->offsets[h->base + r + 1];
    int64_t size = 0;
    for (int64_t j = *first; j < *last; j++) {
        if (bv_null(&h->key, j)) {
            snprintf(reason, KR_REASON_MAX, "row %" PRId64 ": a header has a null key", r);
            return -1;
        }
        int32_t kn, vn;
        bv_get(&h->key, j, &kn);
        bv_get(&h->value, j, &vn);
        int64_t vlen = bv_null(&h->value, j) ? -1 : vn;
        size += (int64_t)varint_len(kn) + kn + (int64_t)varint_len(vlen) + (vlen > 0 ? vlen : 0);
    }
    return size;
}

int kr_encode_records(const kr_bin_view *key, const kr_bin_view *value,
                      const kr_headers_view *headers, int64_t row, int64_t row_end,
                      size_t max_bytes, uint8_t *out, size_t cap, size_t *out_len,
                      int64_t *rows_done, size_t *first_size, char *reason)
{
    *out_len = 0;
    *rows_done = 0;
    *first_size = 0;
    if (row < 0 || row_end < row || row_end > value->length || (key && row_end > key->length) ||
        (headers && row_end > headers->length)) {
        snprintf(reason, KR_REASON_MAX, "rows [%" PRId64 ", %" PRId64 ") outside the columns", row, row_end);
        return KR_ENCODE_ERROR;
    }
    size_t used = 0;
    int64_t r = row;
    for (; r < row_end && r - row < INT32_MAX; r++) {
        int64_t delta = r - row;
        int32_t kn = 0, vn = 0;
        const uint8_t *k = NULL, *v = NULL;
        int64_t klen = -1, vlen = -1;
        if (key != NULL && !bv_null(key, r)) {
            k = bv_get(key, r, &kn);
            klen = kn;
        }
        if (!bv_null(value, r)) {
            v = bv_get(value, r, &vn);
            vlen = vn;
        }
        int64_t hfirst, hlast;
        int64_t hsize = headers_size(headers, r, &hfirst, &hlast, reason);
        if (hsize < 0)
            return KR_ENCODE_ERROR;
        int64_t body = 1 + 1 + (int64_t)varint_len(delta) + (int64_t)varint_len(klen) + (klen > 0 ? klen : 0) +
                       (int64_t)varint_len(vlen) + (vlen > 0 ? vlen : 0) + (int64_t)varint_len(hlast - hfirst) + hsize;
        if (body > INT32_MAX - 16) {
            snprintf(reason, KR_REASON_MAX, "row %" PRId64 ": a record of %" PRId64 " bytes is too large", r, body);
            return KR_ENCODE_ERROR;
        }
        size_t size = varint_len(body) + (size_t)body;
        if (r > row && used + size > max_bytes)
            break;
        if (size > cap - used) {
            if (r == row) {
                *first_size = size;
                return KR_ENCODE_NEED_SPACE;
            }
            break;
        }
        uint8_t *p = out + used;
        p = put_varint(p, body);
        *p++ = 0; /* attributes */
        *p++ = 0; /* timestampDelta */
        p = put_varint(p, delta);
        p = put_varint(p, klen);
        if (klen > 0) {
            memcpy(p, k, (size_t)klen);
            p += klen;
        }
        p = put_varint(p, vlen);
        if (vlen > 0) {
            memcpy(p, v, (size_t)vlen);
            p += vlen;
        }
        p = put_varint(p, hlast - hfirst);
        for (int64_t j = hfirst; j < hlast; j++) {
            int32_t hkn, hvn;
            const uint8_t *hk = bv_get(&headers->key, j, &hkn);
            const uint8_t *hv = bv_get(&headers->value, j, &hvn);
            int64_t hvlen = bv_null(&headers->value, j) ? -1 : hvn;
            p = put_varint(p, hkn);
            memcpy(p, hk, (size_t)hkn);
            p += hkn;
            p = put_varint(p, hvlen);
            if (hvlen > 0) {
                memcpy(p, hv, (size_t)hvlen);
                p += hvlen;
            }
        }
        used += size;
    }
    *out_len = used;
    *rows_done = r - row;
    return KR_ENCODE_OK;
}

int kr_batch_seal(uint8_t *b, size_t len, int16_t attributes, int32_t records_count,
                  int64_t first_timestamp, int64_t max_timestamp, int64_t producer_id,
                  int16_t producer_epoch, int32_t base_sequence, char *reason)
{
    if (len < HEADER_SIZE || len - KR_LOG_OVERHEAD > (size_t)INT32_MAX || records_count < 1) {
        snprintf(reason, KR_REASON_MAX, "cannot seal a batch of %zu bytes and %" PRId32 " records", len,
                 records_count);
        return -1;
    }
    put_be64(b, 0);
    put_be32(b + 8, (uint32_t)(len - KR_LOG_OVERHEAD));
    put_be32(b + 12, UINT32_MAX); /* partitionLeaderEpoch -1 */
    b[16] = 2;
    put_be16(b + 21, (uint16_t)attributes);
    put_be32(b + 23, (uint32_t)(records_count - 1));
    put_be64(b + 27, (uint64_t)first_timestamp);
    put_be64(b + 35, (uint64_t)max_timestamp);
    put_be64(b + 43, (uint64_t)producer_id);
    put_be16(b + 51, (uint16_t)producer_epoch);
    put_be32(b + 53, (uint32_t)base_sequence);
    put_be32(b + 57, (uint32_t)records_count);
    put_be32(b + 17, kr_crc32c(0, b + 21, len - 21));
    return 0;
}

uint32_t kr_murmur2(const uint8_t *data, size_t len)
{
    /* Kafka's Utils.murmur2 (seed 0x9747b28c), in unsigned arithmetic. */
    const uint32_t m = 0x5bd1e995;
    uint32_t h = 0x9747b28cu ^ (uint32_t)len;
    size_t n4 = len / 4;
    for (size_t i = 0; i < n4; i++) {
        const uint8_t *p = data + 4 * i;
        uint32_t k = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    const uint8_t *t = data + (len & ~(size_t)3);
    switch (len % 4) {
    case 3:
        h ^= (uint32_t)t[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)t[1] << 8;
        /* fall through */
    case 1:
        h ^= t[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

uint32_t kr_crc32_ieee(const uint8_t *data, size_t len)
{
    /* Reflected 0xEDB88320 (zlib's crc32, librdkafka's rd_crc32), 4 bits at a time: keys
     * are short and a 16-entry table needs no initialisation. */
    static const uint32_t nibble[16] = {
        0x00000000, 0x1db71064, 0x3b6e20c8, 0x26d930ac, 0x76dc4190, 0x6b6b51f4, 0x4db26158, 0x5005713c,
        0xedb88320, 0xf00f9344, 0xd6d6a3e8, 0xcb61b38c, 0x9b64c2b0, 0x86d3d2d4, 0xa00ae278, 0xbdbdf21c,
    };
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < len; i++) {
        c ^= data[i];
        c = (c >> 4) ^ nibble[c & 15];
        c = (c >> 4) ^ nibble[c & 15];
    }
    return c ^ 0xffffffffu;
}

int kr_partition_keys(const kr_bin_view *key, int32_t num_partitions, int algorithm,
                      int null_as_empty, int32_t *out, char *reason)
{
    if (num_partitions < 1 || (algorithm != KR_PARTITIONER_MURMUR2 && algorithm != KR_PARTITIONER_CRC32)) {
        snprintf(reason, KR_REASON_MAX, "bad partitioner %d for %" PRId32 " partitions", algorithm, num_partitions);
        return -1;
    }
    static const uint8_t empty[1] = {0};
    for (int64_t i = 0; i < key->length; i++) {
        int32_t n = 0;
        const uint8_t *k = empty;
        if (bv_null(key, i)) {
            if (!null_as_empty) {
                out[i] = -1;
                continue;
            }
        } else {
            k = bv_get(key, i, &n);
        }
        uint32_t h = algorithm == KR_PARTITIONER_MURMUR2 ? (kr_murmur2(k, (size_t)n) & 0x7fffffffu)
                                                         : kr_crc32_ieee(k, (size_t)n);
        out[i] = (int32_t)(h % (uint32_t)num_partitions);
    }
    return 0;
}

/* ---- source ----------------------------------------------------------------------- */

static int gb_reserve(kr_growbuf *b, size_t extra)
{
    if (extra <= b->cap - b->len)
        return 0;
    if (extra > SIZE_MAX / 4 - b->len)
        return -1;
    size_t need = b->len + extra;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < need)
        cap *= 2;
    uint8_t *p = realloc(b->data, cap);
    if (p == NULL)
        return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

static inline int gb_put(kr_growbuf *b, const void *p, size_t n)
{
    if (gb_reserve(b, n) != 0)
        return -1;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

/* Appends bit number idx (every earlier bit was appended before). */
static inline int gb_bit(kr_growbuf *b, int64_t idx, int set)
{
    size_t need = (size_t)(idx >> 3) + 1;
    if (b->len < need) {
        if (gb_reserve(b, need - b->len) != 0)
            return -1;
        memset(b->data + b->len, 0, need - b->len);
        b->len = need;
    }
    if (set)
        b->data[idx >> 3] |= (uint8_t)(1u << (idx & 7));
    return 0;
}

/* Appends a binary entry (validity bit, data, next offset); NULL p = null. */
static inline int gb_entry(kr_growbuf *valid, kr_growbuf *offs, kr_growbuf *data, int64_t idx,
                           const uint8_t *p, size_t n, int64_t *nulls)
{
    if (gb_bit(valid, idx, p != NULL) != 0)
        return -1;
    if (p == NULL)
        (*nulls)++;
    else if (n > MAX_ARROW_BYTES - data->len || gb_put(data, p, n) != 0)
        return -1;
    int32_t end = (int32_t)data->len;
    return gb_put(offs, &end, 4);
}

void kr_arrow_out_free(kr_arrow_out *o)
{
    kr_growbuf *all[] = {&o->key_valid,   &o->key_offsets,  &o->key_data,     &o->value_valid, &o->value_offsets,
                         &o->value_data,  &o->offsets,      &o->timestamps,   &o->timestamp_types, &o->hdr_valid,
                         &o->hdr_offsets, &o->hkey_offsets, &o->hkey_data,    &o->hval_valid,  &o->hval_offsets,
                         &o->hval_data};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        free(all[i]->data);
        all[i]->data = NULL;
        all[i]->len = all[i]->cap = 0;
    }
}

int kr_arrow_out_init(kr_arrow_out *o, int with_headers)
{
    memset(o, 0, sizeof *o);
    o->with_headers = with_headers;
    int32_t zero = 0;
    if (gb_put(&o->key_offsets, &zero, 4) || gb_put(&o->value_offsets, &zero, 4) ||
        (with_headers && (gb_put(&o->hdr_offsets, &zero, 4) || gb_put(&o->hkey_offsets, &zero, 4) ||
                          gb_put(&o->hval_offsets, &zero, 4)))) {
        kr_arrow_out_free(o);
        return -1;
    }
    return 0;
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 when invalid (RFC 3629:
 * no overlong forms, no surrogates, nothing past U+10FFFF). */
static size_t utf8_seq(const uint8_t *p, size_t n)
{
    uint8_t c = p[0];
    if (c < 0x80)
        return 1;
    size_t len;
    uint8_t lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        if (c == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return len;
}

/* Appends a header key as Arrow utf8: bytes that are not UTF-8 become U+FFFD, as Kafka's
 * Java client decodes header keys. */
static int gb_put_utf8(kr_growbuf *b, const uint8_t *p, size_t n)
{
    static const uint8_t replacement[3] = {0xef, 0xbf, 0xbd};
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        size_t k;
        while (run < n && (k = utf8_seq(p + run, n - run)) != 0)
            run += k;
        if (run > i && (run - i > MAX_ARROW_BYTES - b->len || gb_put(b, p + i, run - i) != 0))
            return -1;
        i = run;
        if (i < n) {
            if (3 > MAX_ARROW_BYTES - b->len || gb_put(b, replacement, 3) != 0)
                return -1;
            i++;
        }
    }
    return 0;
}

#define CORRUPT(...)                                            \
    do {                                                        \
        snprintf(reason, KR_REASON_MAX, __VA_ARGS__);           \
        return KR_DECODE_CORRUPT;                               \
    } while (0)
#define NOMEM()                                                                               \
    do {                                                                                      \
        snprintf(reason, KR_REASON_MAX, "out of memory, or a column past 2 GiB of data");     \
        return KR_DECODE_NOMEM;                                                               \
    } while (0)

int kr_arrow_decode_records(kr_arrow_out *o, const uint8_t *recs, size_t len, int32_t count,
                            int64_t base_offset, int64_t base_timestamp, int timestamp_type,
                            int64_t max_timestamp, int64_t start, int64_t end, char *reason)
{
    const uint8_t *p = recs, *lim = recs + len;
    if (count < 0)
        CORRUPT("negative records count %" PRId32, count);
    for (int32_t i = 0; i < count; i++) {
        int64_t rec_len, ts_delta, off_delta, klen, vlen, hcount;
        if (get_varint(&p, lim, 0, &rec_len) != 0 || rec_len < 0 || rec_len > lim - p)
            CORRUPT("record %" PRId32 ": bad or torn length", i);
        const uint8_t *rend = p + rec_len;
        if (p >= rend)
            CORRUPT("record %" PRId32 ": empty", i);
        p++; /* attributes: unused in v2 records */
        if (get_varint(&p, rend, 1, &ts_delta) != 0 || get_varint(&p, rend, 0, &off_delta) != 0 ||
            off_delta < 0)
            CORRUPT("record %" PRId32 ": bad timestamp or offset delta", i);
        if (base_offset > INT64_MAX - off_delta)
            CORRUPT("record %" PRId32 ": offset overflows", i);
        int64_t offset = base_offset + off_delta;
        int keep = offset >= start && offset < end;
        if (get_varint(&p, rend, 0, &klen) != 0 || klen < -1 || klen > rend - p)
            CORRUPT("record %" PRId32 ": bad key length", i);
        const uint8_t *k = klen >= 0 ? p : NULL;
        p += klen > 0 ? klen : 0;
        if (get_varint(&p, rend, 0, &vlen) != 0 || vlen < -1 || vlen > rend - p)
            CORRUPT("record %" PRId32 ": bad value length", i);
        const uint8_t *v = vlen >= 0 ? p : NULL;
        p += vlen > 0 ? vlen : 0;
        if (get_varint(&p, rend, 0, &hcount) != 0 || hcount < 0 || hcount > rend - p)
            CORRUPT("record %" PRId32 ": bad header count", i);
        int64_t row = o->rows;
        if (keep) {
            int64_t ts = timestamp_type == 1 ? max_timestamp : base_timestamp + ts_delta;
            if (timestamp_type != 1 && ((ts_delta > 0 && base_timestamp > INT64_MAX - ts_delta) ||
                                        (ts_delta < 0 && base_timestamp < INT64_MIN - ts_delta)))
                CORRUPT("record %" PRId32 ": timestamp overflows", i);
            /* Spark's timestamp is in microseconds; a millisecond value beyond its range is
             * clamped (Kafka allows any int64, no real clock gets there). */
            int64_t us = ts > INT64_MAX / 1000 ? INT64_MAX : ts < INT64_MIN / 1000 ? INT64_MIN : ts * 1000;
            int32_t tt = timestamp_type;
            if (gb_entry(&o->key_valid, &o->key_offsets, &o->key_data, row, k, (size_t)(klen > 0 ? klen : 0),
                         &o->key_nulls) ||
                gb_entry(&o->value_valid, &o->value_offsets, &o->value_data, row, v,
                         (size_t)(vlen > 0 ? vlen : 0), &o->value_nulls) ||
                gb_put(&o->offsets, &offset, 8) || gb_put(&o->timestamps, &us, 8) ||
                gb_put(&o->timestamp_types, &tt, 4))
                NOMEM();
        }
        for (int64_t h = 0; h < hcount; h++) {
            int64_t hk, hv;
            if (get_varint(&p, rend, 0, &hk) != 0 || hk < 0 || hk > rend - p)
                CORRUPT("record %" PRId32 ": bad header key length", i);
            const uint8_t *hkp = p;
            p += hk;
            if (get_varint(&p, rend, 0, &hv) != 0 || hv < -1 || hv > rend - p)
                CORRUPT("record %" PRId32 ": bad header value length", i);
            const uint8_t *hvp = hv >= 0 ? p : NULL;
            p += hv > 0 ? hv : 0;
            if (keep && o->with_headers) {
                if (gb_entry(&o->hval_valid, &o->hval_offsets, &o->hval_data, o->hdr_count, hvp,
                             (size_t)(hv > 0 ? hv : 0), &o->hval_nulls) ||
                    gb_put_utf8(&o->hkey_data, hkp, (size_t)hk))
                    NOMEM();
                int32_t kend = (int32_t)o->hkey_data.len;
                if (gb_put(&o->hkey_offsets, &kend, 4))
                    NOMEM();
                o->hdr_count++;
                if (o->hdr_count > INT32_MAX)
                    NOMEM();
            }
        }
        if (p != rend)
            CORRUPT("record %" PRId32 ": %td bytes left over inside the record", i, rend - p);
        if (keep) {
            if (o->with_headers) {
                /* A record without headers reads as null, as Spark's Kafka source shows it. */
                int32_t hend = (int32_t)o->hdr_count;
                if (gb_bit(&o->hdr_valid, row, hcount > 0) || gb_put(&o->hdr_offsets, &hend, 4))
                    NOMEM();
                if (hcount == 0)
                    o->hdr_nulls++;
            }
            o->rows++;
        }
    }
    if (p != lim)
        CORRUPT("%td bytes after the last of %" PRId32 " records", lim - p, count);
    return KR_DECODE_OK;
}

int kr_arrow_decode_batches(kr_arrow_out *o, const uint8_t *buf, size_t len, size_t *pos,
                            int64_t start, int64_t end, int64_t *next_offset,
                            kr_batch_info *info, char *reason)
{
    while (*pos < len) {
        size_t rem = len - *pos;
        if (rem < KR_LOG_OVERHEAD)
            break; /* partial trailing batch */
        int32_t blen = (int32_t)be32(buf + *pos + 8);
        if (blen >= 0 && (uint64_t)blen + KR_LOG_OVERHEAD > rem)
            break;
        if (kr_batch_check(buf, len, *pos, 1, info, reason) != 0)
            return KR_DECODE_CORRUPT;
        if (info->base_offset < 0 || info->base_offset > INT64_MAX - 1 - info->last_offset_delta) {
            snprintf(reason, KR_REASON_MAX, "batch at position %zu: bad base offset %" PRId64, *pos,
                     info->base_offset);
            return KR_DECODE_CORRUPT;
        }
        if (info->base_offset >= end)
            break;
        int64_t last = info->base_offset + info->last_offset_delta;
        if (last >= start && !(info->attributes & ATTR_CONTROL)) {
            if (info->attributes & ATTR_COMPRESSION)
                return KR_DECODE_COMPRESSED;
            int rc = kr_arrow_decode_records(o, buf + *pos + HEADER_SIZE, (size_t)info->size - HEADER_SIZE,
                                             info->records_count, info->base_offset, info->first_timestamp,
                                             (info->attributes & ATTR_LOG_APPEND_TIME) ? 1 : 0,
                                             info->max_timestamp, start, end, reason);
            if (rc != KR_DECODE_OK)
                return rc;
        }
        if (last + 1 > *next_offset)
            *next_offset = last + 1;
        *pos += (size_t)info->size;
    }
    return KR_DECODE_OK;
}
