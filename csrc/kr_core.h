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
/* Appends a copy of *info; -1 on out-of-memory. */
int kr_batch_vec_push(kr_batch_vec *v, const kr_batch_info *info);

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
    int64_t min_timestamp;  /* least record timestamp so far (INT64_MAX: none) */
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
 * with *max_timestamp (greatest base + delta; INT64_MIN when expected is 0) and, unless
 * min_timestamp is NULL, *min_timestamp (least; INT64_MAX when expected is 0), or
 * KR_RECORDS_CORRUPT / KR_RECORDS_INVALID with the reason. */
int kr_records_check(const uint8_t *buf, size_t len, int32_t expected, int64_t base_timestamp,
                     int64_t *min_timestamp, int64_t *max_timestamp, char *reason);
/* The same checks on a stream (a decompressor's output): init, feed pieces of any size,
 * finish. O(1) memory. feed/finish return KR_RECORDS_* (sticky after an error). */
void kr_records_init(kr_records_state *s, int32_t expected, int64_t base_timestamp);
int kr_records_feed(kr_records_state *s, const uint8_t *p, size_t n, char *reason);
int kr_records_finish(kr_records_state *s, char *reason);

/* ---- log cleaner (kr_clean.c) ------------------------------------------------------- */

#define KR_CLEAN_MAP_FULL 3 /* the offset map reached its load limit */
#define KR_CLEAN_OUT_FULL 4 /* the output buffer cannot hold the next cleaned batch */
/* Batch attribute bit 6 (KIP-534): the base timestamp holds the batch's delete horizon,
 * the time after which the cleaner removes its tombstones (or the control marker). */
#define KR_ATTR_DELETE_HORIZON 0x40

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
 * a later mapped offset, and not a tombstone unless retain_tombstones. *tombstones = how
 * many of the kept records are tombstones. */
int kr_filter_records(const kr_offset_map *m, const uint8_t *recs, size_t len, int32_t count,
                      int64_t base_offset, int retain_tombstones, uint8_t *out, size_t cap,
                      size_t *out_len, int32_t *kept, int32_t *tombstones, char *reason);
/* Rewrites an uncompressed records section so that each record keeps its timestamp
 * (old_base + delta) relative to new_base instead (KIP-534: the base timestamp becomes the
 * delete horizon); *max_timestamp = the greatest record timestamp (INT64_MIN: none). Each
 * record grows by at most 10 bytes. KR_RECORDS_OK, or KR_RECORDS_CORRUPT (also when out is
 * too small or a timestamp leaves int64). */
int kr_rebase_records(const uint8_t *recs, size_t len, int32_t count, int64_t old_base,
                      int64_t new_base, uint8_t *out, size_t cap, size_t *out_len,
                      int64_t *max_timestamp, char *reason);

/* Whole chunks of a segment (the cleaner's fast path): plain batches, i.e. uncompressed,
 * neither transactional nor control, are handled in C; the walk stops at the first batch
 * it leaves to the caller (compressed, transactional, control) or that does not end inside
 * the chunk, and *consumed is where it stopped. Records are parsed once into the scratch
 * space, then the map is probed with prefetching, so the cache misses of a large map
 * overlap instead of adding up. Chunks are at most 2 GiB. */
struct kr_clean_rec;
typedef struct {
    struct kr_clean_rec *recs;
    size_t recs_cap;
    kr_batch_info *batches;
    size_t batches_cap;
} kr_clean_scratch; /* zero-initialise; kr_clean_scratch_free releases */
void kr_clean_scratch_free(kr_clean_scratch *s);

/* Maps the keyed records of the plain batches of buf[start, len) whose last offset is >=
 * min_last_offset. KR_RECORDS_OK, KR_CLEAN_MAP_FULL (the chunk is not fully mapped),
 * KR_RECORDS_CORRUPT with the reason, or -1 on out-of-memory. */
int kr_map_batches(kr_offset_map *m, const uint8_t *buf, size_t len, size_t start,
                   int64_t min_last_offset, kr_clean_scratch *s, size_t *consumed, char *reason);

/* Tombstones (KIP-534, as Kafka's LogCleaner): a batch without a delete horizon keeps its
 * tombstones and, when it keeps any, is rewritten with the horizon flag and base timestamp
 * now_ms + delete_retention_ms (every record keeping its exact timestamp through re-encoded
 * deltas, maxTimestamp recomputed); a batch with a horizon loses its tombstones once
 * now_ms >= the horizon. */
typedef struct {
    int64_t now_ms;
    int64_t delete_retention_ms;
    const int64_t *retain_empty; /* sorted last offsets of batches kept even when emptied */
    size_t n_retain_empty;       /* (each producer's last batch: its dedupe state) */
} kr_clean_opts;

/* One whole uncompressed v2 batch -> its cleaned copy in out (same base offset, last offset
 * delta, producer fields; new batchLength, recordsCount, CRC, and the delete horizon as
 * above). *out_len = 0 when no record survives and keep_if_empty is 0 (the batch is
 * dropped); an emptied batch kept is a bare header as Kafka writes it (no codec, no
 * horizon, base timestamp -1, maxTimestamp kept). *horizon is lowered to the written
 * batch's delete horizon when it holds tombstones. The output can be up to 2.5 times the
 * batch's size: KR_CLEAN_OUT_FULL when cap is too small. */
int kr_clean_batch(const kr_offset_map *m, const uint8_t *batch, size_t len, const kr_clean_opts *o,
                   int keep_if_empty, kr_clean_scratch *s, uint8_t *out, size_t cap, size_t *out_len,
                   int32_t *kept, int64_t *horizon, char *reason);

/* Writes the cleaned copies of the plain batches of buf[start, len) to out (cap bytes)
 * from out_pos on: batches whose records all survive (and need no delete horizon set) byte
 * for byte, others rewritten as kr_clean_batch does, emptied ones dropped unless retained.
 * *out_len = bytes written. Appends the info of every written batch (position: within out)
 * to *written, adds the records removed to *removed and lowers *horizon as kr_clean_batch.
 * KR_RECORDS_OK, KR_CLEAN_OUT_FULL (stopped before the first batch that did not fit:
 * *consumed is its position), KR_RECORDS_CORRUPT or -1 (out-of-memory). */
int kr_clean_batches(const kr_offset_map *m, const uint8_t *buf, size_t len, size_t start,
                     const kr_clean_opts *o, kr_clean_scratch *s, uint8_t *out, size_t cap,
                     size_t out_pos, size_t *out_len, size_t *consumed, kr_batch_vec *written,
                     int64_t *removed, int64_t *horizon, char *reason);

/* Whole segment files (the cleaner's loops without the GIL): read [*pos, end) of in_fd in
 * pieces of buf_cap bytes and map or clean them with the chunk loops above, until the end,
 * a batch left to the caller, or `budget` bytes read (0: no limit). Cleaned batches are
 * written to out_fd (opened O_APPEND, out_size bytes long) whenever out holds flush_at
 * bytes, and always before returning, each write followed by kr_writeback_start; their
 * infos (positions: in the output file) are appended to *written. Stop reasons: */
#define KR_SEG_END 0    /* *pos == end */
#define KR_SEG_BATCH 1  /* the batch at *pos (*need bytes) is the caller's */
#define KR_SEG_GROW 2   /* the batch at *pos (*need bytes) is larger than buf_cap, or its
                         * cleaned copy larger than out_cap: give buf need bytes or more
                         * and out 3 times buf's size */
#define KR_SEG_BUDGET 3 /* budget bytes read */
#define KR_SEG_SHORT 4  /* the file ended before `end` (truncated meanwhile) */
typedef struct {
    int64_t pos;     /* in: where to start; out: where the walk stopped */
    int64_t need;    /* KR_SEG_BATCH / KR_SEG_GROW: the batch's size */
    int64_t read;    /* bytes read */
    int64_t written; /* bytes written */
    int64_t removed; /* records removed */
    int64_t horizon; /* in/out: lowered to the delete horizon of each written batch that
                      * holds tombstones (start it at INT64_MAX) */
    int stop;
} kr_seg_walk;
/* KR_RECORDS_OK, KR_RECORDS_CORRUPT (reason), KR_CLEAN_MAP_FULL, or -1 with errno (I/O,
 * out-of-memory). */
int kr_map_segment(kr_offset_map *m, int in_fd, int64_t end, uint8_t *buf, size_t buf_cap,
                   int64_t min_last_offset, int64_t budget, kr_clean_scratch *s, kr_seg_walk *w,
                   char *reason);
int kr_clean_segment(const kr_offset_map *m, int in_fd, int64_t end, uint8_t *buf, size_t buf_cap,
                     uint8_t *out, size_t out_cap, size_t flush_at, int out_fd, int64_t out_size,
                     int64_t budget, const kr_clean_opts *o, kr_clean_scratch *s, kr_batch_vec *written,
                     kr_seg_walk *w, char *reason);

/* kr_bulk.c: the calling thread's segment passes (kr_map_segment, kr_clean_segment) yield
 * the core (sched_yield) as they start and every `ns` after (0: never; per thread). */
void kr_bulk_set_yield_interval(int64_t ns);
int64_t kr_bulk_yield_interval(void);
void kr_bulk_yield(int now); /* now: at once, else only once the interval has passed */

/* *index = the position within the records section of the first record with a null key,
 * or -1 (KIP-467: a compacted topic refuses them). KR_RECORDS_OK or KR_RECORDS_CORRUPT. */
int kr_records_first_keyless(const uint8_t *recs, size_t len, int32_t count, int32_t *index, char *reason);

/* The records of the section whose timestamp (base_timestamp + delta) lies outside
 * [low, high] (KIP-937's bounds): their positions in indexes[0..*found) and timestamps in
 * timestamps[0..*found); both arrays hold `count` entries. KR_RECORDS_OK or
 * KR_RECORDS_CORRUPT. */
int kr_records_outside(const uint8_t *recs, size_t len, int32_t count, int64_t base_timestamp,
                       int64_t low, int64_t high, int32_t *indexes, int64_t *timestamps,
                       int32_t *found, char *reason);

/* One record's offset delta, and its key and value as spans of the records section
 * (position from the section's start; length -1: null). */
typedef struct {
    int64_t offset_delta;
    int64_t key_pos, key_len;
    int64_t value_pos, value_len;
} kr_record_fields;

/* out[0..count) = the fields of the section's `count` records (for readers that need
 * their keys and values: the coordinators loading their logs). KR_RECORDS_OK or
 * KR_RECORDS_CORRUPT; every span lies inside [recs, recs + len). */
int kr_records_fields(const uint8_t *recs, size_t len, int32_t count, kr_record_fields *out, char *reason);

/* ---- file I/O (all retry EINTR; -1 with errno on failure) ---------------------- */

ssize_t kr_write_all(int fd, const void *data, size_t len);
/* Reads up to len bytes at offset, stopping early only at end of file. */
ssize_t kr_pread_full(int fd, void *out, size_t len, int64_t offset);
int kr_ftruncate(int fd, int64_t size);
/* Size of the file behind fd (fstat), or -1 with errno. */
int64_t kr_file_size(int fd);
int kr_fdatasync(int fd);
/* Starts writeback of [offset, offset + len) without waiting (sync_file_range WRITE; a
 * no-op where it does not exist), so a later fdatasync has less left to wait for. */
int kr_writeback_start(int fd, int64_t offset, int64_t len);
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

/* The sparse index entries of batches appended to a segment at base_position (each
 * batch's position relative to it), as LogSegment._index_batches makes them: before a
 * batch, once more than `interval` bytes went by since the last offset entry, an offset
 * entry (its last offset, its position) and, when the segment's max timestamp grew since
 * the last time entry, a time entry (that max, its offset). Big-endian, at most n of each:
 * off_out holds n * 8 bytes, time_out n * 12. Returns 0, or -1 when an offset or a
 * position leaves the int32 range of an entry (nothing in *st is updated then). */
typedef struct {
    int64_t interval;        /* index.interval.bytes */
    int64_t seg_base;        /* the segment's base offset */
    int64_t since;           /* in/out: bytes since the last offset entry */
    int64_t seg_max_ts;      /* in/out: the segment's max timestamp, and its offset */
    int64_t seg_max_offset;
    int64_t last_indexed_ts; /* in/out: the last time entry's timestamp (-1: none) */
    int64_t last_offset;     /* in/out: the last batch's last offset */
} kr_index_state;
int kr_index_batches(const kr_batch_info *b, size_t n, int64_t base_position, kr_index_state *st,
                     uint8_t *off_out, size_t *n_off, uint8_t *time_out, size_t *n_time);

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
