"""Atomic, self-verifying checkpoint files of the C core."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkarepl import _core
from kafkarepl.errors import CheckpointCorruptError

PAYLOAD = b"0\n3\ntopic-a 0 1234\ntopic-b 7 99\n"


def test_round_trip_and_trailer_format(tmp_path):
    path = tmp_path / "replication-offset-checkpoint"
    _core.checkpoint_write(str(path), PAYLOAD)
    raw = path.read_bytes()
    assert raw == PAYLOAD + b"xxh64 %016x\n" % xxhash.xxh64_intdigest(PAYLOAD)
    assert _core.checkpoint_read(str(path)) == PAYLOAD
    assert _core.checkpoint_read(path) == PAYLOAD  # PathLike works too
    assert os.listdir(tmp_path) == ["replication-offset-checkpoint"]  # no .tmp left


def test_empty_payload(tmp_path):
    path = tmp_path / "empty"
    _core.checkpoint_write(path, b"")
    assert _core.checkpoint_read(path) == b""


def test_overwrite_replaces_content(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    _core.checkpoint_write(path, b"old\n" * 1000)
    _core.checkpoint_write(path, PAYLOAD)
    assert _core.checkpoint_read(path) == PAYLOAD


def test_payload_must_end_with_newline(tmp_path):
    with pytest.raises(ValueError):
        _core.checkpoint_write(tmp_path / "x", b"no newline")
    assert not (tmp_path / "x").exists()


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(FileNotFoundError):
        _core.checkpoint_read(tmp_path / "nope")
    with pytest.raises(FileNotFoundError):
        _core.checkpoint_write(tmp_path / "no-dir" / "file", PAYLOAD)


def test_every_flipped_byte_is_detected(tmp_path):
    path = tmp_path / "cp"
    _core.checkpoint_write(path, PAYLOAD)
    good = path.read_bytes()
    for i in range(len(good)):
        bad = bytearray(good)
        bad[i] ^= 0x01
        path.write_bytes(bad)
        with pytest.raises(CheckpointCorruptError) as exc:
            _core.checkpoint_read(path)
        assert exc.value.path == str(path) and exc.value.reason, i


def test_every_truncation_is_detected(tmp_path):
    path = tmp_path / "cp"
    _core.checkpoint_write(path, PAYLOAD)
    good = path.read_bytes()
    for cut in range(len(good)):
        path.write_bytes(good[:cut])
        with pytest.raises(CheckpointCorruptError):
            _core.checkpoint_read(path)


def test_dropped_trailer_and_wrong_hash(tmp_path):
    path = tmp_path / "cp"
    path.write_bytes(PAYLOAD)
    with pytest.raises(CheckpointCorruptError, match="missing xxh64 trailer line"):
        _core.checkpoint_read(path)
    path.write_bytes(PAYLOAD + b"xxh64 %016x\n" % (xxhash.xxh64_intdigest(PAYLOAD) ^ 1))
    with pytest.raises(CheckpointCorruptError, match="xxh64 mismatch"):
        _core.checkpoint_read(path)
    path.write_bytes(b"x" * 10)
    with pytest.raises(CheckpointCorruptError, match="too short"):
        _core.checkpoint_read(path)


def _write_forever(path: str) -> None:
    i = 0
    while True:
        _core.checkpoint_write(path, b"generation %d\n" % i + b"filler line\n" * (i % 500))
        i += 1


def test_killed_writer_never_leaves_a_torn_file(tmp_path):
    """SIGKILL mid-write: readers always see a complete old or new version (rename)."""
    path = str(tmp_path / "cp")
    _core.checkpoint_write(path, b"generation -1\n")
    ctx = multiprocessing.get_context("fork")
    for delay in (0.05, 0.11, 0.17):
        writer = ctx.Process(target=_write_forever, args=(path,))
        writer.start()
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline:  # concurrent readers never see a torn file
            assert _core.checkpoint_read(path).startswith(b"generation ")
        os.kill(writer.pid, signal.SIGKILL)
        writer.join()
        assert _core.checkpoint_read(path).startswith(b"generation ")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_fuzz_random_file_contents(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fuzz") / "cp"
    path.write_bytes(data)
    try:
        payload = _core.checkpoint_read(path)
    except CheckpointCorruptError:
        return
    assert data == payload + b"xxh64 %016x\n" % xxhash.xxh64_intdigest(payload)
