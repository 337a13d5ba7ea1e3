"""Segment file I/O and sendfile wrappers of the C core, on real files and sockets."""

from __future__ import annotations

import errno
import os
import signal
import socket
import threading
import time

import pytest

from kafkarepl import _core


@pytest.fixture
def segment(tmp_path):
    fd = os.open(tmp_path / "00000000000000000000.log", os.O_RDWR | os.O_CREAT | os.O_APPEND)
    yield fd
    os.close(fd)


def test_file_append_writes_everything_in_order(segment):
    chunks = [os.urandom(n) for n in (0, 1, 100, 1 << 20, 4097)]
    for chunk in chunks:
        assert _core.file_append(segment, memoryview(chunk)) == len(chunk)
    expected = b"".join(chunks)
    assert os.fstat(segment).st_size == len(expected)
    assert os.pread(segment, len(expected) + 10, 0) == expected


def test_file_pread_full_short_and_past_end(segment):
    data = os.urandom(10_000)
    _core.file_append(segment, data)
    assert _core.file_pread(segment, 10_000, 0) == data
    assert _core.file_pread(segment, 500, 1234) == data[1234:1734]
    assert _core.file_pread(segment, 500, 9_900) == data[9_900:]  # short at end of file
    assert _core.file_pread(segment, 10, 20_000) == b""
    assert _core.file_pread(segment, 0, 0) == b""
    # a fetch's max_bytes may dwarf the segment: only what exists is allocated
    assert _core.file_pread(segment, 1 << 40, 9_000) == data[9_000:]
    with pytest.raises(ValueError):
        _core.file_pread(segment, -1, 0)
    with pytest.raises(ValueError):
        _core.file_pread(segment, 1, -1)


def test_file_truncate_and_fdatasync(segment):
    _core.file_append(segment, b"x" * 1000)
    _core.file_truncate(segment, 100)
    assert os.fstat(segment).st_size == 100
    _core.file_fdatasync(segment)
    _core.file_append(segment, b"y")  # O_APPEND: continues at the new end
    assert _core.file_pread(segment, 200, 0) == b"x" * 100 + b"y"
    with pytest.raises(ValueError):
        _core.file_truncate(segment, -5)


def test_errors_carry_errno(tmp_path):
    fd = os.open(tmp_path / "f", os.O_RDONLY | os.O_CREAT)
    os.close(fd)
    with pytest.raises(OSError) as exc:
        _core.file_append(fd, b"abc")
    assert exc.value.errno == errno.EBADF
    for call in (lambda: _core.file_pread(fd, 1, 0), lambda: _core.file_fdatasync(fd),
                 lambda: _core.file_truncate(fd, 0)):
        with pytest.raises(OSError) as exc:
            call()
        assert exc.value.errno == errno.EBADF
    with pytest.raises(ValueError):
        _core.file_append(-1, b"")


def test_file_append_to_read_only_fd_fails(tmp_path):
    path = tmp_path / "ro"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(OSError) as exc:
            _core.file_append(fd, b"abc")
        assert exc.value.errno == errno.EBADF
    finally:
        os.close(fd)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    parts, got = [], 0
    while got < n:
        chunk = sock.recv(min(1 << 20, n - got))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def test_sendfile_over_socketpair(segment):
    data = os.urandom(50_000)
    _core.file_append(segment, data)
    a, b = socket.socketpair()
    with a, b:
        sent = _core.sendfile(a.fileno(), segment, 1000, 20_000)
        assert 0 < sent <= 20_000
        assert _recv_exactly(b, sent) == data[1000 : 1000 + sent]
        assert _core.sendfile(a.fileno(), segment, len(data), 100) == 0  # at end of file


def test_sendfile_nonblocking_full_socket_returns_zero(segment):
    _core.file_append(segment, os.urandom(1 << 20))
    a, b = socket.socketpair()
    with a, b:
        a.setblocking(False)
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        total = 0
        for _ in range(10_000):
            n = _core.sendfile(a.fileno(), segment, total, (1 << 20) - total)
            if n == 0:
                break
            total += n
        assert n == 0 and 0 < total < 1 << 20  # the peer never read: EAGAIN -> 0
        assert _recv_exactly(b, 100) == _core.file_pread(segment, 100, 0)


@pytest.mark.parametrize("blocking", [True, False])
def test_sendfile_all_sends_the_whole_range(segment, blocking):
    data = os.urandom(4 << 20)
    _core.file_append(segment, data)
    a, b = socket.socketpair()
    received: list[bytes] = []
    with a, b:
        a.setblocking(blocking)
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
        reader = threading.Thread(target=lambda: received.append(_recv_exactly(b, 3 << 20)))
        reader.start()
        assert _core.sendfile_all(a.fileno(), segment, 1 << 20, 3 << 20) == 3 << 20
        reader.join()
    assert received[0] == data[1 << 20 :]


def test_sendfile_all_past_end_of_file_raises(segment):
    _core.file_append(segment, b"z" * 1000)
    a, b = socket.socketpair()
    with a, b:
        with pytest.raises(OSError) as exc:
            _core.sendfile_all(a.fileno(), segment, 500, 1000)
        assert exc.value.errno == errno.ENODATA
        assert "sent 500 of 1000" in str(exc.value)


def test_sendfile_all_times_out_when_peer_stops_reading(segment):
    _core.file_append(segment, os.urandom(4 << 20))
    a, b = socket.socketpair()
    with a, b:
        a.setblocking(False)
        with pytest.raises(TimeoutError):
            _core.sendfile_all(a.fileno(), segment, 0, 4 << 20, timeout_ms=50)


def test_sendfile_argument_checks(segment):
    with pytest.raises(ValueError):
        _core.sendfile(1, segment, -1, 10)
    with pytest.raises(ValueError):
        _core.sendfile_all(1, segment, 0, -10)


def test_sendfile_all_retries_when_signals_interrupt_it(segment):
    """A timer signal every 5 ms interrupts poll()/sendfile(); EINTR is retried in C."""
    data = os.urandom(8 << 20)
    _core.file_append(segment, data)
    a, b = socket.socketpair()
    received: list[bytes] = []
    hits = []
    previous = signal.signal(signal.SIGALRM, lambda *_: hits.append(1))
    try:
        with a, b:
            a.setblocking(False)
            a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)
            reader = threading.Thread(target=lambda: received.append(_recv_slowly(b, 8 << 20)))
            signal.setitimer(signal.ITIMER_REAL, 0.005, 0.005)
            reader.start()
            assert _core.sendfile_all(a.fileno(), segment, 0, 8 << 20) == 8 << 20
            signal.setitimer(signal.ITIMER_REAL, 0)
            reader.join()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert received[0] == data
    assert hits  # the handler did run, so signals really arrived during the transfer


def _recv_slowly(sock: socket.socket, n: int) -> bytes:
    parts, got = [], 0
    while got < n:
        chunk = sock.recv(min(65536, n - got))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
        time.sleep(0.0005)
    return b"".join(parts)
