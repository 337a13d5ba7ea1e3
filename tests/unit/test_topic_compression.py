"""A topic's compression.type (KIP-390's levels too): the leader stores batches in the
topic's codec, recompressing those a producer sent in another one, as Kafka's
LogValidator; `producer` keeps them as sent."""

from __future__ import annotations

import pytest

from kafkarepl import _core
from kafkarepl.errors import KafkaError
from kafkarepl.storage import Log, LogConfig
from kafkarepl.storage.codecs import compress
from tests.batches import build_batch, concat, decode

T0 = 1_700_000_000_000
CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def stored(lg: Log) -> bytes:
    s = lg.read(0, 1 << 24)
    return bytes(_core.file_pread(s.fd, s.size, s.position))


@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("source", ["none", "gzip", "lz4", "zstd"])
def test_batches_are_stored_in_the_topics_codec(tmp_path, source, target) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(compression_type=target))
    try:
        values = [b"value-%03d" % i * 20 for i in range(50)]
        keys = [b"k%d" % i for i in range(50)]
        idem = build_batch(values[:20], keys=keys[:20], compression=source, producer_id=7, producer_epoch=2,
                           base_sequence=0, timestamp=[T0 + i for i in range(20)])
        plain = build_batch(values[20:], keys=keys[20:], compression=source, timestamp=T0 + 99)
        info = lg.append_as_leader(concat([idem, plain]), 3, T0)
        assert (info.first_offset, info.last_offset) == (0, 49)
        data = stored(lg)
        batches = _core.validate_batches(data)  # CRCs right
        assert [b.attributes & 7 for b in batches] == [CODECS[target]] * 2
        assert (batches[0].producer_id, batches[0].producer_epoch, batches[0].base_sequence) == (7, 2, 0)
        assert batches[0].max_timestamp == T0 + 19 and batches[1].records_count == 30
        got = decode(data)  # kafka-python decompresses what we wrote
        assert [(o, v) for o, _ts, _k, v in got] == list(enumerate(values))
        assert [ts for _o, ts, _k, _v in got][:3] == [T0, T0 + 1, T0 + 2]
        # the idempotent batch is recognised as a duplicate afterwards, as sent
        again = build_batch(values[:20], keys=keys[:20], compression=source, producer_id=7, producer_epoch=2,
                            base_sequence=0, timestamp=[T0 + i for i in range(20)])
        assert lg.append_as_leader(again, 3, T0).duplicate
    finally:
        lg.close()


def test_producer_keeps_the_batch_as_sent(tmp_path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig())
    try:
        batch = build_batch(10, compression="lz4")
        lg.append_as_leader(bytearray(batch), 0, T0)
        assert stored(lg)[61:] == bytes(batch[61:])
    finally:
        lg.close()


def test_levels_and_values() -> None:
    data = b"abcdefgh" * 10_000
    assert len(compress(4, data, 19)) <= len(compress(4, data, 1))
    assert LogConfig.from_props({"compression.type": "GZIP", "compression.gzip.level": "9"}).target_codec() == (1, 9)
    assert LogConfig.from_props({"compression.type": "uncompressed"}).target_codec() == (0, None)
    for bad in ({"compression.type": "brotli"}, {"compression.gzip.level": "0"}, {"compression.lz4.level": "18"},
                {"compression.zstd.level": "23"}):
        with pytest.raises(KafkaError):
            LogConfig.from_props(bad)
