/* kafkarepl storage core: checksums, record batch v2 headers, file I/O, sparse indexes,
 * atomic checkpoint files. Plain C with no Python dependency, so the same code is
 * exercised by the Cython wrapper and by the standalone test driver in tests/c/.
 *
 * Conventions: functions never read outside [buf, buf + len); errors are reported by
 * return value (-1 for syscalls with errno set, KR_* codes otherwise) plus a
 * human-readable reason written into a caller-provided buffer of KR_REASON_MAX bytes.
 */
#ifndef KR_CORE_H
#define KR_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define KR_REASON_MAX 256

/* ---- checksums ---------------------------------------------------------------- */

/* One-time table setup; idempotent. Call before any other kr_crc32c* function. */
void kr_crc32c_init(void);
/* CRC32C (Castagnoli) of data, continuing from a previous result (0 to start). */
uint32_t kr_crc32c(uint32_t crc, const void *data, size_t len);
/* Same, forcing one implementation (for tests/benchmarks). The sse4.2 variant must only
 * be called when kr_crc32c_have_sse42() is true. */
uint32_t kr_crc32c_table(uint32_t crc, const void *data, size_t len);
uint32_t kr_crc32c_sse42(uint32_t crc, const void *data, size_t len);
int kr_crc32c_have_sse42(void);
/* Use the table even where SSE4.2 exists (tests of the fallback; call after init). */
void kr_crc32c_force_table(void);
const char *kr_crc32c_backend(void); /* "sse4.2" | "table" */

uint64_t kr_xxh64(const void *data, size_t len, uint64_t seed);

/* ---- record batch v2 --------------------------------------------------------- */

#define KR_BATCH_HEADER_SIZE 61 /* bytes before the first record */
#define KR_LOG_OVERHEAD 12      /* baseOffset + batchLength */
#define KR_MIN_BATCH_LENGTH 49  /* batchLength of an empty batch */

typedef struct {
    int64_t position; /* of the batch within the scanned buffer */
    int64_t size;     /* whole batch: batchLength + 12 */
    int64_t base_offset;
    int32_t last_offset_delta;
    int32_t partition_leader_epoch;
    int8_t magic;
    uint32_t crc;
    int16_t attributes;
    int64_t first_timestamp;
    int64_t max_timestamp;
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t base_sequence;
    int32_t records_count;
} kr_batch_info;

/* Checks the batch starting at buf[pos] (pos <= len). Returns 0 and fills *out when it
 * is a whole, valid batch; otherwise returns -1 and writes the reason. */
int kr_batch_check(const uint8_t *buf, size_t len, size_t pos, int check_crc,
                   kr_batch_info *out, char *reason);

typedef struct {
    kr_batch_info *items;
    size_t count;
    size_t capacity;
} kr_batch_vec;

void kr_batch_vec_free(kr_batch_vec *v);

/* Walks batches from buf[start] until the end, the first bad batch, or max_batches
 * batches (0 = no limit). *valid_bytes = end of the last good batch (or start). Returns 0
 * when no bad batch was met (*valid_bytes < len then means the limit stopped the walk),
 * 1 when it stopped at a bad/torn batch at *error_position (reason set), -1 on
 * out-of-memory. */
int kr_scan_batches(const uint8_t *buf, size_t len, size_t start, int check_crc,
                    size_t max_batches, kr_batch_vec *out, size_t *valid_bytes, size_t *error_position,
                    char *reason);

/* Structural walk (no CRC) then, only if every batch is sound, writes baseOffset =
 * consecutive offsets from base_offset and partitionLeaderEpoch = epoch into each batch.
 * epoch_only != 0 writes the epoch and leaves offsets alone. Returns 0 with *next_offset
 * set, or 1 with *error_position and reason (buffer untouched). */
int kr_assign_offsets(uint8_t *buf, size_t len, int64_t base_offset, int32_t epoch,
                      int epoch_only, int64_t *next_offset, size_t *error_position,
                      char *reason);

/* ---- records of one batch (leader validation) ------------------------------------- */

#define KR_RECORDS_OK 0
#define KR_RECORDS_CORRUPT 1 /* bytes that are not records: CORRUPT_MESSAGE */
#define KR_RECORDS_INVALID 2 /* well-formed records breaking the batch's rules: INVALID_RECORD */

/* Resumable walker state (fields private to kr_records.c). */
typedef struct {
    int32_t expected;       /* recordsCount of the batch header */
    int32_t seen;           /* records completed so far */
    int64_t base_timestamp; /* baseTimestamp of the batch header */
    int64_t max_timestamp;  /* greatest record timestamp so far (INT64_MIN: none) */
    uint64_t consumed;      /* bytes fed so far */
    int32_t field;
    int32_t vshift;
    uint64_t vacc;
    int64_t record_left;
    int64_t skip;
    int32_t headers_left;
    int32_t error;
    /* optional search (ListOffsets by timestamp): the first record whose timestamp is
     * >= target; found = 1 then, with its offsetDelta and timestamp */
    int32_t has_target;
    int32_t found;
    int64_t target;
    int64_t cur_timestamp;
    int64_t found_timestamp;
    int32_t found_offset_delta;
} kr_records_state;

/* Checks the records section of one batch: exactly `expected` records, offsetDelta
 * 0..expected-1 in order, varints of at most 5 (10 for timestamps) bytes, every length
 * inside its record and every record length fully used, header counts/keys sound,
 * timestamps without overflow, nothing after the last record. Returns KR_RECORDS_OK
 * with *max_timestamp (greatest base + delta; INT64_MIN when expected is 0), or
 * KR_RECORDS_CORRUPT / KR_RECORDS_INVALID with the reason. */
int kr_records_check(const uint8_t *buf, size_t len, int32_t expected, int64_t base_timestamp,
                     int64_t *max_timestamp, char *reason);
/* The same checks on a stream (a decompressor's output): init, feed pieces of any size,
 * finish. O(1) memory. feed/finish return KR_RECORDS_* (sticky after an error). */
void kr_records_init(kr_records_state *s, int32_t expected, int64_t base_timestamp);
int kr_records_feed(kr_records_state *s, const uint8_t *p, size_t n, char *reason);
int kr_records_finish(kr_records_state *s, char *reason);

/* ---- log cleaner (kr_clean.c) ------------------------------------------------------- */

#define KR_CLEAN_MAP_FULL 3 /* the offset map reached its load limit */

/* Key hash -> latest offset, open addressing over caller-owned memory: `capacity` (a power
 * of two) pairs of uint64 (hash, offset). */
typedef struct {
    uint64_t *slots;
    size_t capacity;
    size_t used;
    size_t limit;
} kr_offset_map;

/* Clears the slots; -1 unless capacity is a power of two >= 2 and 0 < load_factor <= 1. */
int kr_offset_map_init(kr_offset_map *m, uint64_t *slots, size_t capacity, double load_factor);
/* 0, or 1 when a new key would pass the load limit (nothing stored). */
int kr_offset_map_put(kr_offset_map *m, const uint8_t *key, size_t n, int64_t offset);
/* The key's latest mapped offset, or -1. */
int64_t kr_offset_map_get(const kr_offset_map *m, const uint8_t *key, size_t n);
/* Maps the keyed records of an uncompressed records section (count records, offsets from
 * base_offset). KR_RECORDS_OK, KR_CLEAN_MAP_FULL (stopped: *mapped records were mapped) or
 * KR_RECORDS_CORRUPT with the reason. */
int kr_map_records(kr_offset_map *m, const uint8_t *recs, size_t len, int32_t count,
                   int64_t base_offset, int32_t *mapped, char *reason);
/* Copies the records that survive cleaning into out (cap bytes): keyed, not superseded by
 * a later mapped offset, and not a tombstone unless retain_tombstones. */
int kr_filter_records(const kr_offset_map *m, const uint8_t *recs, size_t len, int32_t count,
                      int64_t base_offset, int retain_tombstones, uint8_t *out, size_t cap,
                      size_t *out_len, int32_t *kept, char *reason);
/* One whole uncompressed v2 batch -> its cleaned copy in out (same base offset, last offset
 * delta, producer fields; new batchLength, recordsCount, CRC). *out_len = 0 when no record
 * survives and keep_if_empty is 0 (the batch is dropped). */
int kr_clean_batch(const kr_offset_map *m, const uint8_t *batch, size_t len, int retain_tombstones,
                   int keep_if_empty, uint8_t *out, size_t cap, size_t *out_len, int32_t *kept,
                   char *reason);

/* *index = the position within the records section of the first record with a null key,
 * or -1 (KIP-467: a compacted topic refuses them). KR_RECORDS_OK or KR_RECORDS_CORRUPT. */
int kr_records_first_keyless(const uint8_t *recs, size_t len, int32_t count, int32_t *index, char *reason);

/* ---- file I/O (all retry EINTR; -1 with errno on failure) ---------------------- */

ssize_t kr_write_all(int fd, const void *data, size_t len);
/* Reads up to len bytes at offset, stopping early only at end of file. */
ssize_t kr_pread_full(int fd, void *out, size_t len, int64_t offset);
int kr_ftruncate(int fd, int64_t size);
/* Size of the file behind fd (fstat), or -1 with errno. */
int64_t kr_file_size(int fd);
int kr_fdatasync(int fd);
/* syncfs(2): write back everything of the file system holding fd (one call instead of
 * an fsync per file, e.g. for thousands of checkpoint files at a clean shutdown). */
int kr_syncfs(int fd);
/* One sendfile(2); returns bytes sent, 0 on EAGAIN (non-blocking out_fd) or at EOF. */
ssize_t kr_sendfile(int out_fd, int in_fd, int64_t offset, size_t count);
/* Sends exactly count bytes, polling for writability when out_fd is non-blocking.
 * timeout_ms < 0 waits forever. Returns count, or -1 with errno (ETIMEDOUT on timeout,
 * ENODATA when in_fd ends before count bytes), *sent holds the bytes already sent. */
ssize_t kr_sendfile_all(int out_fd, int in_fd, int64_t offset, size_t count,
                        int timeout_ms, size_t *sent);

/* ---- sparse indexes (big-endian entries) ------------------------------------- */

#define KR_INDEX_ENTRY_SIZE 8      /* relative_offset int32, position int32 */
#define KR_TIMEINDEX_ENTRY_SIZE 12 /* timestamp int64, relative_offset int32 */

/* Slot of the greatest entry with key <= target, or -1. The caller guarantees
 * n_entries * entry_size <= buffer length. */
int64_t kr_index_lookup(const uint8_t *buf, int64_t n_entries, int64_t target);
int64_t kr_timeindex_lookup(const uint8_t *buf, int64_t n_entries, int64_t target);

/* ---- checkpoint files ------------------------------------------------------- */

#define KR_CHECKPOINT_TRAILER_SIZE 23 /* "xxh64 " + 16 hex + "\n" */

/* Atomically replaces path with payload + trailer: write path.tmp, fsync, rename,
 * fsync the directory. Returns 0, or -1 with errno and *failed_step naming the step. */
int kr_checkpoint_write(const char *path, const void *payload, size_t len,
                        const char **failed_step);
/* The same with sync != 0; sync == 0 writes path in place without fsync (one file
 * system operation): a crash may leave it missing or torn (the trailer's hash tells),
 * so only for files that recovery can do without. */
int kr_checkpoint_write_ex(const char *path, const void *payload, size_t len, int sync,
                           const char **failed_step);
/* Reads a whole file into a malloc'd buffer (*out, free with free()). -1 with errno. */
int kr_read_file(const char *path, uint8_t **out, size_t *len);
/* Verifies the trailer of a checkpoint image; returns the payload length, or -1 with
 * the reason. */
int64_t kr_checkpoint_verify(const uint8_t *buf, size_t len, char *reason);

#endif
