"""Storage core speed vs the limits it sits on (run: pytest bench --benchmark-enable).

Each pair runs in the same session on the same data so their ratio is meaningful:
  crc32c        _core.crc32c vs the crc32c package, 1 MiB
  append        _core.file_append (and the whole leader append: validate + assign
                offsets + append) vs raw os.write of the same 1 MiB of 100-byte-record
                batches to the same filesystem
  sendfile      _core.sendfile_all vs a bare os.sendfile loop, 256 MiB to a loopback TCP
                socket drained by a thread
"""

from __future__ import annotations

import os
import socket
import threading

import crc32c as crc32c_ref
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkarepl import _core

MIB = 1 << 20
SENDFILE_BYTES = 256 * MIB


@pytest.fixture(scope="module")
def one_mib() -> bytes:
    return os.urandom(MIB)


def batch_of_100_byte_records(n_records: int = 100) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 30)
    for i in range(n_records):
        builder.append(i, 1_700_000_000_000 + i, None, os.urandom(90), [])
    return bytes(builder.build())


@pytest.fixture(scope="module")
def batches_mib() -> bytes:
    batch = batch_of_100_byte_records()
    return batch * (MIB // len(batch))


@pytest.fixture
def segment_fd(tmp_path):
    fd = os.open(tmp_path / "00000000000000000000.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    yield fd
    os.close(fd)


# ---- CRC32C ------------------------------------------------------------------------

@pytest.mark.benchmark(group="crc32c-1MiB")
def test_crc32c_core(benchmark, one_mib):
    assert benchmark(_core.crc32c, one_mib) == crc32c_ref.crc32c(one_mib)


@pytest.mark.benchmark(group="crc32c-1MiB")
def test_crc32c_package(benchmark, one_mib):
    benchmark(crc32c_ref.crc32c, one_mib)


@pytest.mark.benchmark(group="crc32c-1MiB")
def test_crc32c_core_table_fallback(benchmark, one_mib):
    benchmark(_core._crc32c_table, one_mib)


# ---- append ------------------------------------------------------------------------

def run_appends(benchmark, fd: int, append) -> None:
    # truncate between rounds (untimed) so the file stays small and in the page cache
    benchmark.pedantic(append, setup=lambda: os.ftruncate(fd, 0), rounds=300,
                       warmup_rounds=20)


@pytest.mark.benchmark(group="append-1MiB")
def test_append_core_file_append(benchmark, segment_fd, batches_mib):
    run_appends(benchmark, segment_fd, lambda: _core.file_append(segment_fd, batches_mib))
    assert os.fstat(segment_fd).st_size == len(batches_mib)


@pytest.mark.benchmark(group="append-1MiB")
def test_append_core_validate_assign_append(benchmark, segment_fd, batches_mib):
    buf = bytearray(batches_mib)

    def leader_append():
        _core.validate_batches(buf)
        _core.assign_offsets(buf, 0, 1)
        _core.file_append(segment_fd, buf)

    run_appends(benchmark, segment_fd, leader_append)


@pytest.mark.benchmark(group="append-1MiB")
def test_append_raw_os_write(benchmark, segment_fd, batches_mib):
    run_appends(benchmark, segment_fd, lambda: os.write(segment_fd, batches_mib))
    assert os.fstat(segment_fd).st_size == len(batches_mib)


# ---- sendfile ----------------------------------------------------------------------

class Drainer:
    """Reads a TCP socket as fast as possible on a thread; senders wait for their bytes."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.received = 0
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        buf = bytearray(4 * MIB)
        while n := self.sock.recv_into(buf):
            with self.cond:
                self.received += n
                self.cond.notify_all()

    def wait_for(self, total: int) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.received >= total)


@pytest.fixture(scope="module")
def tcp_pair(tmp_path_factory):
    path = tmp_path_factory.mktemp("sendfile") / "00000000000000000000.log"
    with open(path, "wb") as f:
        chunk = os.urandom(16 * MIB)
        for _ in range(SENDFILE_BYTES // len(chunk) + 1):
            f.write(chunk)
    in_fd = os.open(path, os.O_RDONLY)
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    drainer = Drainer(server)
    yield client, in_fd, drainer
    client.close()
    drainer.thread.join()
    server.close()
    listener.close()
    os.close(in_fd)


def run_sendfile(benchmark, tcp_pair, send) -> None:
    client, in_fd, drainer = tcp_pair

    def one_round():
        target = drainer.received + SENDFILE_BYTES
        send(client.fileno(), in_fd)
        drainer.wait_for(target)

    benchmark.pedantic(one_round, rounds=25, warmup_rounds=2)


@pytest.mark.benchmark(group="sendfile-256MiB")
def test_sendfile_core_sendfile_all(benchmark, tcp_pair):
    run_sendfile(benchmark, tcp_pair,
                 lambda out_fd, in_fd: _core.sendfile_all(out_fd, in_fd, 4096, SENDFILE_BYTES))


@pytest.mark.benchmark(group="sendfile-256MiB")
def test_sendfile_bare_os_sendfile_loop(benchmark, tcp_pair):
    def bare(out_fd, in_fd):
        sent = 0
        while sent < SENDFILE_BYTES:
            sent += os.sendfile(out_fd, in_fd, 4096 + sent, SENDFILE_BYTES - sent)

    run_sendfile(benchmark, tcp_pair, bare)
