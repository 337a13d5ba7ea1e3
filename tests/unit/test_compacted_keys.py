"""KIP-467: a compacted topic refuses records without a key, naming them."""

from __future__ import annotations

import pytest

from kafkarepl.errors import RecordValidationError
from kafkarepl.storage import Log, LogConfig
from tests.batches import build_batch, concat

T0 = 1_700_000_000_000


@pytest.mark.parametrize("codec", ["none", "gzip", "lz4", "zstd"])
def test_keyless_records_are_refused_on_compacted_topics_only(tmp_path, codec) -> None:
    compacted = Log.open(tmp_path / "c-0", LogConfig(cleanup_policy="compact,delete"))
    plain = Log.open(tmp_path / "p-0", LogConfig())
    try:
        ok = build_batch([b"x" * 50] * 30, keys=[b"k%d" % i for i in range(30)], compression=codec)
        bad = build_batch([b"x" * 50] * 30, keys=[b"k"] * 7 + [None] * 23, compression=codec)
        with pytest.raises(RecordValidationError) as e:
            compacted.append_as_leader(concat([bytearray(ok), bytearray(bad)]), 0, T0)
        assert e.value.record_errors == [(7, "Compacted topic cannot accept message without key in "
                                              "topic partition c-0.")]
        assert compacted.log_end_offset == 0  # nothing of the request is written
        assert compacted.append_as_leader(ok, 0, T0).first_offset == 0
        assert plain.append_as_leader(bad, 0, T0).first_offset == 0
    finally:
        compacted.close()
        plain.close()
