/* Standalone driver for csrc/: adversarial inputs for every parser, each copied into an
 * exactly-sized heap block so valgrind/ASan flag any read past the end.
 *
 *   make -C tests/c check        # plain run
 *   make -C tests/c valgrind     # under valgrind --error-exitcode=1
 *
 * Usage: test_core [fuzz_iterations]
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kr_arrow.h"
#include "kr_core.h"

static long checks, failures;

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        checks++;                                                                        \
        if (!(cond)) {                                                                   \
            failures++;                                                                  \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);     \
        }                                                                                \
    } while (0)

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static uint64_t rnd(void) /* xorshift64*: deterministic, no libc rand() state */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

static void fill_random(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rnd();
}

/* Heap copy of exactly n bytes (n == 0 gives a 1-byte block that must not be read). */
static uint8_t *exact(const uint8_t *src, size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    if (!p)
        abort();
    if (n)
        memcpy(p, src, n);
    return p;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

/* A v2 batch of `count` minimal 7-byte records with a correct CRC; returns its size. */
static size_t make_batch(uint8_t *out, int32_t count, uint16_t attributes)
{
    size_t records = (size_t)count * 7;
    memset(out, 0, KR_BATCH_HEADER_SIZE);
    put64(out, 0);
    put32(out + 8, (uint32_t)(KR_MIN_BATCH_LENGTH + records));
    put32(out + 12, 0);
    out[16] = 2;
    out[21] = (uint8_t)(attributes >> 8);
    out[22] = (uint8_t)attributes;
    put32(out + 23, (uint32_t)(count > 0 ? count - 1 : 0));
    put64(out + 27, 1000);
    put64(out + 35, 1000 + (uint64_t)count);
    put64(out + 43, (uint64_t)-1);
    out[51] = 0xff;
    out[52] = 0xff;
    put32(out + 53, (uint32_t)-1);
    put32(out + 57, (uint32_t)count);
    fill_random(out + KR_BATCH_HEADER_SIZE, records);
    size_t size = KR_BATCH_HEADER_SIZE + records;
    put32(out + 17, kr_crc32c_table(0, out + 21, size - 21));
    return size;
}

static size_t scan_count(const uint8_t *buf, size_t len, size_t *valid)
{
    kr_batch_vec vec = {0};
    size_t err_pos;
    char reason[KR_REASON_MAX];
    int rc = kr_scan_batches(buf, len, 0, 1, 0, &vec, valid, &err_pos, reason);
    CHECK(rc == 0 || rc == 1);
    CHECK(*valid <= len);
    if (rc == 1)
        CHECK(err_pos == *valid && reason[0] != '\0');
    size_t total = 0;
    for (size_t i = 0; i < vec.count; i++)
        total += (size_t)vec.items[i].size;
    CHECK(total == *valid);
    size_t n = vec.count;
    kr_batch_vec_free(&vec);
    return n;
}

static void test_crc(void)
{
    static uint8_t data[100000];
    fill_random(data, sizeof(data));
    CHECK(kr_crc32c(0, "123456789", 9) == 0xE3069283u);
    CHECK(kr_crc32c_table(0, "123456789", 9) == 0xE3069283u);
    for (size_t len = 0; len < 4000; len += 1 + len / 16)
        for (size_t off = 0; off < 8; off++) {
            uint8_t *p = exact(data + off, len);
            uint32_t t = kr_crc32c_table(0, p, len);
            if (kr_crc32c_have_sse42())
                CHECK(kr_crc32c_sse42(0, p, len) == t);
            CHECK(kr_crc32c(0, p, len) == t);
            free(p);
        }
    size_t big[] = {24576, 24577, 3 * 8192 + 768 + 9, sizeof(data)};
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
        uint8_t *p = exact(data, big[i]);
        uint32_t whole = kr_crc32c_table(0, p, big[i]);
        CHECK(kr_crc32c(0, p, big[i]) == whole);
        CHECK(kr_crc32c(kr_crc32c(0, p, 1000), p + 1000, big[i] - 1000) == whole);
        free(p);
    }
    CHECK(kr_xxh64("", 0, 0) == 0xEF46DB3751D8E999ULL);
    for (size_t len = 0; len < 100; len++) { /* reads stay within exact blocks */
        uint8_t *p = exact(data, len);
        (void)kr_xxh64(p, len, len);
        free(p);
    }
}

static void test_batches(long iterations)
{
    uint8_t *buf = malloc(1 << 16);
    size_t len = 0, ends[4];
    int counts[4] = {3, 1, 0, 10};
    for (int i = 0; i < 4; i++) {
        len += make_batch(buf + len, counts[i], i == 1 ? 3 : 0);
        ends[i] = len;
    }
    size_t valid;
    uint8_t *whole = exact(buf, len);
    CHECK(scan_count(whole, len, &valid) == 4 && valid == len);

    int64_t next;
    size_t err_pos;
    char reason[KR_REASON_MAX];
    CHECK(kr_assign_offsets(whole, len, 100, 5, 0, &next, &err_pos, reason) == 0);
    CHECK(next == 100 + 3 + 1 + 1 + 10);
    CHECK(scan_count(whole, len, &valid) == 4 && valid == len); /* CRC untouched */
    free(whole);

    /* every truncation: valid_bytes falls back to the previous batch end */
    for (size_t cut = 0; cut <= len; cut++) {
        uint8_t *p = exact(buf, cut);
        size_t expect = 0;
        for (int i = 0; i < 4; i++)
            if (ends[i] <= cut)
                expect = ends[i];
        scan_count(p, cut, &valid);
        CHECK(valid == expect);
        (void)kr_assign_offsets(p, cut, 0, 0, 0, &next, &err_pos, reason);
        free(p);
    }
    /* every single-byte corruption */
    for (size_t pos = 0; pos < len; pos++)
        for (int bit = 0; bit < 8; bit += 3) {
            uint8_t *p = exact(buf, len);
            p[pos] ^= (uint8_t)(1u << bit);
            scan_count(p, len, &valid);
            if (pos >= 21 && pos < ends[0])
                CHECK(valid == 0); /* under the first batch's CRC */
            (void)kr_assign_offsets(p, len, 7, 1, 0, &next, &err_pos, reason);
            free(p);
        }
    /* random bytes, then random bytes shaped like a header */
    uint8_t tmp[512];
    for (long it = 0; it < iterations; it++) {
        size_t n = (size_t)(rnd() % sizeof(tmp));
        fill_random(tmp, n);
        if (n > 17 && (it & 1)) {
            put32(tmp + 8, (uint32_t)(rnd() % (n + 20)));
            tmp[16] = 2;
        }
        uint8_t *p = exact(tmp, n);
        scan_count(p, n, &valid);
        (void)kr_assign_offsets(p, n, (int64_t)(rnd() >> 1), (int32_t)rnd(), (int)(it & 2),
                                &next, &err_pos, reason);
        free(p);
    }
    /* out-of-range start */
    kr_batch_vec vec = {0};
    CHECK(kr_scan_batches(buf, len, 0, 1, 2, &vec, &valid, &err_pos, reason) == 0);
    CHECK(vec.count == 2 && valid == ends[1]); /* stopped by max_batches */
    kr_batch_vec_free(&vec);
    CHECK(kr_scan_batches(buf, 10, 11, 1, 0, &vec, &valid, &err_pos, reason) == 1);
    kr_batch_vec_free(&vec);
    free(buf);
}

/* ---- records walker (kr_records.c) ---------------------------------------------- */

static size_t put_zz(uint8_t *p, int64_t v)
{
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    size_t n = 0;
    while (u >= 0x80) {
        p[n++] = (uint8_t)(u | 0x80);
        u >>= 7;
    }
    p[n++] = (uint8_t)u;
    return n;
}

/* One record with offsetDelta `i`, a value of vlen bytes and `headers` headers. */
static size_t make_record(uint8_t *out, int32_t i, size_t vlen, int headers)
{
    uint8_t body[4096];
    size_t n = 0;
    body[n++] = 0;
    n += put_zz(body + n, (int64_t)i * 3);
    n += put_zz(body + n, i);
    n += put_zz(body + n, i % 3 ? 2 : -1);
    if (i % 3) {
        body[n++] = 'k';
        body[n++] = 'k';
    }
    n += put_zz(body + n, (int64_t)vlen);
    fill_random(body + n, vlen);
    n += vlen;
    n += put_zz(body + n, headers);
    for (int h = 0; h < headers; h++) {
        n += put_zz(body + n, 1);
        body[n++] = 'h';
        n += put_zz(body + n, h ? 1 : -1);
        if (h)
            body[n++] = 'v';
    }
    size_t m = put_zz(out, (int64_t)n);
    memcpy(out + m, body, n);
    return m + n;
}

/* Verdict of the streaming walker, fed in pieces cut at random (its least timestamp in
 * stream_min_ts). */
static int64_t stream_min_ts;
static int stream_verdict(const uint8_t *p, size_t len, int32_t count, int64_t *max_ts)
{
    kr_records_state s;
    char reason[KR_REASON_MAX];
    kr_records_init(&s, count, 1000);
    size_t pos = 0;
    while (pos < len) {
        size_t n = (size_t)(rnd() % 9);
        if (n > len - pos)
            n = len - pos;
        uint8_t *piece = exact(p + pos, n); /* exactly sized: ASan sees any overread */
        int rc = kr_records_feed(&s, piece, n, reason);
        free(piece);
        if (rc)
            return rc;
        pos += n;
    }
    int rc = kr_records_finish(&s, reason);
    *max_ts = s.max_timestamp;
    stream_min_ts = s.min_timestamp;
    return rc;
}

static void test_records(long iterations)
{
    uint8_t *buf = malloc(1 << 16);
    size_t len = 0;
    int32_t count = 40;
    for (int32_t i = 0; i < count; i++)
        len += make_record(buf + len, i, (size_t)(rnd() % 200), (int)(i % 4));
    char reason[KR_REASON_MAX];
    int64_t max_ts = 0, smax = 0, min_ts = 0;
    uint8_t *p = exact(buf, len);
    CHECK(kr_records_check(p, len, count, 1000, &min_ts, &max_ts, reason) == KR_RECORDS_OK);
    CHECK(max_ts == 1000 + 3 * (count - 1) && min_ts == 1000);
    CHECK(stream_verdict(p, len, count, &smax) == KR_RECORDS_OK && smax == max_ts &&
          stream_min_ts == min_ts);
    CHECK(kr_records_check(p, len, count + 1, 1000, NULL, &max_ts, reason) == KR_RECORDS_INVALID);
    CHECK(kr_records_check(p, len, count - 1, 1000, NULL, &max_ts, reason) == KR_RECORDS_INVALID);
    CHECK(kr_records_check(p, len, 0x7FFFFFFF, 1000, NULL, &max_ts, reason) == KR_RECORDS_INVALID);
    /* KIP-937's slow path: the records outside [1015, 1090] are 0..4 and 31..39 */
    int32_t idx[40], found = -1;
    int64_t stamps[40];
    CHECK(kr_records_outside(p, len, count, 1000, 1015, 1090, idx, stamps, &found, reason) ==
          KR_RECORDS_OK);
    CHECK(found == 14 && idx[0] == 0 && idx[4] == 4 && idx[5] == 31 && idx[13] == 39);
    CHECK(stamps[5] == 1093 && stamps[0] == 1000);
    CHECK(kr_records_outside(p, len, count, 1000, INT64_MIN, INT64_MAX, idx, stamps, &found,
                             reason) == KR_RECORDS_OK && found == 0);
    /* a base timestamp whose deltas overflow: corrupt, not wrapped */
    CHECK(kr_records_outside(p, len, count, INT64_MAX - 5, 0, 0, idx, stamps, &found, reason) ==
          KR_RECORDS_CORRUPT);
    free(p);
    /* every truncation: corrupt (mid-record) or invalid (too few records), never OK;
     * both walkers agree */
    for (size_t cut = 0; cut < len; cut++) {
        p = exact(buf, cut);
        int a = kr_records_check(p, cut, count, 1000, NULL, &max_ts, reason);
        CHECK(a != KR_RECORDS_OK);
        CHECK(stream_verdict(p, cut, count, &smax) == a);
        free(p);
    }
    /* mutations and random bytes: the walkers agree, nothing reads out of bounds */
    uint8_t tmp[600];
    for (long it = 0; it < iterations; it++) {
        size_t n;
        if (it & 1) {
            n = len < sizeof(tmp) ? len : sizeof(tmp);
            memcpy(tmp, buf, n);
            for (int k = (int)(rnd() % 4); k >= 0; k--)
                tmp[rnd() % n] = (uint8_t)(rnd() % 3 == 0 ? 0x80 | rnd() : rnd());
            n = (size_t)(rnd() % (n + 1));
        } else {
            n = (size_t)(rnd() % 64);
            fill_random(tmp, n);
        }
        int32_t c = (int32_t)(rnd() % 50);
        p = exact(tmp, n);
        int a = kr_records_check(p, n, c, (int64_t)rnd(), &min_ts, &max_ts, reason);
        CHECK(a == KR_RECORDS_OK || a == KR_RECORDS_CORRUPT || a == KR_RECORDS_INVALID);
        if (a == KR_RECORDS_OK)
            CHECK(c == 0 ? min_ts == INT64_MAX : min_ts <= max_ts);
        /* the slow path on any bytes: never out of bounds, never more than c records */
        int32_t oidx[50];
        int64_t ostamps[50];
        int32_t ofound = 0;
        int o = kr_records_outside(p, n, c, (int64_t)rnd(), 0, 1 << 20, oidx, ostamps, &ofound,
                                   reason);
        CHECK((o == KR_RECORDS_OK || o == KR_RECORDS_CORRUPT) && ofound >= 0 && ofound <= c);
        kr_records_state s;
        kr_records_init(&s, c, (int64_t)rnd());
        (void)kr_records_feed(&s, p, n, reason);
        (void)kr_records_finish(&s, reason);
        free(p);
        if (!(it & 1)) /* same base timestamp for the differential check */
            continue;
        p = exact(tmp, n);
        int b = kr_records_check(p, n, c, 1000, &min_ts, &max_ts, reason);
        CHECK(stream_verdict(p, n, c, &smax) == b);
        if (b == KR_RECORDS_OK)
            CHECK(smax == max_ts && stream_min_ts == min_ts);
        free(p);
    }
    free(buf);
}

/* The Spark source's decoder (kr_arrow.c): a valid batch of records (keys, nulls,
 * headers) decodes to one row each; mutated bytes (with the CRC made right again, so the
 * record walk is reached), truncations and random record counts on exactly sized copies
 * are errors or results, never out-of-bounds reads or leaks. */
static size_t wrap_batch(uint8_t *out, const uint8_t *records, size_t len, int32_t count)
{
    memset(out, 0, KR_BATCH_HEADER_SIZE);
    put64(out, 100);
    put32(out + 8, (uint32_t)(KR_MIN_BATCH_LENGTH + len));
    out[16] = 2;
    put32(out + 23, (uint32_t)(count - 1));
    put64(out + 27, 1000);
    put64(out + 35, 1000 + 3 * (uint64_t)(count - 1));
    put64(out + 43, (uint64_t)-1);
    out[51] = 0xff;
    out[52] = 0xff;
    put32(out + 53, (uint32_t)-1);
    put32(out + 57, (uint32_t)count);
    memcpy(out + KR_BATCH_HEADER_SIZE, records, len);
    size_t size = KR_BATCH_HEADER_SIZE + len;
    put32(out + 17, kr_crc32c_table(0, out + 21, size - 21));
    return size;
}

static int arrow_decode(const uint8_t *buf, size_t len, int64_t *rows)
{
    kr_arrow_out o;
    char reason[KR_REASON_MAX];
    size_t pos = 0;
    int64_t next = 0;
    kr_batch_info info;
    if (kr_arrow_out_init(&o, 1) != 0)
        return -1;
    int r = kr_arrow_decode_batches(&o, buf, len, &pos, 0, INT64_MAX, &next, &info, reason);
    *rows = o.rows;
    kr_arrow_out_free(&o);
    return r;
}

static void test_arrow(long iterations)
{
    uint8_t *recs = malloc(1 << 16), *batch = malloc(1 << 16);
    size_t len = 0;
    int32_t count = 30;
    for (int32_t i = 0; i < count; i++)
        len += make_record(recs + len, i, (size_t)(rnd() % 100), (int)(i % 3));
    size_t size = wrap_batch(batch, recs, len, count);
    int64_t rows = 0;
    uint8_t *p = exact(batch, size);
    CHECK(arrow_decode(p, size, &rows) == KR_DECODE_OK && rows == count);
    free(p);
    for (long it = 0; it < iterations; it++) {
        uint8_t tmp[1 << 13];
        size_t n = size;
        memcpy(tmp, batch, size);
        int flips = 1 + (int)(rnd() % 4);
        for (int f = 0; f < flips; f++)
            tmp[KR_BATCH_HEADER_SIZE + rnd() % len] = (uint8_t)rnd();
        if (it % 3 == 0)
            put32(tmp + 57, (uint32_t)(rnd() % 64));
        if (it & 1)  /* a right CRC: the record walk itself must hold */
            put32(tmp + 17, kr_crc32c_table(0, tmp + 21, n - 21));
        if (it % 5 == 0)
            n = (size_t)(rnd() % (n + 1));
        p = exact(tmp, n);
        int r = arrow_decode(p, n, &rows);
        CHECK(r == KR_DECODE_OK || r == KR_DECODE_CORRUPT);
        CHECK(rows >= 0 && rows <= 64);
        free(p);
    }
    free(recs);
    free(batch);
}

/* The cleaner's loops (kr_clean.c): a valid records section maps and filters (records
 * with null keys are dropped, duplicate keys keep the latest); truncations, mutations and
 * random bytes in exactly sized blocks are errors or results, never out-of-bounds reads. */
static void test_clean(long iterations)
{
    static uint64_t slots[2 * 256];
    kr_offset_map m;
    char reason[KR_REASON_MAX];
    CHECK(kr_offset_map_init(&m, slots, 100, 0.9) == -1); /* not a power of two */
    CHECK(kr_offset_map_init(&m, slots, 256, 0.9) == 0);
    uint8_t *buf = malloc(1 << 16), *out = malloc(1 << 16);
    size_t len = 0;
    int32_t count = 30;
    for (int32_t i = 0; i < count; i++) /* keys: null when i % 3 == 0, else "kk" */
        len += make_record(buf + len, i, (size_t)(rnd() % 100), (int)(i % 3));
    int32_t mapped = 0, kept = 0, tombs = 0;
    size_t out_len = 0;
    int64_t horizon = INT64_MAX;
    kr_clean_scratch scratch = {0};
    kr_clean_opts opts = {0, 0, NULL, 0};
    uint8_t *p = exact(buf, len);
    CHECK(kr_map_records(&m, p, len, count, 500, &mapped, reason) == KR_RECORDS_OK && mapped == count);
    CHECK(m.used == 1 && kr_offset_map_get(&m, (const uint8_t *)"kk", 2) == 500 + count - 1);
    CHECK(kr_filter_records(&m, p, len, count, 500, 1, out, 1 << 16, &out_len, &kept, &tombs, reason) ==
          KR_RECORDS_OK);
    CHECK(kept == 1 && out_len > 0 && out_len < len); /* only the last "kk" record */
    kr_record_fields fields[30];
    CHECK(kr_records_fields(p, len, count, fields, reason) == KR_RECORDS_OK);
    for (int32_t i = 0; i < count; i++) { /* make_record: delta i, key "kk" unless i % 3 == 0 */
        CHECK(fields[i].offset_delta == i && fields[i].value_len >= 0);
        CHECK(i % 3 ? fields[i].key_len == 2 && memcmp(p + fields[i].key_pos, "kk", 2) == 0
                    : fields[i].key_len == -1);
        CHECK(fields[i].value_pos + fields[i].value_len <= (int64_t)len);
    }
    free(p);
    for (size_t cut = 0; cut < len; cut++) {
        p = exact(buf, cut);
        CHECK(kr_map_records(&m, p, cut, count, 500, &mapped, reason) != KR_RECORDS_OK);
        CHECK(kr_filter_records(&m, p, cut, count, 500, 1, out, 1 << 16, &out_len, &kept, &tombs, reason) !=
              KR_RECORDS_OK);
        CHECK(kr_records_fields(p, cut, count, fields, reason) != KR_RECORDS_OK);
        free(p);
    }
    uint8_t tmp[400];
    for (long it = 0; it < iterations; it++) {
        size_t n = len < sizeof(tmp) ? len : sizeof(tmp);
        memcpy(tmp, buf, n);
        if (it & 1) {
            for (int k = (int)(rnd() % 4); k >= 0; k--)
                tmp[rnd() % n] = (uint8_t)rnd();
        } else {
            fill_random(tmp, n);
        }
        n = (size_t)(rnd() % (n + 1));
        int32_t c = (int32_t)(rnd() % 40);
        p = exact(tmp, n);
        int a = kr_map_records(&m, p, n, c, 0, &mapped, reason);
        CHECK(a == KR_RECORDS_OK || a == KR_RECORDS_CORRUPT || a == KR_CLEAN_MAP_FULL);
        size_t cap = (size_t)(rnd() % (n + 1)); /* also too small an output */
        uint8_t *o = exact(out, cap);
        kr_record_fields fz[40];
        a = kr_records_fields(p, n, c, fz, reason);
        CHECK(a == KR_RECORDS_OK || a == KR_RECORDS_CORRUPT);
        for (int32_t i = 0; a == KR_RECORDS_OK && i < c; i++)
            CHECK(fz[i].key_pos + (fz[i].key_len > 0 ? fz[i].key_len : 0) <= (int64_t)n &&
                  fz[i].value_pos + (fz[i].value_len > 0 ? fz[i].value_len : 0) <= (int64_t)n);
        a = kr_filter_records(&m, p, n, c, 0, (int)(it & 2), o, cap, &out_len, &kept, &tombs, reason);
        CHECK(a == KR_RECORDS_OK || a == KR_RECORDS_CORRUPT);
        if (a == KR_RECORDS_OK)
            CHECK(out_len <= cap && tombs <= kept);
        free(o);
        cap = (size_t)(rnd() % (n + 10 * (size_t)c + 1));
        o = exact(out, cap);
        int64_t max_ts = 0;
        a = kr_rebase_records(p, n, c, (int64_t)rnd(), (int64_t)rnd(), o, cap, &out_len, &max_ts, reason);
        CHECK(a == KR_RECORDS_OK || a == KR_RECORDS_CORRUPT);
        if (a == KR_RECORDS_OK)
            CHECK(out_len <= cap);
        free(o);
        free(p);
        /* whole batches: header mutations included */
        uint8_t batch[KR_BATCH_HEADER_SIZE + 7 * 20];
        size_t bn = make_batch(batch, 20, 0);
        batch[rnd() % bn] ^= (uint8_t)(1u << (rnd() % 8));
        size_t bcut = (size_t)(rnd() % (bn + 1));
        p = exact(batch, bcut);
        cap = (size_t)(rnd() % (3 * bcut + 1));
        o = exact(out, cap);
        opts.now_ms = (int64_t)rnd();
        opts.delete_retention_ms = it % 3 ? (int64_t)(rnd() % 5000) : INT64_MAX;
        a = kr_clean_batch(&m, p, bcut, &opts, (int)(it & 1), &scratch, o, cap, &out_len, &kept, &horizon,
                           reason);
        CHECK(a == KR_RECORDS_OK || a == KR_RECORDS_CORRUPT || a == KR_CLEAN_OUT_FULL);
        if (a == KR_RECORDS_OK)
            CHECK(out_len <= cap);
        free(o);
        free(p);
    }
    kr_clean_scratch_free(&scratch);
    free(buf);
    free(out);
}

/* A zigzag varint at *q (before end): 0 and advances, -1 when cut or too long. */
static int read_zz(const uint8_t **q, const uint8_t *end, int64_t *v)
{
    uint64_t acc = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*q >= end)
            return -1;
        uint8_t b = *(*q)++;
        acc |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *v = (int64_t)(acc >> 1) ^ -(int64_t)(acc & 1);
            return 0;
        }
    }
    return -1;
}

/* Record timestamps (base + delta) of an uncompressed records section into ts; -1 when
 * it does not parse. A reader's walk, independent of kr_clean.c. */
static int record_timestamps(const uint8_t *p, size_t len, int32_t count, int64_t base, int64_t *ts)
{
    const uint8_t *end = p + len;
    for (int32_t i = 0; i < count; i++) {
        int64_t rlen, delta;
        if (read_zz(&p, end, &rlen) || rlen < 2 || rlen > end - p)
            return -1;
        const uint8_t *q = p + 1, *rend = p + rlen; /* past the attributes */
        if (read_zz(&q, rend, &delta))
            return -1;
        ts[i] = (int64_t)((uint64_t)base + (uint64_t)delta);
        p = rend;
    }
    return p == end ? 0 : -1;
}

/* A batch of tombstones and values under distinct keys "k<i>" (a tombstone when i % 3 == 0),
 * record timestamps base_ts + 3 i, attributes as given. */
static size_t make_tomb_batch(uint8_t *out, int32_t count, int64_t base_ts, uint16_t attributes)
{
    size_t n = KR_BATCH_HEADER_SIZE;
    for (int32_t i = 0; i < count; i++) {
        uint8_t body[64];
        size_t b = 0;
        body[b++] = 0;
        b += put_zz(body + b, 3 * (int64_t)i);
        b += put_zz(body + b, i);
        b += put_zz(body + b, 2);
        body[b++] = 'k';
        body[b++] = (uint8_t)('0' + i);
        if (i % 3 == 0) {
            b += put_zz(body + b, -1);
        } else {
            b += put_zz(body + b, 1);
            body[b++] = 'v';
        }
        b += put_zz(body + b, 0);
        n += put_zz(out + n, (int64_t)b);
        memcpy(out + n, body, b);
        n += b;
    }
    memset(out, 0, KR_BATCH_HEADER_SIZE);
    put32(out + 8, (uint32_t)(n - KR_LOG_OVERHEAD));
    out[16] = 2;
    out[21] = (uint8_t)(attributes >> 8);
    out[22] = (uint8_t)attributes;
    put32(out + 23, (uint32_t)(count - 1));
    put64(out + 27, (uint64_t)base_ts);
    put64(out + 35, (uint64_t)(base_ts + 3 * (count - 1)));
    put64(out + 43, (uint64_t)-1);
    out[51] = 0xff;
    out[52] = 0xff;
    put32(out + 53, (uint32_t)-1);
    put32(out + 57, (uint32_t)count);
    put32(out + 17, kr_crc32c_table(0, out + 21, n - 21));
    return n;
}

/* KIP-534 (kr_clean_batch): a batch keeping tombstones gets the delete-horizon flag and
 * base timestamp now + delete.retention.ms, every record's timestamp unchanged and the CRC
 * right; it stays byte for byte before the horizon and loses its tombstones at it. Mutated
 * batches, extreme clocks and exactly sized outputs are results or errors, never out of
 * bounds. */
static void test_clean_horizon(long iterations)
{
    static uint64_t slots[2 * 64];
    kr_offset_map m;
    kr_clean_scratch scratch = {0};
    char reason[KR_REASON_MAX];
    uint8_t batch[1024], out[4096], again[4096];
    int64_t want[10], got[10];
    size_t n = make_tomb_batch(batch, 10, 1000, 0), out_len = 0, out2 = 0;
    int32_t mapped = 0, kept = 0;
    int64_t horizon = INT64_MAX;
    kr_batch_info info;
    kr_clean_opts opts = {5000, 100, NULL, 0};
    CHECK(kr_offset_map_init(&m, slots, 64, 0.9) == 0);
    CHECK(kr_map_records(&m, batch + KR_BATCH_HEADER_SIZE, n - KR_BATCH_HEADER_SIZE, 10, 0, &mapped, reason) ==
          KR_RECORDS_OK);
    CHECK(record_timestamps(batch + KR_BATCH_HEADER_SIZE, n - KR_BATCH_HEADER_SIZE, 10, 1000, want) == 0);
    CHECK(kr_clean_batch(&m, batch, n, &opts, 0, &scratch, out, sizeof(out), &out_len, &kept, &horizon,
                         reason) == KR_RECORDS_OK);
    CHECK(kept == 10 && horizon == 5100 && out_len > n);
    CHECK(kr_batch_check(out, out_len, 0, 1, &info, reason) == 0 && (info.attributes & KR_ATTR_DELETE_HORIZON));
    CHECK(info.first_timestamp == 5100 && info.max_timestamp == 1027 && info.records_count == 10);
    CHECK(record_timestamps(out + KR_BATCH_HEADER_SIZE, out_len - KR_BATCH_HEADER_SIZE, 10, 5100, got) == 0);
    CHECK(memcmp(got, want, sizeof(want)) == 0);
    int64_t max_ts = 0;
    CHECK(kr_records_check(out + KR_BATCH_HEADER_SIZE, out_len - KR_BATCH_HEADER_SIZE, 10, 5100, NULL,
                           &max_ts, reason) == KR_RECORDS_OK && max_ts == 1027); /* the produce path's walker agrees */
    opts.now_ms = 5099; /* before the horizon: unchanged */
    horizon = INT64_MAX;
    CHECK(kr_clean_batch(&m, out, out_len, &opts, 0, &scratch, again, sizeof(again), &out2, &kept, &horizon,
                         reason) == KR_RECORDS_OK);
    CHECK(out2 == out_len && memcmp(again, out, out_len) == 0 && horizon == 5100);
    opts.now_ms = 5100; /* at it: the 4 tombstones go, timestamps stay */
    horizon = INT64_MAX;
    CHECK(kr_clean_batch(&m, out, out_len, &opts, 0, &scratch, again, sizeof(again), &out2, &kept, &horizon,
                         reason) == KR_RECORDS_OK);
    CHECK(kept == 6 && horizon == INT64_MAX && kr_batch_check(again, out2, 0, 1, &info, reason) == 0);
    CHECK(info.first_timestamp == 5100 && info.max_timestamp == 1024);
    CHECK(record_timestamps(again + KR_BATCH_HEADER_SIZE, out2 - KR_BATCH_HEADER_SIZE, 6, 5100, got) == 0);
    CHECK(got[0] == want[1] && got[1] == want[2] && got[2] == want[4] && got[5] == want[8]);
    /* too small an output: OUT_FULL, nothing past cap touched (exact block under ASan) */
    uint8_t *o = exact(out, n);
    opts.now_ms = 5000;
    CHECK(kr_clean_batch(&m, batch, n, &opts, 0, &scratch, o, n, &out2, &kept, &horizon, reason) ==
          KR_CLEAN_OUT_FULL);
    free(o);
    for (long it = 0; it < iterations; it++) {
        uint8_t tmp[1024];
        size_t len = make_tomb_batch(tmp, (int32_t)(1 + rnd() % 10), (int64_t)rnd(),
                                     rnd() % 2 ? KR_ATTR_DELETE_HORIZON : 0);
        for (int k = (int)(rnd() % 3); k > 0; k--)
            tmp[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8));
        int right_crc = rnd() % 2;
        if (right_crc) /* a right CRC: the record walk itself must hold */
            put32(tmp + 17, kr_crc32c_table(0, tmp + 21, len - 21));
        size_t cut = rnd() % 4 ? len : (size_t)(rnd() % (len + 1));
        uint8_t *p = exact(tmp, cut);
        size_t cap = (size_t)(rnd() % (3 * cut + 1));
        o = exact(out, cap);
        opts.now_ms = it % 5 == 0 ? INT64_MAX : (int64_t)rnd();
        opts.delete_retention_ms = it % 7 == 0 ? INT64_MAX : (int64_t)(rnd() % 100000);
        horizon = INT64_MAX;
        int a = kr_clean_batch(&m, p, cut, &opts, (int)(it & 1), &scratch, o, cap, &out2, &kept, &horizon, reason);
        CHECK(a == KR_RECORDS_OK || a == KR_RECORDS_CORRUPT || a == KR_CLEAN_OUT_FULL);
        if (a == KR_RECORDS_OK && out2) {
            CHECK(out2 <= cap && kr_batch_check(o, out2, 0, right_crc, &info, reason) == 0 &&
                  (size_t)info.size == out2);
            CHECK(out2 <= 3 * cut); /* the bound kr_clean_segment's growth relies on */
        }
        free(o);
        free(p);
    }
    kr_clean_scratch_free(&scratch);
}

/* A batch of `count` make_record records (keys "kk" or null) at base_offset. */
static size_t make_keyed_batch(uint8_t *out, int64_t base_offset, int32_t count, uint16_t attributes)
{
    size_t n = KR_BATCH_HEADER_SIZE;
    for (int32_t i = 0; i < count; i++)
        n += make_record(out + n, i, (size_t)(rnd() % 50), (int)(i % 2));
    memset(out, 0, KR_BATCH_HEADER_SIZE);
    put64(out, (uint64_t)base_offset);
    put32(out + 8, (uint32_t)(n - KR_LOG_OVERHEAD));
    out[16] = 2;
    out[21] = (uint8_t)(attributes >> 8);
    out[22] = (uint8_t)attributes;
    put32(out + 23, (uint32_t)(count - 1));
    put64(out + 27, 1000);
    put64(out + 35, 1000 + 3 * (uint64_t)(count - 1));
    put64(out + 43, (uint64_t)(attributes & 0x10 ? 7 : -1));
    out[51] = 0xff;
    out[52] = 0xff;
    put32(out + 53, (uint32_t)-1);
    put32(out + 57, (uint32_t)count);
    put32(out + 17, kr_crc32c_table(0, out + 21, n - 21));
    return n;
}

/* The chunk loops (kr_map_batches, kr_clean_batches): a valid chunk maps and cleans up to
 * its first transactional batch, every written batch is sound with a right CRC; cut or
 * mutated chunks are results or errors, never reads or writes out of bounds. */
static void test_clean_chunks(long iterations)
{
    static uint64_t slots[2 * 1024];
    kr_offset_map m;
    kr_clean_scratch scratch = {0};
    char reason[KR_REASON_MAX];
    uint8_t *buf = malloc(1 << 16), *out = malloc(1 << 16);
    size_t len = 0, stop_at = 0;
    int64_t base = 100;
    for (int b = 0; b < 6; b++) {
        int32_t count = (int32_t)(1 + rnd() % 20);
        if (b == 4)
            stop_at = len;
        len += make_keyed_batch(buf + len, base, count, b == 4 ? 0x10 : 0);
        base += count;
    }
    int64_t retain[1] = {99};
    kr_clean_opts opts = {0, 0, retain, 1};
    size_t consumed = 0, out_len = 0;
    int64_t removed = 0, horizon = INT64_MAX;
    kr_batch_vec written = {0};
    uint8_t *p = exact(buf, len);
    CHECK(kr_offset_map_init(&m, slots, 1024, 0.9) == 0);
    CHECK(kr_map_batches(&m, p, len, 0, 0, &scratch, &consumed, reason) == KR_RECORDS_OK);
    CHECK(consumed == stop_at && m.used == 1);
    CHECK(kr_clean_batches(&m, p, len, 0, &opts, &scratch, out, 1 << 16, 0, &out_len, &consumed,
                           &written, &removed, &horizon, reason) == KR_RECORDS_OK);
    CHECK(consumed == stop_at && written.count == 1 && removed > 0); /* one "kk" survives */
    kr_batch_info info;
    CHECK(written.count == 1 && kr_batch_check(out, out_len, 0, 1, &info, reason) == 0 &&
          info.records_count == 1 && (size_t)info.size == out_len);
    kr_batch_vec_free(&written);
    /* from the batch after the transactional one: nothing left to map, the rest cleaned */
    size_t after = stop_at + (size_t)(int32_t)((uint32_t)p[stop_at + 8] << 24 | (uint32_t)p[stop_at + 9] << 16 |
                                               (uint32_t)p[stop_at + 10] << 8 | p[stop_at + 11]) + 12;
    CHECK(kr_map_batches(&m, p, len, after, 0, &scratch, &consumed, reason) == KR_RECORDS_OK &&
          consumed == len);
    free(p);
    for (long it = 0; it < iterations; it++) {
        uint8_t tmp[1 << 12];
        size_t n = len < sizeof(tmp) ? len : sizeof(tmp);
        memcpy(tmp, buf, n);
        for (int k = (int)(rnd() % 4); k > 0; k--)
            tmp[rnd() % n] ^= (uint8_t)(1u << (rnd() % 8));
        n = (size_t)(rnd() % (n + 1));
        size_t start = (size_t)(rnd() % (n + 2)); /* also one past the end */
        p = exact(tmp, n);
        if (it % 7 == 0)
            kr_offset_map_init(&m, slots, 8, 0.5); /* fills at once */
        else if (it % 7 == 1)
            kr_offset_map_init(&m, slots, 1024, 0.9);
        int a = kr_map_batches(&m, p, n, start, (int64_t)(rnd() % 200), &scratch, &consumed, reason);
        CHECK(a == KR_RECORDS_OK || a == KR_RECORDS_CORRUPT || a == KR_CLEAN_MAP_FULL);
        CHECK(consumed <= n || (a == KR_RECORDS_CORRUPT && consumed == start));
        size_t cap = (size_t)(rnd() % (n + 1)), out_pos = (size_t)(rnd() % 8);
        uint8_t *o = exact(out, cap);
        opts.now_ms = (int64_t)(rnd() % 2000);
        opts.delete_retention_ms = (int64_t)(rnd() % 2000);
        a = kr_clean_batches(&m, p, n, start, &opts, &scratch, o, cap, out_pos, &out_len, &consumed,
                             &written, &removed, &horizon, reason);
        CHECK(a == KR_RECORDS_OK || a == KR_RECORDS_CORRUPT || a == KR_CLEAN_OUT_FULL);
        if (a == KR_RECORDS_OK || a == KR_CLEAN_OUT_FULL) {
            CHECK(consumed >= start && consumed <= n && out_pos + out_len <= cap);
            for (size_t i = 0; i < written.count; i++) {
                kr_batch_info *w = &written.items[i];
                CHECK(kr_batch_check(o, out_pos + out_len, (size_t)w->position, 0, &info, reason) == 0 &&
                      info.size == w->size && info.records_count == w->records_count);
            }
        }
        kr_batch_vec_free(&written);
        free(o);
        free(p);
    }
    kr_clean_scratch_free(&scratch);
    free(buf);
    free(out);
}

/* A file holding buf[0, n), read back through a fresh descriptor. */
static int file_with(const uint8_t *buf, size_t n)
{
    char path[] = "/tmp/kr_clean_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    CHECK(kr_write_all(fd, buf, n) == (ssize_t)n);
    return fd;
}

static int out_file(void)
{
    char path[] = "/tmp/kr_out_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    int flags = fcntl(fd, F_GETFL);
    CHECK(fcntl(fd, F_SETFL, flags | O_APPEND) == 0);
    return fd;
}

/* The segment loops (kr_map_segment, kr_clean_segment): a file of batches maps and cleans
 * to the first transactional batch, which is left to the caller; a read buffer smaller
 * than a batch asks to grow; written batches land in the output file with their file
 * positions; cut or mutated files are results or errors, never out-of-bounds accesses. */
static void test_clean_segments(long iterations)
{
    static uint64_t slots[2 * 1024];
    kr_offset_map m;
    kr_clean_scratch scratch = {0};
    char reason[KR_REASON_MAX];
    uint8_t *buf = malloc(1 << 16), *file = malloc(1 << 16), *out = malloc(1 << 17);
    size_t len = 0, stop_at = 0;
    int64_t base = 100;
    for (int b = 0; b < 6; b++) {
        if (b == 4)
            stop_at = len;
        int32_t count = (int32_t)(1 + rnd() % 20);
        len += make_keyed_batch(file + len, base, count, b == 4 ? 0x10 : 0);
        base += count;
    }
    size_t plain_len = len; /* tombstone batches after the transactional one, for the fuzzing */
    for (int b = 0; b < 3; b++)
        len += make_tomb_batch(file + len, 10, 1000, b == 1 ? 0x40 : 0);
    int in = file_with(file, plain_len);
    kr_seg_walk w = {0};
    CHECK(kr_offset_map_init(&m, slots, 1024, 0.9) == 0);
    CHECK(kr_map_segment(&m, in, (int64_t)plain_len, buf, 64, 0, 0, &scratch, &w, reason) == KR_RECORDS_OK);
    CHECK(w.stop == KR_SEG_GROW && w.pos == 0 && w.need > 64);
    memset(&w, 0, sizeof(w));
    CHECK(kr_map_segment(&m, in, (int64_t)plain_len, buf, 1 << 16, 0, 0, &scratch, &w, reason) == KR_RECORDS_OK);
    CHECK(w.stop == KR_SEG_BATCH && (size_t)w.pos == stop_at && w.read == (int64_t)plain_len && m.used == 1);
    int64_t retain[1] = {99};
    kr_clean_opts opts = {0, 0, retain, 1};
    kr_batch_vec written = {0};
    int outfd = out_file();
    CHECK(kr_write_all(outfd, "x", 1) == 1); /* positions count from the file's size */
    memset(&w, 0, sizeof(w));
    CHECK(kr_clean_segment(&m, in, (int64_t)plain_len, buf, 1 << 16, out, 1 << 17, 1 << 16, outfd, 1, 0, &opts,
                           &scratch, &written, &w, reason) == KR_RECORDS_OK);
    CHECK(w.stop == KR_SEG_BATCH && (size_t)w.pos == stop_at && w.written > 0 && written.count == 1);
    CHECK(kr_file_size(outfd) == 1 + w.written && written.items[0].position == 1);
    ssize_t n = kr_pread_full(outfd, out, (size_t)w.written, 1);
    kr_batch_info info;
    CHECK(n == w.written && kr_batch_check(out, (size_t)n, 0, 1, &info, reason) == 0 && info.size == n);
    kr_batch_vec_free(&written);
    close(outfd);
    close(in);
    /* Tombstone batches growing by their delete horizon: cleaned in small pieces into an
     * out of twice the piece (KR_CLEAN_OUT_FULL, then growing as cleaner.py does on
     * KR_SEG_GROW), the output equals one cleaning in a single large piece. */
    {
        size_t tl = 0;
        uint8_t *tfile = malloc(1 << 14);
        for (int b = 0; b < 8; b++)
            tl += make_tomb_batch(tfile + tl, 10, 1000 + b, b % 3 ? 0 : 0x40);
        int tin = file_with(tfile, tl);
        free(tfile);
        opts.now_ms = 500;
        opts.delete_retention_ms = INT64_C(1) << 60; /* 9-byte deltas: each record grows */
        int64_t whole = 0, pieces = 0;
        uint8_t *big = malloc(1 << 16);
        for (int round = 0; round < 2; round++) {
            int ofd = out_file();
            size_t cap = round ? 64 : 1 << 14, ocap = 2 * cap;
            uint8_t *b = malloc(cap), *o = malloc(ocap);
            memset(&w, 0, sizeof(w));
            w.horizon = INT64_MAX;
            int steps = 0;
            while (w.pos < (int64_t)tl && steps++ < 1000) {
                int a = kr_clean_segment(&m, tin, (int64_t)tl, b, cap, o, ocap, cap, ofd, kr_file_size(ofd), 0,
                                         &opts, &scratch, &written, &w, reason);
                CHECK(a == KR_RECORDS_OK);
                if (a != KR_RECORDS_OK)
                    break;
                if (w.stop == KR_SEG_GROW) {
                    cap = (size_t)w.need > cap ? (size_t)w.need : cap;
                    ocap = 3 * cap > ocap ? 3 * cap : ocap;
                    b = realloc(b, cap);
                    o = realloc(o, ocap);
                }
            }
            CHECK(w.pos == (int64_t)tl && w.horizon == 1000); /* batch 0's own, set before */
            int64_t size = kr_file_size(ofd);
            CHECK(size > (int64_t)tl && size <= 1 << 16);
            if (round == 0) {
                whole = size;
                CHECK(kr_pread_full(ofd, big, (size_t)size, 0) == size);
            } else {
                pieces = size;
                uint8_t *cmp = malloc((size_t)size);
                CHECK(kr_pread_full(ofd, cmp, (size_t)size, 0) == size && size == whole &&
                      memcmp(cmp, big, (size_t)size) == 0);
                free(cmp);
            }
            kr_batch_vec_free(&written);
            free(b);
            free(o);
            close(ofd);
        }
        CHECK(pieces == whole);
        free(big);
        close(tin);
        opts.now_ms = opts.delete_retention_ms = 0;
    }
    for (long it = 0; it < iterations; it++) {
        size_t cut = (size_t)(rnd() % (len + 1));
        uint8_t *p = exact(file, cut);
        for (int k = (int)(rnd() % 4); k > 0 && cut; k--)
            p[rnd() % cut] ^= (uint8_t)(1u << (rnd() % 8));
        in = file_with(p, cut);
        outfd = out_file();
        int64_t end = (int64_t)(rnd() % (len + 8)); /* also past the file's end */
        size_t cap = 61 + (size_t)(rnd() % 600);
        if (it % 5 == 0)
            kr_offset_map_init(&m, slots, 8, 0.5);
        else if (it % 5 == 1)
            kr_offset_map_init(&m, slots, 1024, 0.9);
        memset(&w, 0, sizeof(w));
        int a = kr_map_segment(&m, in, end, buf, cap, 0, (int64_t)(rnd() % 2 ? 0 : 200), &scratch, &w, reason);
        CHECK(a == KR_RECORDS_OK || a == KR_RECORDS_CORRUPT || a == KR_CLEAN_MAP_FULL);
        CHECK(w.pos >= 0 && w.pos <= end);
        memset(&w, 0, sizeof(w));
        opts.now_ms = (int64_t)(rnd() % 2000);
        opts.delete_retention_ms = (int64_t)(rnd() % 2000);
        a = kr_clean_segment(&m, in, end, buf, cap, out, 2 * cap, cap, outfd, 0, 0, &opts, &scratch, &written,
                             &w, reason);
        CHECK(a == KR_RECORDS_OK || a == KR_RECORDS_CORRUPT);
        if (a == KR_RECORDS_OK) {
            CHECK(w.pos <= end && kr_file_size(outfd) == w.written);
            if (w.stop == KR_SEG_BATCH || w.stop == KR_SEG_GROW)
                CHECK(w.need >= KR_BATCH_HEADER_SIZE && w.pos + w.need <= end);
        }
        kr_batch_vec_free(&written);
        close(outfd);
        close(in);
        free(p);
    }
    kr_clean_scratch_free(&scratch);
    free(buf);
    free(file);
    free(out);
}

static void test_indexes(long iterations)
{
    uint8_t tmp[600];
    for (long it = 0; it < iterations; it++) {
        size_t n = (size_t)(rnd() % sizeof(tmp));
        fill_random(tmp, n);
        uint8_t *p = exact(tmp, n);
        int64_t target = (int64_t)rnd();
        int64_t slot = kr_index_lookup(p, (int64_t)(n / 8), target);
        CHECK(slot >= -1 && slot < (int64_t)(n / 8));
        slot = kr_timeindex_lookup(p, (int64_t)(n / 12), target);
        CHECK(slot >= -1 && slot < (int64_t)(n / 12));
        free(p);
    }
    uint8_t idx[8 * 5];
    for (int i = 0; i < 5; i++) {
        put32(idx + 8 * i, (uint32_t)(i * 10));
        put32(idx + 8 * i + 4, (uint32_t)(i * 4096));
    }
    CHECK(kr_index_lookup(idx, 5, -1) == -1);
    CHECK(kr_index_lookup(idx, 5, 0) == 0);
    CHECK(kr_index_lookup(idx, 5, 25) == 2);
    CHECK(kr_index_lookup(idx, 5, 1000) == 4);
    CHECK(kr_index_lookup(idx, 0, 1000) == -1);
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void test_index_batches(long iterations)
{
    /* Known case: interval 100, batches of 60 bytes: an entry before the 3rd and 5th. */
    kr_batch_info b[5];
    memset(b, 0, sizeof(b));
    int64_t ts[5] = {50, 40, 70, 60, 90};
    for (int i = 0; i < 5; i++) {
        b[i].position = 60 * i;
        b[i].size = 60;
        b[i].base_offset = 1000 + 2 * i;
        b[i].last_offset_delta = 1;
        b[i].max_timestamp = ts[i];
        b[i].records_count = 2;
    }
    uint8_t *off = malloc(8 * 5), *tim = malloc(12 * 5);
    size_t no = 9, nt = 9;
    kr_index_state st = {.interval = 100, .seg_base = 1000, .since = 0, .seg_max_ts = -1,
                         .seg_max_offset = 1000, .last_indexed_ts = -1, .last_offset = 999};
    CHECK(kr_index_batches(b, 5, 4096, &st, off, &no, tim, &nt) == 0);
    CHECK(no == 2 && nt == 2);
    CHECK(be32(off) == 5 && be32(off + 4) == 4096 + 120);  /* batch 2: last offset 1005 */
    CHECK(be32(off + 8) == 9 && be32(off + 12) == 4096 + 240);
    CHECK(be32(tim) == 0 && be32(tim + 4) == 70 && be32(tim + 8) == 5);
    CHECK(be32(tim + 16) == 90 && be32(tim + 20) == 9);
    CHECK(st.since == 60 && st.seg_max_ts == 90 && st.seg_max_offset == 1009);
    CHECK(st.last_indexed_ts == 90 && st.last_offset == 1009);
    /* An offset past the int32 range of an entry: refused, the state as it was. */
    kr_index_state before = {.interval = 0, .seg_base = 0, .since = 1, .seg_max_ts = -1,
                             .seg_max_offset = 0, .last_indexed_ts = -1, .last_offset = -1};
    kr_index_state bad = before;
    b[0].base_offset = (int64_t)INT32_MAX + 1;
    CHECK(kr_index_batches(b, 1, 0, &bad, off, &no, tim, &nt) == -1);
    CHECK(memcmp(&bad, &before, sizeof(bad)) == 0);
    free(off);
    free(tim);
    /* Random batches into exact-size outputs (ASan checks the bounds): at most one entry
     * of each kind per batch, offset entries ascending, time entries growing. */
    for (long it = 0; it < iterations; it++) {
        size_t n = (size_t)(rnd() % 40);
        kr_batch_info *v = calloc(n ? n : 1, sizeof(*v));
        int64_t pos = 0, o = (int64_t)(rnd() % 1000);
        for (size_t i = 0; i < n; i++) {
            v[i].position = pos;
            v[i].size = 61 + (int64_t)(rnd() % 300);
            pos += v[i].size;
            v[i].base_offset = o;
            v[i].last_offset_delta = (int32_t)(rnd() % 5);
            o += v[i].last_offset_delta + 1;
            v[i].max_timestamp = (int64_t)(rnd() % 100) - 1;
            v[i].records_count = v[i].last_offset_delta + 1;
        }
        uint8_t *eo = malloc(n ? 8 * n : 1), *et = malloc(n ? 12 * n : 1);
        if (!eo || !et)
            abort();
        kr_index_state s2 = {.interval = (int64_t)(rnd() % 500), .seg_base = 0, .since = (int64_t)(rnd() % 500),
                             .seg_max_ts = -1, .seg_max_offset = 0, .last_indexed_ts = -1, .last_offset = -1};
        size_t k = 0, kt = 0;
        CHECK(kr_index_batches(v, n, 0, &s2, eo, &k, et, &kt) == 0);
        CHECK(k <= n && kt <= k);
        for (size_t i = 1; i < k; i++)
            CHECK(be32(eo + 8 * i) > be32(eo + 8 * (i - 1)) && be32(eo + 8 * i + 4) > be32(eo + 8 * (i - 1) + 4));
        for (size_t i = 1; i < kt; i++) /* timestamps here are < 2^32: the low word */
            CHECK(be32(et + 12 * i + 4) > be32(et + 12 * (i - 1) + 4));
        free(eo);
        free(et);
        free(v);
    }
}

static void test_bulk_yield(void)
{
    CHECK(kr_bulk_yield_interval() == 0);
    kr_bulk_yield(1); /* not yielding: returns at once */
    kr_bulk_set_yield_interval(1000);
    CHECK(kr_bulk_yield_interval() == 1000);
    kr_bulk_yield(1);
    kr_bulk_yield(0);
    kr_bulk_set_yield_interval(-5);
    CHECK(kr_bulk_yield_interval() == 0);
}

static void test_checkpoint(void)
{
    char dir[] = "/tmp/kr_core_test_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[128];
    snprintf(path, sizeof(path), "%s/checkpoint", dir);
    const char *payload = "0\ntopic 0 42\n";
    const char *step = NULL;
    CHECK(kr_checkpoint_write(path, payload, strlen(payload), &step) == 0);
    uint8_t *image;
    size_t len;
    char reason[KR_REASON_MAX];
    CHECK(kr_read_file(path, &image, &len) == 0);
    CHECK(kr_checkpoint_verify(image, len, reason) == (int64_t)strlen(payload));
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *p = exact(image, cut);
        CHECK(kr_checkpoint_verify(p, cut, reason) == -1);
        free(p);
    }
    for (size_t pos = 0; pos < len; pos++) {
        uint8_t *p = exact(image, len);
        p[pos] ^= 0x20;
        CHECK(kr_checkpoint_verify(p, len, reason) == -1);
        free(p);
    }
    free(image);
    char missing[160];
    snprintf(missing, sizeof(missing), "%s/missing", dir);
    CHECK(kr_read_file(missing, &image, &len) == -1 && errno == ENOENT);
    snprintf(missing, sizeof(missing), "%s/no-dir/x", dir);
    CHECK(kr_checkpoint_write(missing, "a\n", 2, &step) == -1 && errno == ENOENT);
    unlink(path);
    rmdir(dir);
}

static void test_io(void)
{
    char path[] = "/tmp/kr_core_io_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    static uint8_t data[300000], back[300000];
    fill_random(data, sizeof(data));
    CHECK(kr_write_all(fd, data, sizeof(data)) == (ssize_t)sizeof(data));
    CHECK(kr_pread_full(fd, back, sizeof(back), 0) == (ssize_t)sizeof(back));
    CHECK(memcmp(data, back, sizeof(data)) == 0);
    CHECK(kr_pread_full(fd, back, 100, (int64_t)sizeof(data) - 10) == 10);
    CHECK(kr_pread_full(fd, back, 100, -1) == -1 && errno == EINVAL);
    CHECK(kr_ftruncate(fd, 1000) == 0);
    CHECK(kr_file_size(fd) == 1000);
    CHECK(kr_fdatasync(fd) == 0);

    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    ssize_t n = kr_sendfile(sv[0], fd, 100, 500);
    CHECK(n == 500);
    CHECK(read(sv[1], back, 500) == 500 && memcmp(back, data + 100, 500) == 0);
    size_t sent;
    CHECK(kr_sendfile_all(sv[0], fd, 900, 200, 1000, &sent) == -1 && errno == ENODATA &&
          sent == 100);
    CHECK(kr_sendfile(sv[0], fd, 1000, 10) == 0); /* end of file */
    close(sv[0]);
    close(sv[1]);
    close(fd);
    CHECK(kr_write_all(fd, data, 10) == -1 && errno == EBADF);
}

int main(int argc, char **argv)
{
    long iterations = argc > 1 ? strtol(argv[1], NULL, 10) : 20000;
    kr_crc32c_init();
    test_crc();
    test_batches(iterations);
    test_records(iterations);
    test_clean(iterations);
    test_clean_horizon(iterations);
    test_clean_chunks(iterations);
    test_clean_segments(iterations / 10);
    test_arrow(iterations);
    test_indexes(iterations);
    test_index_batches(iterations);
    test_bulk_yield();
    test_checkpoint();
    test_io();
    printf("%ld checks, %ld failures (crc32c backend: %s)\n", checks, failures,
           kr_crc32c_backend());
    return failures ? 1 : 0;
}
