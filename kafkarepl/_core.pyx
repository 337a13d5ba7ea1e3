# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Storage core: thin Cython wrapper over csrc/ (CRC32C, xxh64, record batch v2 headers,
file I/O, sparse index search, checkpoint files).

Only argument conversion, GIL release and exception mapping live here; the logic is
C in csrc/ so the standalone C tests exercise the same code. Buffer arguments take any
C-contiguous buffer (bytes, bytearray, memoryview, mmap, numpy).
"""

import os
from collections import namedtuple

from cpython.buffer cimport (
    PyBUF_SIMPLE,
    PyBUF_WRITABLE,
    PyBuffer_Release,
    PyObject_GetBuffer,
)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.errno cimport errno
from libc.stdint cimport (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    int8_t,
    int16_t,
    int32_t,
    int64_t,
    uint8_t,
    uint32_t,
    uint64_t,
)
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdlib cimport free
from libc.string cimport memset

from kafkarepl.errors import CheckpointCorruptError, CorruptBatchError, InvalidBatchError


cdef extern from "kr_core.h" nogil:
    enum:
        KR_REASON_MAX
        KR_BATCH_HEADER_SIZE
        KR_INDEX_ENTRY_SIZE
        KR_TIMEINDEX_ENTRY_SIZE

    void kr_crc32c_init()
    uint32_t kr_crc32c(uint32_t crc, const void *data, size_t len)
    uint32_t kr_crc32c_table(uint32_t crc, const void *data, size_t len)
    uint32_t kr_crc32c_sse42(uint32_t crc, const void *data, size_t len)
    int kr_crc32c_have_sse42()
    void kr_crc32c_force_table()
    const char *kr_crc32c_backend()
    uint64_t kr_xxh64(const void *data, size_t len, uint64_t seed)

    ctypedef struct kr_batch_info:
        int64_t position
        int64_t size
        int64_t base_offset
        int32_t last_offset_delta
        int32_t partition_leader_epoch
        int8_t magic
        uint32_t crc
        int16_t attributes
        int64_t first_timestamp
        int64_t max_timestamp
        int64_t producer_id
        int16_t producer_epoch
        int32_t base_sequence
        int32_t records_count

    ctypedef struct kr_batch_vec:
        kr_batch_info *items
        size_t count
        size_t capacity

    void kr_batch_vec_free(kr_batch_vec *v)
    int kr_scan_batches(const uint8_t *buf, size_t len, size_t start, int check_crc,
                        size_t max_batches, kr_batch_vec *out, size_t *valid_bytes, size_t *error_position,
                        char *reason)
    int kr_assign_offsets(uint8_t *buf, size_t len, int64_t base_offset, int32_t epoch,
                          int epoch_only, int64_t *next_offset, size_t *error_position,
                          char *reason)

    enum:
        KR_RECORDS_OK
        KR_RECORDS_CORRUPT
        KR_RECORDS_INVALID
    ctypedef struct kr_records_state:
        int32_t expected
        int32_t seen
        int64_t max_timestamp
        int64_t min_timestamp
        uint64_t consumed
        int32_t has_target
        int32_t found
        int64_t target
        int64_t found_timestamp
        int32_t found_offset_delta
    int kr_records_check(const uint8_t *buf, size_t len, int32_t expected,
                         int64_t base_timestamp, int64_t *min_timestamp, int64_t *max_timestamp,
                         char *reason)
    void kr_records_init(kr_records_state *s, int32_t expected, int64_t base_timestamp)
    int kr_records_feed(kr_records_state *s, const uint8_t *p, size_t n, char *reason)
    int kr_records_finish(kr_records_state *s, char *reason)

    enum:
        KR_CLEAN_MAP_FULL
        KR_CLEAN_OUT_FULL
        KR_ATTR_DELETE_HORIZON
    ctypedef struct kr_offset_map:
        uint64_t *slots
        size_t capacity
        size_t used
        size_t limit
    int kr_offset_map_init(kr_offset_map *m, uint64_t *slots, size_t capacity, double load_factor)
    int64_t kr_offset_map_get(const kr_offset_map *m, const uint8_t *key, size_t n)
    int kr_map_records(kr_offset_map *m, const uint8_t *recs, size_t len, int32_t count,
                       int64_t base_offset, int32_t *mapped, char *reason)
    int kr_filter_records(const kr_offset_map *m, const uint8_t *recs, size_t len, int32_t count,
                          int64_t base_offset, int retain_tombstones, uint8_t *out, size_t cap,
                          size_t *out_len, int32_t *kept, int32_t *tombstones, char *reason)
    int kr_rebase_records(const uint8_t *recs, size_t len, int32_t count, int64_t old_base,
                          int64_t new_base, uint8_t *out, size_t cap, size_t *out_len,
                          int64_t *max_timestamp, char *reason)
    int kr_records_first_keyless(const uint8_t *recs, size_t len, int32_t count, int32_t *index,
                                 char *reason)
    int kr_records_outside(const uint8_t *recs, size_t len, int32_t count, int64_t base_timestamp,
                           int64_t low, int64_t high, int32_t *indexes, int64_t *timestamps,
                           int32_t *found, char *reason)
    ctypedef struct kr_record_fields:
        int64_t offset_delta
        int64_t key_pos
        int64_t key_len
        int64_t value_pos
        int64_t value_len
    int kr_records_fields(const uint8_t *recs, size_t len, int32_t count, kr_record_fields *out,
                          char *reason)
    ctypedef struct kr_clean_scratch:
        pass
    void kr_clean_scratch_free(kr_clean_scratch *s)
    enum:
        KR_SEG_END
        KR_SEG_BATCH
        KR_SEG_GROW
        KR_SEG_BUDGET
        KR_SEG_SHORT
    ctypedef struct kr_seg_walk:
        int64_t pos
        int64_t need
        int64_t read
        int64_t written
        int64_t removed
        int64_t horizon
        int stop
    int kr_map_segment(kr_offset_map *m, int in_fd, int64_t end, uint8_t *buf, size_t buf_cap,
                       int64_t min_last_offset, int64_t budget, kr_clean_scratch *s, kr_seg_walk *w,
                       char *reason)
    ctypedef struct kr_clean_opts:
        int64_t now_ms
        int64_t delete_retention_ms
        const int64_t *retain_empty
        size_t n_retain_empty
    int kr_clean_batch(const kr_offset_map *m, const uint8_t *batch, size_t len, const kr_clean_opts *o,
                       int keep_if_empty, kr_clean_scratch *s, uint8_t *out, size_t cap, size_t *out_len,
                       int32_t *kept, int64_t *horizon, char *reason)
    int kr_clean_segment(const kr_offset_map *m, int in_fd, int64_t end, uint8_t *buf, size_t buf_cap,
                         uint8_t *out, size_t out_cap, size_t flush_at, int out_fd, int64_t out_size,
                         int64_t budget, const kr_clean_opts *o, kr_clean_scratch *s, kr_batch_vec *written,
                         kr_seg_walk *w, char *reason)

    void kr_bulk_set_yield_interval(int64_t ns)
    int64_t kr_bulk_yield_interval()

    Py_ssize_t kr_write_all(int fd, const void *data, size_t len)
    Py_ssize_t kr_pread_full(int fd, void *out, size_t len, int64_t offset)
    int kr_ftruncate(int fd, int64_t size)
    int64_t kr_file_size(int fd)
    int kr_fdatasync(int fd)
    int kr_writeback_start(int fd, int64_t offset, int64_t len)
    int kr_syncfs(int fd)
    Py_ssize_t kr_sendfile(int out_fd, int in_fd, int64_t offset, size_t count)
    Py_ssize_t kr_sendfile_all(int out_fd, int in_fd, int64_t offset, size_t count,
                               int timeout_ms, size_t *sent)

    int64_t kr_index_lookup(const uint8_t *buf, int64_t n_entries, int64_t target)
    int64_t kr_timeindex_lookup(const uint8_t *buf, int64_t n_entries, int64_t target)
    ctypedef struct kr_index_state:
        int64_t interval
        int64_t seg_base
        int64_t since
        int64_t seg_max_ts
        int64_t seg_max_offset
        int64_t last_indexed_ts
        int64_t last_offset
    int kr_index_batches(const kr_batch_info *b, size_t n, int64_t base_position, kr_index_state *st,
                         uint8_t *off_out, size_t *n_off, uint8_t *time_out, size_t *n_time)

    int kr_checkpoint_write_ex(const char *path, const void *payload, size_t len, int sync,
                               const char **failed_step)
    int kr_read_file(const char *path, uint8_t **out, size_t *len)
    int64_t kr_checkpoint_verify(const uint8_t *buf, size_t len, char *reason)


kr_crc32c_init()
if os.environ.get("KAFKAREPL_CRC32C") == "table":  # exercise the fallback on any CPU
    kr_crc32c_force_table()

# Below this size the GIL round trip costs more than the work it would overlap.
cdef enum:
    NOGIL_THRESHOLD = 65536

BATCH_HEADER_SIZE = KR_BATCH_HEADER_SIZE
ATTR_DELETE_HORIZON = KR_ATTR_DELETE_HORIZON
SEG_END, SEG_BATCH, SEG_GROW, SEG_BUDGET, SEG_SHORT = KR_SEG_END, KR_SEG_BATCH, KR_SEG_GROW, KR_SEG_BUDGET, KR_SEG_SHORT
INDEX_ENTRY_SIZE = KR_INDEX_ENTRY_SIZE
TIMEINDEX_ENTRY_SIZE = KR_TIMEINDEX_ENTRY_SIZE

BatchInfo = namedtuple(
    "BatchInfo",
    "position size base_offset last_offset_delta partition_leader_epoch magic crc "
    "attributes first_timestamp max_timestamp producer_id producer_epoch base_sequence "
    "records_count",
)


cdef inline object _oserror(int err, str context=None):
    msg = os.strerror(err)
    if context:
        msg = f"{context}: {msg}"
    return OSError(err, msg)


cdef inline int _fd(object fd) except -1:
    cdef long long v = fd
    if v < 0 or v > INT32_MAX:
        raise ValueError(f"invalid file descriptor {fd}")
    return <int>v


# ---- checksums -------------------------------------------------------------------

cdef uint32_t _crc_value(object value) except? 0:
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"CRC32C start value {value} is not an unsigned 32-bit integer")
    return <uint32_t>value


def crc32c(data, value=0):
    """CRC32C (Castagnoli) of data, continuing from a previous result `value`."""
    cdef Py_buffer view
    cdef uint32_t crc = _crc_value(value)
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        if view.len >= NOGIL_THRESHOLD:
            with nogil:
                crc = kr_crc32c(crc, view.buf, <size_t>view.len)
        else:
            crc = kr_crc32c(crc, view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return crc


def crc32c_backend():
    """The CRC32C implementation chosen at import: "sse4.2" or "table"."""
    return kr_crc32c_backend().decode()


def _crc32c_table(data, value=0):
    """Portable slicing-by-8 CRC32C (tests and benchmarks only)."""
    cdef Py_buffer view
    cdef uint32_t crc = _crc_value(value)
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        crc = kr_crc32c_table(crc, view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return crc


def _crc32c_sse42(data, value=0):
    """SSE4.2 CRC32C (tests and benchmarks only); RuntimeError on CPUs without it (or
    when KAFKAREPL_CRC32C=table)."""
    cdef Py_buffer view
    cdef uint32_t crc = _crc_value(value)
    if not kr_crc32c_have_sse42():
        raise RuntimeError("this CPU has no SSE4.2")
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        crc = kr_crc32c_sse42(crc, view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return crc


def xxh64(data, unsigned long long seed=0):
    """XXH64 of data (same values as xxhash.xxh64_intdigest)."""
    cdef Py_buffer view
    cdef uint64_t h
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        if view.len >= NOGIL_THRESHOLD:
            with nogil:
                h = kr_xxh64(view.buf, <size_t>view.len, seed)
        else:
            h = kr_xxh64(view.buf, <size_t>view.len, seed)
    finally:
        PyBuffer_Release(&view)
    return h


# ---- record batches ----------------------------------------------------------------

cdef inline object _batch_info(const kr_batch_info *b):
    return tuple.__new__(BatchInfo, (
        b.position, b.size, b.base_offset, b.last_offset_delta, b.partition_leader_epoch,
        b.magic, b.crc, b.attributes, b.first_timestamp, b.max_timestamp, b.producer_id,
        b.producer_epoch, b.base_sequence, b.records_count,
    ))


cdef class BatchVec:
    """Batches a C loop wrote (the cleaner's clean_segment), kept in C: no Python object
    per batch. Indexed by index_entries; vec[i] gives one BatchInfo."""

    cdef kr_batch_vec vec

    def __cinit__(self):
        memset(&self.vec, 0, sizeof(self.vec))

    def __dealloc__(self):
        kr_batch_vec_free(&self.vec)

    def __len__(self):
        return self.vec.count

    def __getitem__(self, Py_ssize_t i):
        if i < 0:
            i += <Py_ssize_t>self.vec.count
        if not 0 <= i < <Py_ssize_t>self.vec.count:
            raise IndexError(i)
        return _batch_info(&self.vec.items[i])

    def index_entries(self, int64_t base_position, int64_t interval, int64_t seg_base, int64_t since,
                      int64_t seg_max_ts, int64_t seg_max_offset, int64_t last_indexed_ts,
                      int64_t last_offset):
        """kr_index_batches (LogSegment._index_batches in C) over these batches, written at
        base_position. Returns (offset index entries, time index entries) as big-endian
        bytes, then the new (since, seg_max_ts, seg_max_offset, last_indexed_ts,
        last_offset). ValueError: an entry's offset or position out of the int32 range."""
        cdef kr_index_state st
        cdef size_t n = self.vec.count, n_off = 0, n_time = 0
        cdef int rc
        st.interval = interval
        st.seg_base = seg_base
        st.since = since
        st.seg_max_ts = seg_max_ts
        st.seg_max_offset = seg_max_offset
        st.last_indexed_ts = last_indexed_ts
        st.last_offset = last_offset
        off = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>(8 * n))
        tim = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>(12 * n))
        rc = kr_index_batches(self.vec.items, n, base_position, &st, <uint8_t *>PyBytes_AS_STRING(off),
                              &n_off, <uint8_t *>PyBytes_AS_STRING(tim), &n_time)
        if rc != 0:
            raise ValueError("an index entry's offset or position is out of the int32 range")
        return (off[:8 * n_off], tim[:12 * n_time], st.since, st.seg_max_ts, st.seg_max_offset,
                st.last_indexed_ts, st.last_offset)


def scan_batches(buf, Py_ssize_t start=0, bint check_crc=True, Py_ssize_t max_batches=0):
    """Walk record batches from buf[start]; stop at the first torn or invalid one.

    Returns (batches, valid_bytes, error, error_position): BatchInfo tuples of the good
    prefix, the end of the last good batch (relative to buf's start; `start` if none),
    the reason the walk stopped (None when buf[start:] is whole valid batches) and where
    the bad batch starts (-1 when error is None).

    max_batches > 0 bounds the list (walk a huge segment in chunks): the walk then also
    stops after that many batches with error None and valid_bytes < len(buf); continue
    with start=valid_bytes.
    """
    cdef Py_buffer view
    cdef kr_batch_vec vec
    cdef size_t valid = 0, errpos = 0, i
    cdef char reason[KR_REASON_MAX]
    cdef int rc
    if start < 0:
        raise ValueError(f"negative start {start}")
    if max_batches < 0:
        raise ValueError(f"negative max_batches {max_batches}")
    memset(&vec, 0, sizeof(vec))
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if start > view.len:
            raise ValueError(f"start {start} is past the end of the buffer ({view.len} bytes)")
        if view.len - start >= NOGIL_THRESHOLD:
            with nogil:
                rc = kr_scan_batches(<const uint8_t *>view.buf, <size_t>view.len, <size_t>start,
                                     check_crc, <size_t>max_batches, &vec, &valid, &errpos, reason)
        else:
            rc = kr_scan_batches(<const uint8_t *>view.buf, <size_t>view.len, <size_t>start,
                                 check_crc, <size_t>max_batches, &vec, &valid, &errpos, reason)
        if rc < 0:
            raise MemoryError()
        batches = []
        for i in range(vec.count):
            batches.append(_batch_info(&vec.items[i]))
    finally:
        kr_batch_vec_free(&vec)
        PyBuffer_Release(&view)
    if rc == 0:
        return batches, valid, None, -1
    return batches, valid, reason.decode("utf-8", "replace"), errpos


def validate_batches(buf, bint check_crc=True):
    """BatchInfo of every batch in buf; CorruptBatchError(position, reason) on the first
    problem, including trailing bytes that are not a whole batch."""
    batches, _, error, position = scan_batches(buf, 0, check_crc)
    if error is not None:
        raise CorruptBatchError(position, error)
    return batches


def validate_leader_batches(buf, bint walk_uncompressed=False, list fixups=None,
                            ts_bounds=None, list stray=None):
    """The leader's check of a producer's batches, in one pass over the C scan: what
    validate_batches checks, plus no empty batch (InvalidBatchError), plus - when
    walk_uncompressed - the records of every uncompressed batch (kr_records_check:
    count, offset deltas, varints, lengths, timestamps; CorruptBatchError or
    InvalidBatchError), appending (index, greatest record timestamp) to `fixups` for
    CreateTime batches whose header maxTimestamp differs.

    ts_bounds (low, high): appends to `stray` the index of each uncompressed CreateTime
    batch with a record timestamp outside [low, high] (KIP-937; from the walk, or from
    the header's base and max timestamps when the records are not walked); the caller
    finds which records (records_outside).

    Returns (batches, compressed): the BatchInfo list and the indexes of compressed
    batches, which the caller streams through their decompressor (storage.validation)."""
    cdef Py_buffer view
    cdef kr_batch_vec vec
    cdef size_t valid = 0, errpos = 0, i
    cdef char reason[KR_REASON_MAX]
    cdef int rc
    cdef int64_t max_ts = 0, min_ts = 0, low = 0, high = 0
    cdef bint bounded = ts_bounds is not None
    cdef const kr_batch_info *b
    if bounded:
        low, high = ts_bounds
    memset(&vec, 0, sizeof(vec))
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if view.len >= NOGIL_THRESHOLD:
            with nogil:
                rc = kr_scan_batches(<const uint8_t *>view.buf, <size_t>view.len, 0, 1, 0,
                                     &vec, &valid, &errpos, reason)
        else:
            rc = kr_scan_batches(<const uint8_t *>view.buf, <size_t>view.len, 0, 1, 0, &vec,
                                 &valid, &errpos, reason)
        if rc < 0:
            raise MemoryError()
        if rc != 0:
            raise CorruptBatchError(errpos, reason.decode("utf-8", "replace"))
        batches = []
        compressed = []
        for i in range(vec.count):
            b = &vec.items[i]
            if b.records_count == 0:
                raise InvalidBatchError(b.position, "a batch from a producer must hold records")
            if b.last_offset_delta != b.records_count - 1:  # only compaction leaves gaps
                raise CorruptBatchError(b.position, f"lastOffsetDelta {b.last_offset_delta} does not "
                                                    f"match recordsCount {b.records_count}")
            if b.attributes & 7:
                compressed.append(i)
            elif walk_uncompressed:
                rc = kr_records_check(<const uint8_t *>view.buf + b.position + KR_BATCH_HEADER_SIZE,
                                      <size_t>(b.size - KR_BATCH_HEADER_SIZE), b.records_count,
                                      b.first_timestamp, &min_ts, &max_ts, reason)
                if rc != KR_RECORDS_OK:
                    _raise_records(b.position, rc, reason)
                if fixups is not None and not b.attributes & 8 and max_ts != b.max_timestamp:
                    fixups.append((i, max_ts))
                if bounded and not b.attributes & 8 and (min_ts < low or max_ts > high):
                    stray.append(i)
            elif bounded and not b.attributes & 8 and (
                    b.first_timestamp < low or b.max_timestamp > high):
                stray.append(i)
            batches.append(_batch_info(b))
    finally:
        kr_batch_vec_free(&vec)
        PyBuffer_Release(&view)
    return batches, compressed


cdef _raise_records(int64_t position, int rc, const char *reason):
    msg = reason.decode("utf-8", "replace")
    if rc == KR_RECORDS_INVALID:
        raise InvalidBatchError(position, msg)
    raise CorruptBatchError(position, msg)


cdef class RecordsValidator:
    """The records check of one batch fed as a stream (a decompressor's output, in pieces
    of any size; O(1) memory). feed() and finish() raise CorruptBatchError or
    InvalidBatchError with the batch's `position`."""

    cdef kr_records_state state
    cdef readonly int64_t position

    def __init__(self, int32_t expected, int64_t base_timestamp, int64_t position=0,
                 target_timestamp=None):
        kr_records_init(&self.state, expected, base_timestamp)
        self.position = position
        if target_timestamp is not None:  # also find the first record at or after it
            self.state.has_target = 1
            self.state.target = _clamp64(target_timestamp)

    @property
    def found(self):
        """(offsetDelta, timestamp) of the first record with timestamp >= the target given
        to the constructor, once fed; None until then."""
        if self.state.found:
            return self.state.found_offset_delta, self.state.found_timestamp
        return None

    def feed(self, data):
        cdef Py_buffer view
        cdef char reason[KR_REASON_MAX]
        cdef int rc
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            if view.len >= NOGIL_THRESHOLD:
                with nogil:
                    rc = kr_records_feed(&self.state, <const uint8_t *>view.buf,
                                         <size_t>view.len, reason)
            else:
                rc = kr_records_feed(&self.state, <const uint8_t *>view.buf, <size_t>view.len,
                                     reason)
        finally:
            PyBuffer_Release(&view)
        if rc != KR_RECORDS_OK:
            _raise_records(self.position, rc, reason)

    def finish(self):
        """Checks the stream ended after the last declared record; returns the greatest
        record timestamp (INT64_MIN for none)."""
        cdef char reason[KR_REASON_MAX]
        cdef int rc = kr_records_finish(&self.state, reason)
        if rc != KR_RECORDS_OK:
            _raise_records(self.position, rc, reason)
        return self.state.max_timestamp

    @property
    def min_timestamp(self):
        """The least record timestamp walked (INT64_MAX for none)."""
        return self.state.min_timestamp

    @property
    def records_seen(self):
        return self.state.seen

    @property
    def bytes_fed(self):
        return self.state.consumed


def check_records(data, int32_t expected, int64_t base_timestamp):
    """kr_records_check of a whole records section; returns the greatest record timestamp
    or raises CorruptBatchError / InvalidBatchError (position 0). Tests and tools."""
    cdef Py_buffer view
    cdef char reason[KR_REASON_MAX]
    cdef int64_t max_ts = 0
    cdef int rc
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        rc = kr_records_check(<const uint8_t *>view.buf, <size_t>view.len, expected,
                              base_timestamp, NULL, &max_ts, reason)
    finally:
        PyBuffer_Release(&view)
    if rc != KR_RECORDS_OK:
        _raise_records(0, rc, reason)
    return max_ts


def record_fields(recs, int32_t count):
    """(offset delta, key, value) of each record of an uncompressed records section (key
    and value None when null). Raises CorruptBatchError on malformed records."""
    cdef Py_buffer v
    cdef char reason[KR_REASON_MAX]
    cdef int rc
    cdef int32_t i
    cdef kr_record_fields *f
    cdef const char *base
    if count < 0:
        raise CorruptBatchError(0, "negative record count")
    PyObject_GetBuffer(recs, &v, PyBUF_SIMPLE)
    try:
        # a record takes 7 bytes at least: a count from a corrupt header cannot size a
        # larger array than its bytes allow
        if count > v.len // 7:
            raise CorruptBatchError(0, f"{count} records cannot fit in {v.len} bytes")
        f = <kr_record_fields *>PyMem_Malloc(max(1, count) * sizeof(kr_record_fields))
        if f == NULL:
            raise MemoryError()
        try:
            with nogil:
                rc = kr_records_fields(<const uint8_t *>v.buf, <size_t>v.len, count, f, reason)
            if rc != KR_RECORDS_OK:
                raise CorruptBatchError(0, reason.decode("utf-8", "replace"))
            base = <const char *>v.buf
            out = []
            for i in range(count):
                out.append((f[i].offset_delta,
                            None if f[i].key_len < 0 else base[f[i].key_pos:f[i].key_pos + f[i].key_len],
                            None if f[i].value_len < 0 else base[f[i].value_pos:f[i].value_pos + f[i].value_len]))
            return out
        finally:
            PyMem_Free(f)
    finally:
        PyBuffer_Release(&v)


# ---- log cleaner ---------------------------------------------------------------

def records_outside(recs, int32_t count, int64_t base_timestamp, int64_t low, int64_t high):
    """[(index, timestamp)] of the records of an uncompressed records section whose
    timestamp lies outside [low, high] (KIP-937). Raises CorruptBatchError on malformed
    records."""
    cdef Py_buffer v
    cdef char reason[KR_REASON_MAX]
    cdef int32_t found = 0, i
    cdef int rc
    cdef int32_t *indexes = NULL
    cdef int64_t *stamps = NULL
    if count < 0:
        raise CorruptBatchError(0, "negative record count")
    PyObject_GetBuffer(recs, &v, PyBUF_SIMPLE)
    try:
        if count > v.len:  # a record takes a byte at least: the count is bounded by the buffer
            raise CorruptBatchError(0, f"{count} records cannot fit in {v.len} bytes")
        indexes = <int32_t *>PyMem_Malloc(max(count, 1) * sizeof(int32_t))
        stamps = <int64_t *>PyMem_Malloc(max(count, 1) * sizeof(int64_t))
        if indexes == NULL or stamps == NULL:
            raise MemoryError()
        rc = kr_records_outside(<const uint8_t *>v.buf, <size_t>v.len, count, base_timestamp,
                                low, high, indexes, stamps, &found, reason)
        if rc != KR_RECORDS_OK:
            raise CorruptBatchError(0, reason.decode("utf-8", "replace"))
        return [(indexes[i], stamps[i]) for i in range(found)]
    finally:
        PyMem_Free(indexes)
        PyMem_Free(stamps)
        PyBuffer_Release(&v)


def first_keyless_record(recs, int32_t count):
    """Index of the first record with a null key in an uncompressed records section, or
    -1 (KIP-467). Raises CorruptBatchError on malformed records."""
    cdef Py_buffer v
    cdef char reason[KR_REASON_MAX]
    cdef int32_t index = -1
    cdef int rc
    PyObject_GetBuffer(recs, &v, PyBUF_SIMPLE)
    try:
        rc = kr_records_first_keyless(<const uint8_t *>v.buf, <size_t>v.len, count, &index, reason)
    finally:
        PyBuffer_Release(&v)
    if rc != KR_RECORDS_OK:
        raise CorruptBatchError(0, reason.decode("utf-8", "replace"))
    return index


def set_bulk_yield_interval(int64_t ns):
    """The calling thread's segment passes (OffsetMap.map_segment, clean_segment) yield the
    core as they start and every `ns` nanoseconds after (csrc/kr_bulk.c), so that a thread
    woken on the same core (the event loop) waits about that long at most behind them.
    0: never (each thread starts so)."""
    kr_bulk_set_yield_interval(ns)


def bulk_yield_interval():
    """The calling thread's yield interval in nanoseconds (0: its passes never yield)."""
    return kr_bulk_yield_interval()


cdef class OffsetMap:
    """The cleaner's key -> latest offset map (csrc/kr_clean.c) over a writable buffer the
    caller owns (a numpy uint64 array of 2 * capacity items, e.g. over an anonymous mmap);
    capacity a power of two. The buffer is held for the map's lifetime."""

    cdef kr_offset_map m
    cdef Py_buffer view
    cdef bint held
    cdef double load_factor
    cdef kr_clean_scratch scratch  # the chunk loops' parsed records, reused

    def __cinit__(self):
        self.held = False
        memset(&self.scratch, 0, sizeof(self.scratch))

    def __init__(self, buf, size_t capacity, double load_factor=0.9):
        PyObject_GetBuffer(buf, &self.view, PyBUF_SIMPLE | PyBUF_WRITABLE)
        self.held = True
        if <size_t>self.view.len < capacity * 16:
            raise ValueError(f"buffer of {self.view.len} bytes cannot hold {capacity} slots")
        self.load_factor = load_factor
        cdef int rc
        with nogil:  # zeroes the whole map: up to log.cleaner.dedupe.buffer.size bytes
            rc = kr_offset_map_init(&self.m, <uint64_t *>self.view.buf, capacity, load_factor)
        if rc != 0:
            raise ValueError(f"capacity {capacity} must be a power of two >= 2, load factor in (0, 1]")

    def __dealloc__(self):
        kr_clean_scratch_free(&self.scratch)
        if self.held:
            PyBuffer_Release(&self.view)

    @property
    def size(self):
        return self.m.used

    @property
    def limit(self):
        return self.m.limit

    def clear(self):
        with nogil:
            kr_offset_map_init(&self.m, self.m.slots, self.m.capacity, self.load_factor)

    def get(self, key):
        """The latest offset mapped for key (bytes), or -1."""
        cdef Py_buffer v
        PyObject_GetBuffer(key, &v, PyBUF_SIMPLE)
        try:
            return kr_offset_map_get(&self.m, <const uint8_t *>v.buf, <size_t>v.len)
        finally:
            PyBuffer_Release(&v)

    def map_records(self, recs, int32_t count, int64_t base_offset):
        """Map the keyed records of an uncompressed records section. Returns (full, mapped):
        full is True when the map reached its load limit (then `mapped` records were
        mapped). Raises CorruptBatchError on malformed records."""
        cdef Py_buffer v
        cdef char reason[KR_REASON_MAX]
        cdef int32_t mapped = 0
        cdef int rc
        PyObject_GetBuffer(recs, &v, PyBUF_SIMPLE)
        try:
            with nogil:
                rc = kr_map_records(&self.m, <const uint8_t *>v.buf, <size_t>v.len, count,
                                    base_offset, &mapped, reason)
        finally:
            PyBuffer_Release(&v)
        if rc == KR_CLEAN_MAP_FULL:
            return True, mapped
        if rc != KR_RECORDS_OK:
            raise CorruptBatchError(0, reason.decode("utf-8", "replace"))
        return False, mapped

    def filter_records(self, recs, int32_t count, int64_t base_offset, bint retain_tombstones):
        """(surviving records' bytes, how many, how many of them are tombstones) of an
        uncompressed records section."""
        cdef Py_buffer v
        cdef char reason[KR_REASON_MAX]
        cdef int32_t kept = 0, tombstones = 0
        cdef size_t out_len = 0
        cdef int rc
        cdef uint8_t *dst
        PyObject_GetBuffer(recs, &v, PyBUF_SIMPLE)
        out = PyBytes_FromStringAndSize(NULL, max(v.len, 1))
        dst = <uint8_t *>PyBytes_AS_STRING(out)
        try:
            with nogil:
                rc = kr_filter_records(&self.m, <const uint8_t *>v.buf, <size_t>v.len, count,
                                       base_offset, retain_tombstones, dst, <size_t>v.len,
                                       &out_len, &kept, &tombstones, reason)
        finally:
            PyBuffer_Release(&v)
        if rc != KR_RECORDS_OK:
            raise CorruptBatchError(0, reason.decode("utf-8", "replace"))
        return out[:out_len], kept, tombstones

    def map_segment(self, fd, int64_t pos, int64_t end, buf, int64_t min_last_offset, int64_t budget=0):
        """kr_map_segment over fd's [pos, end) in reads of len(buf) bytes, without the GIL.
        Returns (stop, pos, need, bytes read, full): stop one of SEG_*, full when the map
        reached its load limit (the walk is then incomplete). Raises CorruptBatchError,
        OSError."""
        cdef Py_buffer b
        cdef char reason[KR_REASON_MAX]
        cdef kr_seg_walk w
        cdef int rc, err = 0
        cdef int cfd = _fd(fd)
        memset(&w, 0, sizeof(w))
        w.pos = pos
        PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE | PyBUF_WRITABLE)
        try:
            with nogil:
                rc = kr_map_segment(&self.m, cfd, end, <uint8_t *>b.buf, <size_t>b.len, min_last_offset,
                                    budget, &self.scratch, &w, reason)
                if rc < 0:
                    err = errno
        finally:
            PyBuffer_Release(&b)
        if rc < 0:
            raise _oserror(err, "map_segment")
        if rc == KR_RECORDS_CORRUPT:
            raise CorruptBatchError(w.pos, reason.decode("utf-8", "replace"))
        return w.stop, w.pos, w.need, w.read, rc == KR_CLEAN_MAP_FULL

    def clean_segment(self, fd, int64_t pos, int64_t end, buf, out, Py_ssize_t flush_at, out_fd,
                      int64_t out_size, int64_t now_ms, int64_t delete_retention_ms, retain_empty,
                      int64_t budget=0):
        """kr_clean_segment: fd's [pos, end) cleaned into out_fd (O_APPEND, out_size bytes),
        reading len(buf) bytes at a time, writing out (len(out) >= len(buf)) at flush_at
        bytes, without the GIL. Returns (stop, pos, need, bytes read, bytes written,
        records removed, a BatchVec of the written batches with their positions in out_fd,
        earliest delete horizon of the written batches holding tombstones or None).
        Raises CorruptBatchError, OSError."""
        cdef Py_buffer b, o, keep
        cdef char reason[KR_REASON_MAX]
        cdef kr_seg_walk w
        cdef kr_clean_opts opts
        cdef BatchVec written = BatchVec()
        cdef int rc, err = 0
        cdef int cfd = _fd(fd)
        cdef int ofd = _fd(out_fd)
        memset(&w, 0, sizeof(w))
        w.pos = pos
        w.horizon = INT64_MAX
        PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE | PyBUF_WRITABLE)
        try:
            PyObject_GetBuffer(out, &o, PyBUF_SIMPLE | PyBUF_WRITABLE)
            try:
                PyObject_GetBuffer(retain_empty, &keep, PyBUF_SIMPLE)
                try:
                    if keep.len % 8:
                        raise ValueError("retain_empty must hold int64 values")
                    if flush_at < 0:
                        raise ValueError("negative flush_at")
                    opts.now_ms = now_ms
                    opts.delete_retention_ms = delete_retention_ms
                    opts.retain_empty = <const int64_t *>keep.buf
                    opts.n_retain_empty = <size_t>(keep.len // 8)
                    with nogil:
                        rc = kr_clean_segment(&self.m, cfd, end, <uint8_t *>b.buf, <size_t>b.len,
                                              <uint8_t *>o.buf, <size_t>o.len, <size_t>flush_at, ofd,
                                              out_size, budget, &opts, &self.scratch, &written.vec, &w, reason)
                        if rc < 0:
                            err = errno
                    if rc < 0:
                        raise _oserror(err, "clean_segment")
                    if rc != KR_RECORDS_OK:
                        raise CorruptBatchError(w.pos, reason.decode("utf-8", "replace"))
                finally:
                    PyBuffer_Release(&keep)
            finally:
                PyBuffer_Release(&o)
        finally:
            PyBuffer_Release(&b)
        return (w.stop, w.pos, w.need, w.read, w.written, w.removed, written,
                None if w.horizon == INT64_MAX else w.horizon)

    def clean_batch(self, batch, int64_t now_ms, int64_t delete_retention_ms, bint keep_if_empty, out,
                    Py_ssize_t out_pos):
        """Write the cleaned copy of one uncompressed batch (bytes-like) into the writable
        buffer `out` at out_pos (3 * len(batch) bytes always suffice). Returns (bytes
        written, records kept, delete horizon when the written batch holds tombstones
        else None); 0 bytes when the batch goes. ValueError when out is too small."""
        cdef Py_buffer v, o
        cdef char reason[KR_REASON_MAX]
        cdef int32_t kept = 0
        cdef size_t out_len = 0
        cdef int64_t horizon = INT64_MAX
        cdef kr_clean_opts opts
        cdef int rc
        memset(&opts, 0, sizeof(opts))
        opts.now_ms = now_ms
        opts.delete_retention_ms = delete_retention_ms
        PyObject_GetBuffer(batch, &v, PyBUF_SIMPLE)
        try:
            PyObject_GetBuffer(out, &o, PyBUF_SIMPLE | PyBUF_WRITABLE)
            try:
                if out_pos < 0 or out_pos > o.len:
                    raise ValueError("output position outside the buffer")
                with nogil:
                    rc = kr_clean_batch(&self.m, <const uint8_t *>v.buf, <size_t>v.len, &opts, keep_if_empty,
                                        &self.scratch, <uint8_t *>o.buf + out_pos, <size_t>(o.len - out_pos),
                                        &out_len, &kept, &horizon, reason)
            finally:
                PyBuffer_Release(&o)
        finally:
            PyBuffer_Release(&v)
        if rc == KR_CLEAN_OUT_FULL:
            raise ValueError("output buffer too small")
        if rc != KR_RECORDS_OK:
            raise CorruptBatchError(0, reason.decode("utf-8", "replace"))
        return out_len, kept, (None if horizon == INT64_MAX else horizon)


def rebase_records(recs, int32_t count, int64_t old_base, int64_t new_base):
    """(records, greatest timestamp or None) of an uncompressed records section with each
    record's timestamp delta re-encoded from old_base to new_base (KIP-534's delete
    horizon as the base timestamp), every timestamp unchanged."""
    cdef Py_buffer v
    cdef char reason[KR_REASON_MAX]
    cdef size_t out_len = 0, cap
    cdef int64_t max_ts = INT64_MIN
    cdef int rc
    cdef uint8_t *dst
    PyObject_GetBuffer(recs, &v, PyBUF_SIMPLE)
    try:
        if count < 0:
            raise ValueError("negative record count")
        cap = <size_t>v.len + 10 * <size_t>count
        out = PyBytes_FromStringAndSize(NULL, max(<Py_ssize_t>cap, 1))
        dst = <uint8_t *>PyBytes_AS_STRING(out)
        with nogil:
            rc = kr_rebase_records(<const uint8_t *>v.buf, <size_t>v.len, count, old_base, new_base,
                                   dst, cap, &out_len, &max_ts, reason)
    finally:
        PyBuffer_Release(&v)
    if rc != KR_RECORDS_OK:
        raise CorruptBatchError(0, reason.decode("utf-8", "replace"))
    return out[:out_len], (None if max_ts == INT64_MIN else max_ts)


cdef int64_t _assign(object buf, object base_offset, object epoch, bint epoch_only) except? -1:
    cdef Py_buffer view
    cdef int64_t next_offset = 0
    cdef size_t errpos = 0
    cdef char reason[KR_REASON_MAX]
    cdef int rc
    if not 0 <= base_offset <= INT64_MAX:
        raise ValueError(f"base offset {base_offset} out of range")
    if not INT32_MIN <= epoch <= INT32_MAX:
        raise ValueError(f"partition leader epoch {epoch} is not a 32-bit integer")
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE | PyBUF_WRITABLE)
    try:
        rc = kr_assign_offsets(<uint8_t *>view.buf, <size_t>view.len, <int64_t>base_offset,
                               <int32_t>epoch, epoch_only, &next_offset, &errpos, reason)
    finally:
        PyBuffer_Release(&view)
    if rc != 0:
        raise CorruptBatchError(errpos, reason.decode("utf-8", "replace"))
    return next_offset


def assign_offsets(buf, base_offset, partition_leader_epoch):
    """Write consecutive baseOffsets from base_offset and partitionLeaderEpoch into each
    batch of the writable buf, in place (both lie outside the CRC). Returns the next
    offset (the new LEO). The buffer is left untouched if any batch header is unsound."""
    return _assign(buf, base_offset, partition_leader_epoch, False)


def set_partition_leader_epoch(buf, epoch):
    """Write partitionLeaderEpoch into every batch of the writable buf."""
    _assign(buf, 0, epoch, True)


# ---- file I/O ----------------------------------------------------------------------

def file_append(fd, data):
    """Write all of data at fd's position (retrying short writes/EINTR); returns len."""
    cdef Py_buffer view
    cdef Py_ssize_t n
    cdef int err = 0
    cdef int cfd = _fd(fd)
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        with nogil:
            n = kr_write_all(cfd, view.buf, <size_t>view.len)
            if n < 0:
                err = errno
    finally:
        PyBuffer_Release(&view)
    if n < 0:
        raise _oserror(err, "file_append")
    return n


def file_pread(fd, Py_ssize_t size, long long position):
    """Up to size bytes at position (fewer only at end of file)."""
    cdef Py_ssize_t n
    cdef int err = 0
    cdef int cfd = _fd(fd)
    cdef char *out
    cdef int64_t file_size
    if size < 0 or position < 0:
        raise ValueError(f"invalid pread size {size} / position {position}")
    # a fetch may ask for far more than the segment holds: allocate only what exists
    file_size = kr_file_size(cfd)
    if file_size < 0:
        raise _oserror(errno, "file_pread")
    if size > file_size - position:
        size = max(file_size - position, 0)
    result = PyBytes_FromStringAndSize(NULL, size)
    out = PyBytes_AS_STRING(result)
    with nogil:
        n = kr_pread_full(cfd, out, <size_t>size, position)
        if n < 0:
            err = errno
    if n < 0:
        raise _oserror(err, "file_pread")
    if n < size:
        return result[:n]
    return result


def file_truncate(fd, long long size):
    """Truncate (or extend) fd to size bytes."""
    cdef int rc, err = 0
    cdef int cfd = _fd(fd)
    if size < 0:
        raise ValueError(f"negative size {size}")
    with nogil:
        rc = kr_ftruncate(cfd, size)
        if rc < 0:
            err = errno
    if rc < 0:
        raise _oserror(err, "file_truncate")


def file_fdatasync(fd):
    """fdatasync(2): make fd's data durable."""
    cdef int rc, err = 0
    cdef int cfd = _fd(fd)
    with nogil:
        rc = kr_fdatasync(cfd)
        if rc < 0:
            err = errno
    if rc < 0:
        raise _oserror(err, "file_fdatasync")


def file_writeback_start(fd, int64_t offset, int64_t length):
    """Start writing back fd's dirty pages in [offset, offset + length) without waiting
    (sync_file_range SYNC_FILE_RANGE_WRITE): no durability by itself."""
    cdef int rc, err = 0
    cdef int cfd = _fd(fd)
    with nogil:
        rc = kr_writeback_start(cfd, offset, length)
        if rc < 0:
            err = errno
    if rc < 0:
        raise _oserror(err, "file_writeback_start")


def file_syncfs(fd):
    """syncfs(2): make everything written to fd's file system durable."""
    cdef int rc, err = 0
    cdef int cfd = _fd(fd)
    with nogil:
        rc = kr_syncfs(cfd)
        if rc < 0:
            err = errno
    if rc < 0:
        raise _oserror(err, "file_syncfs")


def sendfile(out_fd, in_fd, long long offset, long long count):
    """One sendfile(2) of in_fd[offset:offset+count] to out_fd. Returns bytes sent: 0 when
    a non-blocking out_fd is full (EAGAIN) or at end of file."""
    cdef Py_ssize_t n
    cdef int err = 0
    cdef int ofd = _fd(out_fd), ifd = _fd(in_fd)
    if offset < 0 or count < 0:
        raise ValueError(f"invalid sendfile offset {offset} / count {count}")
    with nogil:
        n = kr_sendfile(ofd, ifd, offset, <size_t>count)
        if n < 0:
            err = errno
    if n < 0:
        raise _oserror(err, "sendfile")
    return n


def sendfile_all(out_fd, in_fd, long long offset, long long count, int timeout_ms=-1):
    """Send exactly count bytes of in_fd from offset. On a non-blocking out_fd it waits for
    room with poll() (TimeoutError after timeout_ms without progress; -1 = forever).
    OSError(ENODATA) if in_fd ends first: the receiver's framing is then broken, so the
    caller must close the connection."""
    cdef Py_ssize_t n
    cdef size_t sent = 0
    cdef int err = 0
    cdef int ofd = _fd(out_fd), ifd = _fd(in_fd)
    if offset < 0 or count < 0:
        raise ValueError(f"invalid sendfile offset {offset} / count {count}")
    with nogil:
        n = kr_sendfile_all(ofd, ifd, offset, <size_t>count, timeout_ms, &sent)
        if n < 0:
            err = errno
    if n < 0:
        raise _oserror(err, f"sendfile_all: sent {sent} of {count} bytes")
    return n


# ---- sparse indexes ----------------------------------------------------------------

cdef inline int64_t _clamp64(object v):
    if v > INT64_MAX:
        return INT64_MAX
    if v < INT64_MIN:
        return INT64_MIN
    return <int64_t>v


cdef int64_t _lookup(object buf, object n_entries, object target, int entry_size,
                     bint by_time) except? -2:
    cdef Py_buffer view
    cdef int64_t n, t = _clamp64(target), slot
    if n_entries < 0:
        raise ValueError(f"negative entry count {n_entries}")
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if n_entries > view.len // entry_size:
            raise ValueError(
                f"{n_entries} index entries of {entry_size} bytes do not fit in "
                f"{view.len} bytes")
        n = <int64_t>n_entries
        if by_time:
            slot = kr_timeindex_lookup(<const uint8_t *>view.buf, n, t)
        else:
            slot = kr_index_lookup(<const uint8_t *>view.buf, n, t)
    finally:
        PyBuffer_Release(&view)
    return slot


def index_lookup(buf, n_entries, target_relative_offset):
    """Slot of the greatest .index entry (relative_offset int32, position int32; big-endian)
    with relative_offset <= target, or -1."""
    return _lookup(buf, n_entries, target_relative_offset, KR_INDEX_ENTRY_SIZE, False)


def timeindex_lookup(buf, n_entries, target_timestamp):
    """Slot of the greatest .timeindex entry (timestamp int64, relative_offset int32;
    big-endian) with timestamp <= target, or -1."""
    return _lookup(buf, n_entries, target_timestamp, KR_TIMEINDEX_ENTRY_SIZE, True)


# ---- checkpoint files --------------------------------------------------------------

cdef bytes _path_bytes(object path):
    cdef bytes p = os.fsencode(path)
    if b"\0" in p:
        raise ValueError("embedded null byte in path")
    return p


def checkpoint_write(path, payload, bint sync=True):
    """Atomically replace path with payload plus a trailer line "xxh64 <16 hex>\\n"
    (tmp file, write, fsync, rename, fsync directory). payload must be empty or end with
    a newline so the trailer stays a line of its own. sync=False writes path in place,
    no fsync: a crash may leave it missing or torn (checkpoint_read then raises
    CheckpointCorruptError), so only for files that recovery can do without."""
    cdef Py_buffer view
    cdef bytes p = _path_bytes(path)
    cdef const char *cpath = p
    cdef const char *step = NULL
    cdef int rc, err = 0
    PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
    try:
        if view.len and (<const char *>view.buf)[view.len - 1] != b"\n":
            raise ValueError("checkpoint payload must end with a newline")
        with nogil:
            rc = kr_checkpoint_write_ex(cpath, view.buf, <size_t>view.len, sync, &step)
            if rc < 0:
                err = errno
    finally:
        PyBuffer_Release(&view)
    if rc < 0:
        raise OSError(err, f"checkpoint_write: {step.decode()}: {os.strerror(err)}",
                      os.fsdecode(p))


def checkpoint_read(path):
    """Payload of a checkpoint file without its trailer line. FileNotFoundError when
    missing; CheckpointCorruptError(path, reason) when torn or the hash differs."""
    cdef bytes p = _path_bytes(path)
    cdef const char *cpath = p
    cdef uint8_t *data = NULL
    cdef size_t length = 0
    cdef int64_t payload_len
    cdef int rc, err = 0
    cdef char reason[KR_REASON_MAX]
    with nogil:
        rc = kr_read_file(cpath, &data, &length)
        if rc < 0:
            err = errno
    if rc < 0:
        raise OSError(err, os.strerror(err), os.fsdecode(p))
    try:
        payload_len = kr_checkpoint_verify(data, length, reason)
        if payload_len < 0:
            raise CheckpointCorruptError(os.fsdecode(p), reason.decode("utf-8", "replace"))
        return PyBytes_FromStringAndSize(<const char *>data, payload_len)
    finally:
        free(data)


# ---- Arrow <-> record batches (csrc/kr_arrow.c): the Spark data source's data plane ----

cdef extern from "kr_arrow.h" nogil:
    ctypedef struct kr_bin_view:
        const uint8_t *validity
        size_t validity_len
        const int32_t *offsets
        size_t offsets_len
        const uint8_t *data
        size_t data_len
        int64_t base
        int64_t length
    ctypedef struct kr_headers_view:
        const uint8_t *validity
        size_t validity_len
        const int32_t *offsets
        size_t offsets_len
        int64_t base
        int64_t length
        kr_bin_view key
        kr_bin_view value
    int kr_bin_view_check(const kr_bin_view *v, char *reason)
    int kr_headers_view_check(const kr_headers_view *h, char *reason)
    enum:
        KR_ENCODE_OK
        KR_ENCODE_NEED_SPACE
        KR_ENCODE_ERROR
        KR_PARTITIONER_MURMUR2
        KR_PARTITIONER_CRC32
        KR_DECODE_OK
        KR_DECODE_CORRUPT
        KR_DECODE_NOMEM
        KR_DECODE_COMPRESSED
    int kr_encode_records(const kr_bin_view *key, const kr_bin_view *value,
                          const kr_headers_view *headers, int64_t row, int64_t row_end,
                          size_t max_bytes, uint8_t *out, size_t cap, size_t *out_len,
                          int64_t *rows_done, size_t *first_size, char *reason)
    int kr_batch_seal(uint8_t *batch, size_t len, int16_t attributes, int32_t records_count,
                      int64_t first_timestamp, int64_t max_timestamp, int64_t producer_id,
                      int16_t producer_epoch, int32_t base_sequence, char *reason)
    int kr_partition_keys(const kr_bin_view *key, int32_t num_partitions, int algorithm,
                          int null_as_empty, int32_t *out, char *reason)
    uint32_t kr_murmur2(const uint8_t *data, size_t len)
    uint32_t kr_crc32_ieee(const uint8_t *data, size_t len)

    ctypedef struct kr_growbuf:
        uint8_t *data
        size_t len
        size_t cap
    ctypedef struct kr_arrow_out:
        int with_headers
        int64_t rows
        kr_growbuf key_valid, key_offsets, key_data
        kr_growbuf value_valid, value_offsets, value_data
        kr_growbuf offsets, timestamps, timestamp_types
        int64_t key_nulls, value_nulls
        kr_growbuf hdr_valid, hdr_offsets
        int64_t hdr_nulls, hdr_count
        kr_growbuf hkey_offsets, hkey_data
        kr_growbuf hval_valid, hval_offsets, hval_data
        int64_t hval_nulls
    int kr_arrow_out_init(kr_arrow_out *o, int with_headers)
    void kr_arrow_out_free(kr_arrow_out *o)
    int kr_arrow_decode_records(kr_arrow_out *o, const uint8_t *recs, size_t len, int32_t count,
                                int64_t base_offset, int64_t base_timestamp, int timestamp_type,
                                int64_t max_timestamp, int64_t start, int64_t end, char *reason)
    int kr_arrow_decode_batches(kr_arrow_out *o, const uint8_t *buf, size_t len, size_t *pos,
                                int64_t start, int64_t end, int64_t *next_offset,
                                kr_batch_info *info, char *reason)

PARTITIONER_MURMUR2 = KR_PARTITIONER_MURMUR2
PARTITIONER_CRC32 = KR_PARTITIONER_CRC32


cdef class _BinColumns:
    """Holds the buffers of Arrow binary columns while C reads them. A column is given as
    (validity, offsets, data, base, length): the array's buffers() (any buffer objects,
    validity/data may be None) plus its offset and length."""
    cdef Py_buffer bufs[16]
    cdef int held

    def __dealloc__(self):
        cdef int i
        for i in range(self.held):
            PyBuffer_Release(&self.bufs[i])
        self.held = 0

    cdef const uint8_t *_hold(self, object obj, size_t *n) except? NULL:
        if obj is None:
            n[0] = 0
            return NULL
        if self.held >= 16:
            raise ValueError("too many buffers")
        PyObject_GetBuffer(obj, &self.bufs[self.held], PyBUF_SIMPLE)
        self.held += 1
        n[0] = <size_t>self.bufs[self.held - 1].len
        return <const uint8_t *>self.bufs[self.held - 1].buf

    cdef int view(self, object col, kr_bin_view *v) except -1:
        cdef char reason[KR_REASON_MAX]
        cdef size_t n = 0
        validity, offsets, data, base, length = col
        if offsets is None:
            raise ValueError("a binary column needs an offsets buffer")
        v.validity = self._hold(validity, &v.validity_len)
        v.offsets = <const int32_t *>self._hold(offsets, &n)
        v.offsets_len = n // 4
        v.data = self._hold(data, &v.data_len)
        v.base = base
        v.length = length
        if kr_bin_view_check(v, reason) != 0:
            raise ValueError(reason.decode("utf-8", "replace"))
        return 0


cdef class RecordEncoder(_BinColumns):
    """Encodes rows of Arrow value/key/headers columns into v2 record batches. headers is
    (validity, offsets, base, length, key column, value column) for
    list<struct<key: string, value: binary>> (the struct's fields, flattened)."""
    cdef kr_bin_view value_v, key_v
    cdef kr_headers_view headers_v
    cdef bint has_key, has_headers
    cdef readonly Py_ssize_t rows

    def __cinit__(self, value, key=None, headers=None):
        cdef char reason[KR_REASON_MAX]
        cdef size_t n = 0
        self.view(value, &self.value_v)
        self.rows = self.value_v.length
        if key is not None:
            self.view(key, &self.key_v)
            self.has_key = True
            if self.key_v.length != self.rows:
                raise ValueError("key and value columns differ in length")
        if headers is not None:
            validity, offsets, base, length, hkey, hvalue = headers
            self.headers_v.validity = self._hold(validity, &self.headers_v.validity_len)
            self.headers_v.offsets = <const int32_t *>self._hold(offsets, &n)
            self.headers_v.offsets_len = n // 4
            self.headers_v.base = base
            self.headers_v.length = length
            self.view(hkey, &self.headers_v.key)
            self.view(hvalue, &self.headers_v.value)
            if kr_headers_view_check(&self.headers_v, reason) != 0:
                raise ValueError(reason.decode("utf-8", "replace"))
            if self.headers_v.length != self.rows:
                raise ValueError("headers and value columns differ in length")
            self.has_headers = True

    def encode(self, Py_ssize_t row, Py_ssize_t row_end, Py_ssize_t max_bytes):
        """(batch, rows): a bytearray of BATCH_HEADER_SIZE unset bytes then the records of
        rows [row, row + rows), at most max_bytes of records unless one record is larger.
        Seal it with seal_batch (after compressing the records, if wanted)."""
        cdef char reason[KR_REASON_MAX]
        cdef size_t out_len = 0, first = 0, cap
        cdef int64_t done = 0
        cdef int rc
        cdef const kr_bin_view *kp = &self.key_v if self.has_key else NULL
        cdef const kr_headers_view *hp = &self.headers_v if self.has_headers else NULL
        cdef uint8_t *out
        if row < 0 or row_end < row or row_end > self.rows or max_bytes < 1:
            raise ValueError(f"bad rows [{row}, {row_end}) of {self.rows} or max_bytes {max_bytes}")
        cap = <size_t>min(max_bytes, self._bound(row, row_end))
        while True:
            buf = bytearray(KR_BATCH_HEADER_SIZE + cap)
            out = <uint8_t *>(<char *>buf) + KR_BATCH_HEADER_SIZE
            with nogil:
                rc = kr_encode_records(kp, &self.value_v, hp, row, row_end, <size_t>max_bytes,
                                       out, cap, &out_len, &done, &first, reason)
            if rc == KR_ENCODE_NEED_SPACE:
                cap = first
                continue
            if rc != KR_ENCODE_OK:
                raise ValueError(reason.decode("utf-8", "replace"))
            break
        del buf[KR_BATCH_HEADER_SIZE + out_len:]
        return buf, done

    cdef Py_ssize_t _bound(self, int64_t row, int64_t row_end):
        # Upper bound of the encoded size: data bytes plus the largest varints.
        cdef int64_t b = (row_end - row) * 40
        b += self.value_v.offsets[self.value_v.base + row_end] - self.value_v.offsets[self.value_v.base + row]
        if self.has_key:
            b += self.key_v.offsets[self.key_v.base + row_end] - self.key_v.offsets[self.key_v.base + row]
        cdef int64_t h0, h1
        if self.has_headers:
            h0 = self.headers_v.offsets[self.headers_v.base + row]
            h1 = self.headers_v.offsets[self.headers_v.base + row_end]
            b += (h1 - h0) * 10
            b += self.headers_v.key.offsets[self.headers_v.key.base + h1] - self.headers_v.key.offsets[self.headers_v.key.base + h0]
            b += self.headers_v.value.offsets[self.headers_v.value.base + h1] - self.headers_v.value.offsets[self.headers_v.value.base + h0]
        return <Py_ssize_t>b


def seal_batch(batch, int16_t attributes, int32_t records_count, int64_t first_timestamp,
               int64_t max_timestamp, int64_t producer_id=-1, int16_t producer_epoch=-1,
               int32_t base_sequence=-1):
    """Writes the v2 header (baseOffset 0, partitionLeaderEpoch -1, lastOffsetDelta
    records_count - 1) and CRC32C of the batch in the writable buffer `batch`, whose
    records (possibly compressed) start at byte BATCH_HEADER_SIZE."""
    cdef Py_buffer view
    cdef char reason[KR_REASON_MAX]
    cdef int rc
    PyObject_GetBuffer(batch, &view, PyBUF_SIMPLE | PyBUF_WRITABLE)
    try:
        rc = kr_batch_seal(<uint8_t *>view.buf, <size_t>view.len, attributes, records_count,
                           first_timestamp, max_timestamp, producer_id, producer_epoch,
                           base_sequence, reason)
    finally:
        PyBuffer_Release(&view)
    if rc != 0:
        raise ValueError(reason.decode("utf-8", "replace"))


def partition_keys(key, int32_t num_partitions, int algorithm, bint null_as_empty, out):
    """out (a writable buffer of int32, one per row) = each key's partition:
    PARTITIONER_MURMUR2 (Java's default) or PARTITIONER_CRC32 (librdkafka's consistent);
    a null key gives -1 unless null_as_empty."""
    cdef _BinColumns cols = _BinColumns()
    cdef kr_bin_view v
    cdef Py_buffer o
    cdef char reason[KR_REASON_MAX]
    cdef int rc
    cols.view(key, &v)
    PyObject_GetBuffer(out, &o, PyBUF_SIMPLE | PyBUF_WRITABLE)
    try:
        if <size_t>o.len < <size_t>v.length * 4 or (<size_t>o.buf & 3) != 0:
            raise ValueError("out must hold one aligned int32 per key")
        with nogil:
            rc = kr_partition_keys(&v, num_partitions, algorithm, null_as_empty, <int32_t *>o.buf, reason)
    finally:
        PyBuffer_Release(&o)
    if rc != 0:
        raise ValueError(reason.decode("utf-8", "replace"))


def murmur2(data):
    """Kafka's Utils.murmur2 of data, as an unsigned 32-bit value."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        return kr_murmur2(<const uint8_t *>view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)


cdef object _take(kr_growbuf *b):
    if b.data == NULL or b.len == 0:
        return b""
    return PyBytes_FromStringAndSize(<char *>b.data, <Py_ssize_t>b.len)


cdef class ArrowRecordsBuilder:
    """Decodes record batches (Fetch response bytes) into the Arrow buffers of the Spark
    source's columns. finish() hands the buffers over as bytes and starts afresh."""
    cdef kr_arrow_out o
    cdef bint with_headers

    def __cinit__(self, bint with_headers=False):
        self.with_headers = with_headers
        if kr_arrow_out_init(&self.o, with_headers) != 0:
            raise MemoryError()

    def __dealloc__(self):
        kr_arrow_out_free(&self.o)

    @property
    def rows(self):
        return self.o.rows

    @property
    def data_bytes(self):
        return self.o.key_data.len + self.o.value_data.len + self.o.hkey_data.len + self.o.hval_data.len

    cdef int _check(self, int rc, const char *reason, Py_ssize_t position) except -1:
        if rc == KR_DECODE_CORRUPT:
            raise CorruptBatchError(position, reason.decode("utf-8", "replace"))
        if rc == KR_DECODE_NOMEM:
            raise MemoryError(reason.decode("utf-8", "replace"))
        return 0

    def decode_batches(self, buf, Py_ssize_t pos, int64_t start, int64_t end, int64_t next_offset):
        """Walks buf[pos:] (see kr_arrow_decode_batches). Returns (pos, next_offset,
        compressed): compressed is None, or the BatchInfo of the compressed batch at pos
        that the caller must inflate (decode_records) before walking on past it.
        CorruptBatchError on an unsound batch."""
        cdef Py_buffer view
        cdef kr_batch_info info
        cdef char reason[KR_REASON_MAX]
        cdef size_t p = <size_t>pos
        cdef int rc
        PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
        try:
            if pos < 0 or pos > view.len:
                raise ValueError(f"position {pos} outside the buffer")
            with nogil:
                rc = kr_arrow_decode_batches(&self.o, <const uint8_t *>view.buf, <size_t>view.len,
                                             &p, start, end, &next_offset, &info, reason)
        finally:
            PyBuffer_Release(&view)
        if rc == KR_DECODE_COMPRESSED:
            return p, next_offset, _batch_info(&info)
        self._check(rc, reason, p)
        return p, next_offset, None

    def decode_records(self, recs, int32_t count, int64_t base_offset, int64_t base_timestamp,
                       int timestamp_type, int64_t max_timestamp, int64_t start, int64_t end):
        """Appends one (decompressed) records section; CorruptBatchError when unsound."""
        cdef Py_buffer view
        cdef char reason[KR_REASON_MAX]
        cdef int rc
        PyObject_GetBuffer(recs, &view, PyBUF_SIMPLE)
        try:
            with nogil:
                rc = kr_arrow_decode_records(&self.o, <const uint8_t *>view.buf, <size_t>view.len, count,
                                             base_offset, base_timestamp, timestamp_type, max_timestamp,
                                             start, end, reason)
        finally:
            PyBuffer_Release(&view)
        self._check(rc, reason, 0)

    def finish(self):
        """dict of the columns' buffers (bytes) and counts; the builder is empty again."""
        cdef kr_arrow_out *o = &self.o
        out = {
            "rows": o.rows,
            "key": (_take(&o.key_valid), _take(&o.key_offsets), _take(&o.key_data), o.key_nulls),
            "value": (_take(&o.value_valid), _take(&o.value_offsets), _take(&o.value_data), o.value_nulls),
            "offset": _take(&o.offsets),
            "timestamp": _take(&o.timestamps),
            "timestampType": _take(&o.timestamp_types),
        }
        if self.with_headers:
            out["headers"] = (_take(&o.hdr_valid), _take(&o.hdr_offsets), o.hdr_nulls, o.hdr_count,
                              _take(&o.hkey_offsets), _take(&o.hkey_data),
                              (_take(&o.hval_valid), _take(&o.hval_offsets), _take(&o.hval_data), o.hval_nulls))
        kr_arrow_out_free(&self.o)
        if kr_arrow_out_init(&self.o, self.with_headers) != 0:
            raise MemoryError()
        return out
