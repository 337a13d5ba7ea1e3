/* Record-level validation of one v2 batch's records section (the leader's check, as
 * Kafka's LogValidator + DefaultRecord.readFrom do it).
 *
 * Record v2 (all varints zigzag): length varint, attributes int8, timestampDelta
 * varlong, offsetDelta varint, keyLength varint (-1 = null), key, valueLength varint,
 * value, headerCount varint, headers: [keyLength varint (>= 0), key, valueLength varint
 * (-1 = null), value].
 *
 * Two walkers with the same verdicts:
 *  - kr_records_check: a whole section in one buffer (uncompressed batches; hot path).
 *  - kr_records_feed/finish: a resumable byte-level walker fed a decompressor's output in
 *    pieces of any size, holding O(1) state (never a whole record), so memory stays
 *    bounded whatever a record's size.
 * Both check fields strictly in stream order and fail at the first problem, so where an
 * input is bad they report the same class of error (CORRUPT or INVALID).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kr_core.h"

/* ---- varints --------------------------------------------------------------------- */

/* Kafka's ByteUtils: a varint has at most 5 bytes, a varlong 10. Bits past 32/64 in the
 * last byte (which Java silently drops) are refused: no encoder produces them. */
#define VARINT_MAX_BYTES 5
#define VARLONG_MAX_BYTES 10

static inline int64_t unzigzag(uint64_t u) { return (int64_t)((u >> 1) ^ (~(u & 1) + 1)); }

/* Decodes a zigzag varint (wide = varlong) from [*pp, lim). Returns 0 and advances *pp;
 * 1 when the bytes end first; -1 when it is too long. */
static inline int read_varint(const uint8_t **pp, const uint8_t *lim, int wide, int64_t *out)
{
    const uint8_t *p = *pp;
    if (p < lim && p[0] < 0x80) { /* one byte: the usual case */
        *out = unzigzag(p[0]);
        *pp = p + 1;
        return 0;
    }
    uint64_t acc = 0;
    int max = wide ? VARLONG_MAX_BYTES : VARINT_MAX_BYTES;
    for (int i = 0; i < max; i++) {
        if (p >= lim)
            return 1;
        uint8_t b = *p++;
        if (i == max - 1 && (b & 0x80 || b > (wide ? 0x01 : 0x0F)))
            return -1;
        acc |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *out = wide ? unzigzag(acc) : (int64_t)(int32_t)unzigzag(acc);
            *pp = p;
            return 0;
        }
    }
    return -1; /* unreachable: the last byte either ends or is refused above */
}

static const char *const FIELD_NAMES[] = {
    "length", "attributes", "timestampDelta", "offsetDelta", "keyLength", "key",
    "valueLength", "value", "headerCount", "headerKeyLength", "headerKey",
    "headerValueLength", "headerValue", "end",
};

enum {
    F_LEN, F_ATTR, F_TS, F_OFF, F_KEYLEN, F_KEY, F_VALLEN, F_VAL, F_HCOUNT, F_HKEYLEN,
    F_HKEY, F_HVALLEN, F_HVAL, F_END
};

static int fail(kr_records_state *s, int code, char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(kr_records_state *s, int code, char *reason, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(reason, KR_REASON_MAX, "record %" PRId32 ": ", s->seen);
    va_start(ap, fmt);
    if (n >= 0 && n < KR_REASON_MAX)
        vsnprintf(reason + n, (size_t)(KR_REASON_MAX - n), fmt, ap);
    va_end(ap);
    s->error = code;
    return code;
}

/* A decoded field value: the checks both walkers share. Sets s->field to what comes
 * next and s->skip to the bytes of key/value data to pass over. */
static int on_value(kr_records_state *s, int64_t v, char *reason)
{
    switch (s->field) {
    case F_LEN:
        if (v < 0)
            return fail(s, KR_RECORDS_CORRUPT, reason, "negative record length %" PRId64, v);
        s->record_left = v;
        s->field = F_ATTR;
        return 0;
    case F_TS: {
        int64_t ts;
        if (__builtin_add_overflow(s->base_timestamp, v, &ts))
            return fail(s, KR_RECORDS_INVALID, reason, "timestamp overflows: base %" PRId64
                        " + delta %" PRId64, s->base_timestamp, v);
        if (ts > s->max_timestamp)
            s->max_timestamp = ts;
        if (ts < s->min_timestamp)
            s->min_timestamp = ts;
        s->cur_timestamp = ts;
        s->field = F_OFF;
        return 0;
    }
    case F_OFF:
        if (v != s->seen)
            return fail(s, KR_RECORDS_INVALID, reason,
                        "offsetDelta %" PRId64 " (offsets must be 0..count-1 in order)", v);
        if (s->has_target && !s->found && s->cur_timestamp >= s->target) {
            s->found = 1;
            s->found_timestamp = s->cur_timestamp;
            s->found_offset_delta = (int32_t)v;
        }
        s->field = F_KEYLEN;
        return 0;
    case F_KEYLEN:
    case F_VALLEN:
    case F_HKEYLEN:
    case F_HVALLEN:
        if (v < (s->field == F_HKEYLEN ? 0 : -1))
            return fail(s, s->field == F_HKEYLEN ? KR_RECORDS_INVALID : KR_RECORDS_CORRUPT,
                        reason, "invalid %s %" PRId64, FIELD_NAMES[s->field], v);
        if (v > s->record_left)
            return fail(s, KR_RECORDS_CORRUPT, reason,
                        "%s %" PRId64 " runs past the record (%" PRId64 " bytes left)",
                        FIELD_NAMES[s->field], v, s->record_left);
        s->skip = v > 0 ? v : 0;
        s->field++; /* the data field that follows its length */
        return 0;
    case F_HCOUNT:
        if (v < 0)
            return fail(s, KR_RECORDS_INVALID, reason, "negative header count %" PRId64, v);
        if (v > s->record_left / 2) /* a header takes 2 bytes at least */
            return fail(s, KR_RECORDS_CORRUPT, reason,
                        "header count %" PRId64 " cannot fit in %" PRId64 " bytes", v,
                        s->record_left);
        s->headers_left = (int32_t)v;
        s->field = F_HKEYLEN;
        return 0;
    default:
        return fail(s, KR_RECORDS_CORRUPT, reason, "walker in a bad state %d", (int)s->field);
    }
}

/* After a data field (or a header count) ends: where the record goes next; F_END when it
 * is complete. */
static inline void after_data(kr_records_state *s)
{
    switch (s->field) {
    case F_KEY:
        s->field = F_VALLEN;
        break;
    case F_VAL:
        s->field = F_HCOUNT;
        break;
    case F_HKEY:
        s->field = F_HVALLEN;
        break;
    case F_HVAL:
        s->headers_left--;
        s->field = F_HKEYLEN;
        break;
    default:
        break;
    }
    if (s->field == F_HKEYLEN && s->headers_left == 0)
        s->field = F_END;
}

static int end_record(kr_records_state *s, char *reason)
{
    if (s->record_left != 0)
        return fail(s, KR_RECORDS_CORRUPT, reason,
                    "record length leaves %" PRId64 " bytes unread after its fields",
                    s->record_left);
    s->seen++;
    s->field = F_LEN;
    return 0;
}

/* Runs the transitions that need no input: empty data fields, record ends. */
static int settle(kr_records_state *s, char *reason)
{
    for (;;) {
        if ((s->field == F_KEY || s->field == F_VAL || s->field == F_HKEY ||
             s->field == F_HVAL) && s->skip == 0) {
            after_data(s);
            continue;
        }
        if (s->field == F_HKEYLEN && s->headers_left == 0) {
            s->field = F_END;
            continue;
        }
        if (s->field == F_END)
            return end_record(s, reason);
        return 0;
    }
}

static const uint8_t *fast_walk(const uint8_t *p, const uint8_t *end, int32_t *seen,
                                int32_t expected, int64_t base_timestamp, int64_t *min_ts,
                                int64_t *max_ts);

void kr_records_init(kr_records_state *s, int32_t expected, int64_t base_timestamp)
{
    memset(s, 0, sizeof(*s));
    s->expected = expected;
    s->base_timestamp = base_timestamp;
    s->max_timestamp = INT64_MIN;
    s->min_timestamp = INT64_MAX;
    s->field = F_LEN;
}

int kr_records_feed(kr_records_state *s, const uint8_t *p, size_t n, char *reason)
{
    const uint8_t *end = p + n;
    if (s->error)
        return s->error;
    while (p < end) {
        /* At a record boundary, whole records in this piece take the fast walk (not when
         * searching: the search needs each record's timestamp and delta). */
        if (s->field == F_LEN && s->vshift == 0 && !s->has_target) {
            p = fast_walk(p, end, &s->seen, s->expected, s->base_timestamp, &s->min_timestamp,
                          &s->max_timestamp);
            if (p == end)
                break;
        }
        if (s->field == F_LEN && s->vshift == 0 && s->seen >= s->expected)
            return fail(s, KR_RECORDS_INVALID, reason,
                        "bytes remain after the %" PRId32 " records the header declares",
                        s->expected);
        if (s->field != F_LEN) { /* inside a record: it bounds what may be consumed */
            if (s->record_left == 0)
                return fail(s, KR_RECORDS_CORRUPT, reason, "%s runs past the record length",
                            FIELD_NAMES[s->field]);
        }
        switch (s->field) {
        case F_KEY:
        case F_VAL:
        case F_HKEY:
        case F_HVAL: {
            size_t take = (size_t)(end - p);
            if ((uint64_t)s->skip < take)
                take = (size_t)s->skip;
            p += take;
            s->skip -= (int64_t)take;
            s->record_left -= (int64_t)take;
            break;
        }
        case F_ATTR:
            p++;
            s->record_left--;
            s->field = F_TS;
            break;
        default: { /* a varint, possibly split across feeds */
            int wide = s->field == F_TS;
            int max = wide ? VARLONG_MAX_BYTES : VARINT_MAX_BYTES;
            uint8_t b = *p++;
            if (s->field != F_LEN)
                s->record_left--;
            int i = s->vshift / 7;
            if (i == max - 1 && (b & 0x80 || b > (wide ? 0x01 : 0x0F)))
                return fail(s, KR_RECORDS_CORRUPT, reason, "%s varint is too long",
                            FIELD_NAMES[s->field]);
            s->vacc |= (uint64_t)(b & 0x7F) << s->vshift;
            if (b & 0x80) {
                s->vshift += 7;
                break;
            }
            int64_t v = wide ? unzigzag(s->vacc) : (int64_t)(int32_t)unzigzag(s->vacc);
            s->vacc = 0;
            s->vshift = 0;
            if (on_value(s, v, reason))
                return s->error;
            break;
        }
        }
        if (settle(s, reason))
            return s->error;
    }
    s->consumed += n;
    return 0;
}

int kr_records_finish(kr_records_state *s, char *reason)
{
    if (s->error)
        return s->error;
    if (s->field != F_LEN || s->vshift != 0)
        return fail(s, KR_RECORDS_CORRUPT, reason, "records end inside a record (at its %s)",
                    FIELD_NAMES[s->field]);
    if (s->seen != s->expected)
        return fail(s, KR_RECORDS_INVALID, reason,
                    "the header declares %" PRId32 " records but the batch holds %" PRId32,
                    s->expected, s->seen);
    return 0;
}

/* Fast varint for the contiguous walker: 0 ok, nonzero = anything unusual (the caller
 * then re-walks with the exact walker for the verdict). */
static inline int fast_varint(const uint8_t **pp, const uint8_t *lim, int wide, int64_t *out)
{
    const uint8_t *p = *pp;
    if (__builtin_expect(lim - p >= 2, 1)) {
        if (p[0] < 0x80) {
            *out = unzigzag(p[0]);
            *pp = p + 1;
            return 0;
        }
        if (p[1] < 0x80) {
            *out = unzigzag((uint64_t)(p[0] & 0x7F) | (uint64_t)p[1] << 7);
            *pp = p + 2;
            return 0;
        }
    }
    return read_varint(pp, lim, wide, out) != 0;
}

/* The hot path: walks the whole records of [p, end) while each is entirely there and
 * entirely valid, up to `expected`; returns where it stopped (end when all of it was
 * walked). Whatever stops it (a record cut by the end of the buffer, or any anomaly) is
 * left to the exact byte-level walker, which gives the verdict and the reason. */
static const uint8_t *fast_walk(const uint8_t *p, const uint8_t *end, int32_t *seen,
                                int32_t expected, int64_t base_timestamp, int64_t *min_ts,
                                int64_t *max_ts)
{
    int64_t v = 0, ts = 0, mn = *min_ts, mx = *max_ts;
    int32_t i = *seen;
    while (p < end && i < expected) {
        const uint8_t *q = p;
        if (fast_varint(&q, end, 0, &v) || v < 1 || v > end - q)
            break;
        /* The next record's start depends on the length alone, not on this record's
         * fields, so the CPU can run ahead to it while the fields are checked. */
        const uint8_t *rend = q + v;
        q++; /* attributes */
        if (fast_varint(&q, rend, 1, &v) || __builtin_add_overflow(base_timestamp, v, &ts))
            break;
        int64_t rec_ts = ts;
        if (fast_varint(&q, rend, 0, &v) || v != i)
            break;
        int ok = 1;
        for (int k = 0; k < 2 && ok; k++) { /* key, value */
            if (fast_varint(&q, rend, 0, &v) || v < -1 || v > rend - q)
                ok = 0;
            else if (v > 0)
                q += v;
        }
        if (!ok || fast_varint(&q, rend, 0, &v) || v < 0 || v > (rend - q) / 2)
            break;
        for (int64_t h = v; h > 0 && ok; h--) {
            if (fast_varint(&q, rend, 0, &v) || v < 0 || v > rend - q) {
                ok = 0;
                break;
            }
            q += v;
            if (fast_varint(&q, rend, 0, &v) || v < -1 || v > rend - q)
                ok = 0;
            else if (v > 0)
                q += v;
        }
        if (!ok || q != rend)
            break;
        if (rec_ts > mx)
            mx = rec_ts;
        if (rec_ts < mn)
            mn = rec_ts;
        i++;
        p = rend;
    }
    *seen = i;
    *min_ts = mn;
    *max_ts = mx;
    return p;
}

/* The contiguous walker: the fast walk, then (only for a bad buffer) the exact walker
 * from the start for the verdict, so both walkers always agree. */
int kr_records_check(const uint8_t *buf, size_t len, int32_t expected, int64_t base_timestamp,
                     int64_t *min_timestamp, int64_t *max_timestamp, char *reason)
{
    int32_t seen = 0;
    int64_t min_ts = INT64_MAX, max_ts = INT64_MIN;
    if (fast_walk(buf, buf + len, &seen, expected, base_timestamp, &min_ts, &max_ts) ==
            buf + len &&
        seen == expected) {
        if (min_timestamp != NULL)
            *min_timestamp = min_ts;
        *max_timestamp = max_ts;
        return KR_RECORDS_OK;
    }
    kr_records_state st;
    kr_records_init(&st, expected, base_timestamp);
    int rc = kr_records_feed(&st, buf, len, reason);
    if (rc == KR_RECORDS_OK)
        rc = kr_records_finish(&st, reason);
    if (rc == KR_RECORDS_OK) { /* cannot happen: the exact walker takes the same fast walk */
        snprintf(reason, KR_REASON_MAX, "records walkers disagree");
        return KR_RECORDS_CORRUPT;
    }
    return rc;
}
