/* Record batches v2 <-> Arrow column buffers: the data plane of the Spark data source
 * (kafkarepl/spark). A sink encodes Arrow key/value/header columns into record batches
 * without a Python object per row; a source decodes Fetch response record bytes into
 * Arrow buffers (validity bitmaps, int32 offsets, data) the same way.
 *
 * Same conventions as kr_core.h: nothing is read outside the given lengths, errors come
 * back as codes plus a reason of KR_REASON_MAX bytes.
 */
#ifndef KR_ARROW_H
#define KR_ARROW_H

#include <stddef.h>
#include <stdint.h>

#include "kr_core.h"

/* A read-only view of an Arrow binary/utf8 array (int32 offsets). Row i of the view is
 * entry base + i of the buffers. kr_bin_view_check must accept it before any other use. */
typedef struct {
    const uint8_t *validity; /* NULL: no nulls */
    size_t validity_len;     /* bytes */
    const int32_t *offsets;
    size_t offsets_len; /* entries */
    const uint8_t *data;
    size_t data_len;
    int64_t base;
    int64_t length;
} kr_bin_view;

/* list<struct<key: utf8, value: binary>>: row i holds header entries
 * offsets[base + i] .. offsets[base + i + 1] of key/value (views over the struct's rows). */
typedef struct {
    const uint8_t *validity;
    size_t validity_len;
    const int32_t *offsets;
    size_t offsets_len;
    int64_t base;
    int64_t length;
    kr_bin_view key;   /* a null header key is refused (Kafka has none) */
    kr_bin_view value; /* null: a header without value */
} kr_headers_view;

/* 0 when every buffer is long enough and every offset is inside its data, non-decreasing;
 * -1 with the reason otherwise. */
int kr_bin_view_check(const kr_bin_view *v, char *reason);
int kr_headers_view_check(const kr_headers_view *h, char *reason);

/* ---- sink: Arrow -> record batch ---------------------------------------------------- */

#define KR_ENCODE_OK 0
#define KR_ENCODE_NEED_SPACE 1 /* the first record alone does not fit: *first_size bytes */
#define KR_ENCODE_ERROR 2      /* a row that cannot become a record (reason) */

/* Encodes rows [row, row_end) of key (NULL: no key column), value and headers (NULL: none)
 * as the records of one batch (timestampDelta 0, offsetDelta from 0) into out[0..cap).
 * Stops before the record that would take the records past max_bytes, but always encodes
 * at least one. *rows_done and *out_len tell what was written. */
int kr_encode_records(const kr_bin_view *key, const kr_bin_view *value,
                      const kr_headers_view *headers, int64_t row, int64_t row_end,
                      size_t max_bytes, uint8_t *out, size_t cap, size_t *out_len,
                      int64_t *rows_done, size_t *first_size, char *reason);

/* Writes the 61-byte v2 header of the batch in batch[0..len) (records from byte 61, as
 * given: compressed or not) and its CRC32C. baseOffset 0 and partitionLeaderEpoch -1:
 * the leader assigns both. -1 when len cannot hold a batch. */
int kr_batch_seal(uint8_t *batch, size_t len, int16_t attributes, int32_t records_count,
                  int64_t first_timestamp, int64_t max_timestamp, int64_t producer_id,
                  int16_t producer_epoch, int32_t base_sequence, char *reason);

#define KR_PARTITIONER_MURMUR2 0 /* Java's default: murmur2(key) & 0x7fffffff % n */
#define KR_PARTITIONER_CRC32 1   /* librdkafka's consistent: crc32(key) % n */

/* out[i] = partition of row i's key; a null key gives -1, or the empty key's partition
 * when null_as_empty. -1 when the algorithm or num_partitions is invalid. */
int kr_partition_keys(const kr_bin_view *key, int32_t num_partitions, int algorithm,
                      int null_as_empty, int32_t *out, char *reason);
uint32_t kr_murmur2(const uint8_t *data, size_t len);
uint32_t kr_crc32_ieee(const uint8_t *data, size_t len);

/* ---- source: record batch -> Arrow ---------------------------------------------------- */

typedef struct {
    uint8_t *data;
    size_t len;
    size_t cap;
} kr_growbuf;

/* Columns of the source's schema, grown as records are decoded. Offset buffers start
 * with their leading 0 (kr_arrow_out_init). */
typedef struct {
    int with_headers;
    int64_t rows;
    kr_growbuf key_valid, key_offsets, key_data;
    kr_growbuf value_valid, value_offsets, value_data;
    kr_growbuf offsets;        /* int64 */
    kr_growbuf timestamps;     /* int64 microseconds (Spark's timestamp) */
    kr_growbuf timestamp_types; /* int32: 0 CreateTime, 1 LogAppendTime */
    int64_t key_nulls, value_nulls;
    /* headers: list validity + offsets over the header entries; entries' key/value */
    kr_growbuf hdr_valid, hdr_offsets;
    int64_t hdr_nulls, hdr_count;
    kr_growbuf hkey_offsets, hkey_data;
    kr_growbuf hval_valid, hval_offsets, hval_data;
    int64_t hval_nulls;
} kr_arrow_out;

/* 0, or -1 when out of memory. */
int kr_arrow_out_init(kr_arrow_out *o, int with_headers);
void kr_arrow_out_free(kr_arrow_out *o);

#define KR_DECODE_OK 0
#define KR_DECODE_CORRUPT 1    /* not a sound batch / records section (reason) */
#define KR_DECODE_NOMEM 2      /* out of memory, or a column past Arrow's 2 GiB offsets */
#define KR_DECODE_COMPRESSED 3 /* stopped at a compressed batch: the caller inflates it */

/* Appends the records of one uncompressed records section (count records of a batch at
 * base_offset) whose offsets fall in [start, end). timestamp_type 1 (LogAppendTime) gives
 * every record max_timestamp, as consumers report it. */
int kr_arrow_decode_records(kr_arrow_out *o, const uint8_t *recs, size_t len, int32_t count,
                            int64_t base_offset, int64_t base_timestamp, int timestamp_type,
                            int64_t max_timestamp, int64_t start, int64_t end, char *reason);

/* Walks the record batches of a Fetch response partition (buf[pos..len)), checking each
 * (CRC32C included), skipping control batches and records outside [start, end), decoding
 * uncompressed ones. Stops at the end, at a trailing partial batch (brokers cut the
 * response at max bytes), at a batch at or past `end`, or at a compressed batch
 * (KR_DECODE_COMPRESSED, *info describes it, *pos is its position). *pos ends at the first
 * byte not consumed and *next_offset past the last batch consumed. */
int kr_arrow_decode_batches(kr_arrow_out *o, const uint8_t *buf, size_t len, size_t *pos,
                            int64_t start, int64_t end, int64_t *next_offset,
                            kr_batch_info *info, char *reason);

#endif
