"""What the request and topic metrics cost (run: pytest bench/test_bench_request_metrics.py --benchmark-enable).

  record_produce     RequestMetrics.record of a Produce answer of 1 partition (name, version,
                     two times, the error walk): what every produce request pays
  record_fetch_1000  the same for a FetchFollower answer of 1,000 partitions (the error walk
                     is per partition, as Kafka's errorCounts)
  topic_stats_*      BrokerTopicStats per partition: an append, a fetched partition
  produce_decode / fetch_encode  the same run's baselines: decoding a Produce v9 request
                     of 16 KiB; encoding that 1,000-partition Fetch answer
Each call does ROUNDS of them; compare medians per call.
"""

from __future__ import annotations

from bench.baselines import produce_decode
from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey, encode_response
from kafkarepl.replication import BrokerTopicStats
from kafkarepl.server.request_metrics import RequestMetrics

ROUNDS = 2000

PRODUCE_ANSWER = {"responses": [{"name": "bench", "partition_responses": [
    {"index": 0, "error_code": 0, "base_offset": 0, "log_append_time_ms": -1, "log_start_offset": 0,
     "record_errors": [], "error_message": None}]}], "throttle_time_ms": 0}
FETCH_ANSWER = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
    {"topic": f"t{t}", "partitions": [
        {"partition_index": p, "error_code": 0, "high_watermark": 10, "last_stable_offset": 10,
         "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1, "records": b""}
        for p in range(10)]} for t in range(100)]}


def test_record_produce(benchmark) -> None:
    m = RequestMetrics()

    def many() -> None:
        for _ in range(ROUNDS):
            m.record("Produce", ApiKey.PRODUCE, 9, 1.5, 0.02, PRODUCE_ANSWER)

    benchmark(many)


def test_record_fetch_1000(benchmark) -> None:
    m = RequestMetrics()

    def many() -> None:
        for _ in range(ROUNDS // 100):
            m.record("FetchFollower", ApiKey.FETCH, 12, 500.0, 0.02, FETCH_ANSWER)

    benchmark(many)


def test_fetch_encode_1000(benchmark) -> None:
    def many() -> None:
        for _ in range(ROUNDS // 100):
            encode_response(ApiKey.FETCH, 12, 1, FETCH_ANSWER)

    benchmark(many)


def test_topic_stats_append(benchmark) -> None:
    st = BrokerTopicStats()

    def many() -> None:
        for _ in range(ROUNDS):
            st.produce_appended("bench", 16384, 100)

    benchmark(many)


def test_topic_stats_fetched(benchmark) -> None:
    st = BrokerTopicStats()

    def many() -> None:
        for _ in range(ROUNDS):
            st.fetched("bench", ErrorCode.NONE, 16384, False)

    benchmark(many)


def test_produce_decode(benchmark) -> None:
    benchmark(produce_decode(ROUNDS))
