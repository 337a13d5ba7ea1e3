"""RequestMetrics, BrokerTopicStats and the error counts of a response: pure logic."""

from __future__ import annotations

from kafkarepl.errors import ErrorCode, NotEnoughReplicasError
from kafkarepl.protocol.error_counts import error_counts
from kafkarepl.protocol.schema import ApiKey
from kafkarepl.replication import BrokerTopicStats
from kafkarepl.server.request_metrics import (
    QUANTILES,
    RequestMetrics,
    TimeHistogram,
    bucket_of,
    bucket_upper_ms,
)


def produce_answer(*codes: int) -> dict:
    return {"responses": [{"name": "t", "partition_responses": [
        {"index": i, "error_code": c, "base_offset": 0, "log_append_time_ms": -1, "log_start_offset": 0,
         "record_errors": [], "error_message": None} for i, c in enumerate(codes)]}], "throttle_time_ms": 0}


def test_error_counts_every_error_code_of_the_declaration_none_included() -> None:
    nle = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert error_counts(ApiKey.PRODUCE, 9, produce_answer(0, 0, nle)) == {0: 2, nle: 1}
    fetch = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "a", "partitions": [{"partition_index": 0, "error_code": 0}, {"partition_index": 1, "error_code": 1}]},
        {"topic": "b", "partitions": [{"partition_index": 0, "error_code": 0}]}]}
    assert error_counts(ApiKey.FETCH, 12, fetch) == {0: 3, 1: 1}  # the top-level one too
    assert error_counts(ApiKey.FETCH, 6, fetch) == {0: 2, 1: 1}  # no top-level error_code before v7
    assert error_counts(ApiKey.METADATA, 9, {"brokers": [], "topics": []}) == {}


def test_histogram_quantiles_follow_recent_windows() -> None:
    now = [0.0]
    h = TimeHistogram(lambda: now[0], 60)
    for _ in range(980):
        h.record(1.0, now[0])
    for _ in range(20):
        h.record(100.0, now[0])
    q = dict(zip(QUANTILES, h.quantiles(), strict=True))
    assert 1.0 <= q[0.5] < 1.2 and 1.0 <= q[0.95] < 1.2  # each within a bucket (19%) above
    assert 100.0 <= q[0.99] < 120.0 and 100.0 <= q[0.999] < 120.0
    assert h.count == 1000 and h.sum_ms == 980 + 2000
    now[0] = 61  # one window later the old samples still count
    assert h.quantiles()[QUANTILES.index(0.99)] >= 100.0
    now[0] = 122  # two: gone from the quantiles, kept in the totals
    assert h.quantiles() == [0.0] * len(QUANTILES) and h.count == 1000
    h.record(5.0, now[0])
    assert all(5.0 <= v < 6.0 for v in h.quantiles())


def test_buckets_cover_the_range() -> None:
    assert bucket_of(0) == 0 and bucket_of(0.01) == 0
    for ms in (0.02, 0.5, 1.0, 7.3, 250.0, 30_000.0):
        i = bucket_of(ms)
        assert bucket_upper_ms(i - 1) <= ms < bucket_upper_ms(i) * 1.0001
    assert bucket_of(1e9) == bucket_of(1e12)  # the last bucket holds the rest


def test_request_metrics_names_versions_errors_and_times() -> None:
    m = RequestMetrics(now=lambda: 0.0)
    assert m.name_of(ApiKey.FETCH, {"replica_id": 2}) == "FetchFollower"
    assert m.name_of(ApiKey.FETCH, {"replica_id": -1}) == "FetchConsumer"
    assert m.name_of(ApiKey.PRODUCE, {}) == "Produce"
    m.record("Produce", ApiKey.PRODUCE, 9, 2.0, 0.1, produce_answer(0, int(ErrorCode.NOT_ENOUGH_REPLICAS)))
    m.record("Produce", ApiKey.PRODUCE, 8, 4.0, 0.1, None)  # acks=0: no answer, counted
    m.record("Produce", ApiKey.PRODUCE, 9, 3.0, 0.1, NotEnoughReplicasError("x"))
    m.record("Produce", ApiKey.PRODUCE, 9, 3.0, 0.1, RuntimeError("bug"))
    s = m.snapshot()
    p = "kafka_network_requestmetrics_"
    assert s[f'{p}requests_total{{request="Produce",version="9"}}'] == 3
    assert s[f'{p}requests_total{{request="Produce",version="8"}}'] == 1
    assert s[f'{p}errors_total{{request="Produce",error="NONE"}}'] == 1
    assert s[f'{p}errors_total{{request="Produce",error="NOT_ENOUGH_REPLICAS"}}'] == 2
    assert s[f'{p}errors_total{{request="Produce",error="UNKNOWN_SERVER_ERROR"}}'] == 1
    assert s[f'{p}totaltimems_count{{request="Produce"}}'] == 4
    assert s[f'{p}totaltimems_sum{{request="Produce"}}'] == 12.0
    assert 4.0 <= s[f'{p}totaltimems{{request="Produce",quantile="0.99"}}'] < 4.8
    assert s[f'{p}responsesendtimems_count{{request="Produce"}}'] == 4


def test_broker_topic_stats_count_as_kafka() -> None:
    st = BrokerTopicStats()
    st.produce_appended("a", 1000, 10)
    st.produce_failed("a", ErrorCode.NOT_LEADER_OR_FOLLOWER, 500)  # routine: not a failure
    st.produce_failed("a", ErrorCode.NOT_ENOUGH_REPLICAS, 500)
    st.produce_failed("b", ErrorCode.MESSAGE_TOO_LARGE, 2_000_000)  # rejected bytes, not a failure
    st.fetched("a", ErrorCode.NONE, 700, follower=False)
    st.fetched("a", ErrorCode.NONE, 300, follower=True)
    st.fetched("a", ErrorCode.NOT_LEADER_OR_FOLLOWER, 0, follower=False)
    st.fetched("b", ErrorCode.UNKNOWN_SERVER_ERROR, 0, follower=False)
    st.replicated_in(123)
    s = st.snapshot()
    p = "kafka_server_brokertopicmetrics_"
    assert s[f'{p}messagesin_total{{topic="a"}}'] == 10 and s[f"{p}messagesin_total"] == 10
    assert s[f'{p}bytesin_total{{topic="a"}}'] == 1000
    assert s[f'{p}totalproducerequests_total{{topic="a"}}'] == 3 and s[f"{p}totalproducerequests_total"] == 4
    assert s[f'{p}failedproducerequests_total{{topic="a"}}'] == 1 and s[f"{p}failedproducerequests_total"] == 1
    assert s[f'{p}bytesrejected_total{{topic="b"}}'] == 2_000_000
    assert s[f'{p}bytesout_total{{topic="a"}}'] == 700  # consumers' bytes only
    assert s[f"{p}replicationbytesout_total"] == 300 and s[f"{p}replicationbytesin_total"] == 123
    assert s[f'{p}totalfetchrequests_total{{topic="a"}}'] == 3
    assert s[f'{p}failedfetchrequests_total{{topic="a"}}'] == 0 and s[f"{p}failedfetchrequests_total"] == 1
    st.retain({"a"})
    s = st.snapshot()
    assert f'{p}bytesin_total{{topic="b"}}' not in s and s[f"{p}totalproducerequests_total"] == 4


def test_a_fetch_of_topics_the_cluster_lacks_counts_nothing() -> None:
    """Kafka answers a partition missing from its metadata cache UNKNOWN_TOPIC_OR_PARTITION
    before counting: names a client makes up must not each keep a counter set (nothing
    removed them before the next scrape of the metrics endpoint)."""
    import asyncio

    from kafkarepl.protocol import Request
    from kafkarepl.protocol.schema import ApiKey
    from kafkarepl.server.metadata_cache import MetadataCache
    from kafkarepl.server.replica_apis import ReplicaApis
    from tests.unit.test_replica_manager import lead, manager

    rm, storage, _o, _c = manager()
    lead(rm, isr=(1,))
    st = BrokerTopicStats()
    apis = ReplicaApis(rm, MetadataCache(), None, topic_stats=st)  # type: ignore[arg-type]
    made_up = [f"no-such-topic-{i}" for i in range(100)]
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": t, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1024,
                                                    "current_leader_epoch": -1, "last_fetched_epoch": -1,
                                                    "log_start_offset": -1}]} for t in [*made_up, "t"]]}
    req = Request(ApiKey.FETCH, 12, 1, "c", body, 0)
    out = asyncio.run(apis.fetch(req))
    assert len(out["responses"]) == 101
    assert st._topics.keys() == {"t"}  # the hosted one only
    assert st.snapshot()["kafka_server_brokertopicmetrics_totalfetchrequests_total"] == 1
