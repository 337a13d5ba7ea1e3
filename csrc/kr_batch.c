/* Record batch v2 header validation, walking and in-place offset/epoch assignment.
 *
 * Layout (big-endian): baseOffset int64 @0, batchLength int32 @8 (bytes after it),
 * partitionLeaderEpoch int32 @12, magic int8 @16, crc uint32 @17 (CRC32C of bytes @21 to
 * the end of the batch), attributes int16 @21, lastOffsetDelta int32 @23,
 * baseTimestamp int64 @27, maxTimestamp int64 @35, producerId int64 @43,
 * producerEpoch int16 @51, baseSequence int32 @53, recordsCount int32 @57, records @61.
 * Records are never decoded or decompressed here.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "kr_core.h"
#include "kr_bytes.h"

#define OFF_BASE_OFFSET 0
#define OFF_LENGTH 8
#define OFF_EPOCH 12
#define OFF_MAGIC 16
#define OFF_CRC 17
#define OFF_ATTRIBUTES 21
#define OFF_LAST_OFFSET_DELTA 23
#define OFF_FIRST_TIMESTAMP 27
#define OFF_MAX_TIMESTAMP 35
#define OFF_PRODUCER_ID 43
#define OFF_PRODUCER_EPOCH 51
#define OFF_BASE_SEQUENCE 53
#define OFF_RECORDS_COUNT 57
#define MIN_RECORD_SIZE 7 /* length, attributes, tsDelta, offsetDelta, keyLen, valueLen,
                             headerCount: one varint byte each at least */

/* Everything but the CRC: the frame fits and the header fields are coherent. */
static int check_header(const uint8_t *buf, size_t len, size_t pos, kr_batch_info *out,
                        char *reason)
{
    size_t remaining = len - pos;
    if (remaining < KR_LOG_OVERHEAD) {
        snprintf(reason, KR_REASON_MAX,
                 "truncated batch header: %zu bytes at position %zu (need at least %d)",
                 remaining, pos, KR_LOG_OVERHEAD);
        return -1;
    }
    const uint8_t *b = buf + pos;
    int32_t batch_length = (int32_t)be32(b + OFF_LENGTH);
    if (batch_length < KR_MIN_BATCH_LENGTH) {
        snprintf(reason, KR_REASON_MAX,
                 "batch length %" PRId32 " at position %zu is below the minimum %d",
                 batch_length, pos, KR_MIN_BATCH_LENGTH);
        return -1;
    }
    if ((uint64_t)batch_length > remaining - KR_LOG_OVERHEAD) {
        snprintf(reason, KR_REASON_MAX,
                 "batch length %" PRId32 " at position %zu runs past the end of the buffer "
                 "(%zu bytes)",
                 batch_length, pos, len);
        return -1;
    }
    int8_t magic = (int8_t)b[OFF_MAGIC];
    if (magic != 2) {
        snprintf(reason, KR_REASON_MAX, "invalid magic %d (expected 2)", (int)magic);
        return -1;
    }
    int16_t attributes = (int16_t)be16(b + OFF_ATTRIBUTES);
    int compression = attributes & 7;
    if (compression > 4) {
        snprintf(reason, KR_REASON_MAX, "invalid compression type %d in attributes 0x%04x",
                 compression, (unsigned)(uint16_t)attributes);
        return -1;
    }
    int32_t last_offset_delta = (int32_t)be32(b + OFF_LAST_OFFSET_DELTA);
    int32_t records_count = (int32_t)be32(b + OFF_RECORDS_COUNT);
    if (last_offset_delta < 0) {
        snprintf(reason, KR_REASON_MAX, "negative lastOffsetDelta %" PRId32, last_offset_delta);
        return -1;
    }
    if (records_count < 0) {
        snprintf(reason, KR_REASON_MAX, "negative recordsCount %" PRId32, records_count);
        return -1;
    }
    /* A producer numbers records 0..count-1 (the leader checks that exactly, see the
     * _core wrapper); compaction removes records but keeps lastOffsetDelta, so stored
     * and replicated batches may hold fewer records than offsets, never more. */
    if ((int64_t)records_count > (int64_t)last_offset_delta + 1) {
        snprintf(reason, KR_REASON_MAX,
                 "recordsCount %" PRId32 " exceeds the %" PRId64 " offsets of lastOffsetDelta %" PRId32,
                 records_count, (int64_t)last_offset_delta + 1, last_offset_delta);
        return -1;
    }
    if (compression == 0 &&
        (int64_t)records_count * MIN_RECORD_SIZE > (int64_t)batch_length - KR_MIN_BATCH_LENGTH) {
        snprintf(reason, KR_REASON_MAX,
                 "recordsCount %" PRId32 " cannot fit in %" PRId32 " bytes of records",
                 records_count, batch_length - KR_MIN_BATCH_LENGTH);
        return -1;
    }
    /* baseOffset is not checked: a leader overwrites the producer's value, and log
     * continuity is the storage layer's business. */
    int64_t base_offset = (int64_t)be64(b + OFF_BASE_OFFSET);
    out->position = (int64_t)pos;
    out->size = (int64_t)batch_length + KR_LOG_OVERHEAD;
    out->base_offset = base_offset;
    out->last_offset_delta = last_offset_delta;
    out->partition_leader_epoch = (int32_t)be32(b + OFF_EPOCH);
    out->magic = magic;
    out->crc = be32(b + OFF_CRC);
    out->attributes = attributes;
    out->first_timestamp = (int64_t)be64(b + OFF_FIRST_TIMESTAMP);
    out->max_timestamp = (int64_t)be64(b + OFF_MAX_TIMESTAMP);
    out->producer_id = (int64_t)be64(b + OFF_PRODUCER_ID);
    out->producer_epoch = (int16_t)be16(b + OFF_PRODUCER_EPOCH);
    out->base_sequence = (int32_t)be32(b + OFF_BASE_SEQUENCE);
    out->records_count = records_count;
    return 0;
}

int kr_batch_check(const uint8_t *buf, size_t len, size_t pos, int check_crc,
                   kr_batch_info *out, char *reason)
{
    if (pos > len) {
        snprintf(reason, KR_REASON_MAX, "position %zu is past the end of the buffer (%zu bytes)",
                 pos, len);
        return -1;
    }
    if (check_header(buf, len, pos, out, reason) < 0)
        return -1;
    if (check_crc) {
        const uint8_t *b = buf + pos;
        uint32_t computed = kr_crc32c(0, b + OFF_ATTRIBUTES, (size_t)out->size - OFF_ATTRIBUTES);
        if (computed != out->crc) {
            snprintf(reason, KR_REASON_MAX, "CRC mismatch: stored 0x%08" PRIx32
                     " computed 0x%08" PRIx32, out->crc, computed);
            return -1;
        }
    }
    return 0;
}

void kr_batch_vec_free(kr_batch_vec *v)
{
    free(v->items);
    v->items = NULL;
    v->count = v->capacity = 0;
}

int kr_batch_vec_push(kr_batch_vec *v, const kr_batch_info *info)
{
    if (v->count == v->capacity) {
        size_t cap = v->capacity ? v->capacity * 2 : 16;
        kr_batch_info *items = realloc(v->items, cap * sizeof(*items));
        if (!items)
            return -1;
        v->items = items;
        v->capacity = cap;
    }
    v->items[v->count++] = *info;
    return 0;
}

int kr_scan_batches(const uint8_t *buf, size_t len, size_t start, int check_crc,
                    size_t max_batches, kr_batch_vec *out, size_t *valid_bytes, size_t *error_position,
                    char *reason)
{
    size_t pos = start;
    *valid_bytes = start;
    *error_position = 0;
    reason[0] = '\0';
    if (start > len) {
        snprintf(reason, KR_REASON_MAX, "start %zu is past the end of the buffer (%zu bytes)",
                 start, len);
        *error_position = start;
        return 1;
    }
    while (pos < len && (max_batches == 0 || out->count < max_batches)) {
        kr_batch_info info;
        if (kr_batch_check(buf, len, pos, check_crc, &info, reason) < 0) {
            *error_position = pos;
            return 1;
        }
        if (kr_batch_vec_push(out, &info) < 0)
            return -1;
        pos += (size_t)info.size;
        *valid_bytes = pos;
    }
    return 0;
}

int kr_assign_offsets(uint8_t *buf, size_t len, int64_t base_offset, int32_t epoch,
                      int epoch_only, int64_t *next_offset, size_t *error_position,
                      char *reason)
{
    size_t pos = 0;
    int64_t next = base_offset;
    *error_position = 0;
    reason[0] = '\0';
    if (base_offset < 0) {
        snprintf(reason, KR_REASON_MAX, "negative base offset %" PRId64, base_offset);
        return 1;
    }
    /* pass 1: structure only, so a bad buffer is left untouched */
    while (pos < len) {
        kr_batch_info info;
        if (check_header(buf, len, pos, &info, reason) < 0) {
            *error_position = pos;
            return 1;
        }
        if (!epoch_only) {
            if (next > INT64_MAX - 1 - info.last_offset_delta) {
                snprintf(reason, KR_REASON_MAX, "offsets overflow int64 after %" PRId64, next);
                *error_position = pos;
                return 1;
            }
            next += (int64_t)info.last_offset_delta + 1;
        }
        pos += (size_t)info.size;
    }
    /* pass 2: both fields lie outside the CRC'd range, so no re-checksum. Sizes are
     * re-checked: a shared mmap could change under us, and a write must never stray. */
    size_t checked_end = pos;
    pos = 0;
    next = base_offset;
    while (pos + KR_BATCH_HEADER_SIZE <= checked_end) {
        uint8_t *b = buf + pos;
        int32_t batch_length = (int32_t)be32(b + OFF_LENGTH);
        int32_t last_offset_delta = (int32_t)be32(b + OFF_LAST_OFFSET_DELTA);
        if (batch_length < KR_MIN_BATCH_LENGTH || last_offset_delta < 0)
            break;
        if (!epoch_only) {
            put_be64(b + OFF_BASE_OFFSET, (uint64_t)next);
            next += (int64_t)last_offset_delta + 1;
        }
        put_be32(b + OFF_EPOCH, (uint32_t)epoch);
        pos += (size_t)batch_length + KR_LOG_OVERHEAD;
    }
    *next_offset = next;
    return 0;
}
