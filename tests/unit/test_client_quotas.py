"""Client quotas, sans-I/O: entity paths, resolution order, Kafka's padded rate and
throttle time, describe filters."""

from __future__ import annotations

import pytest

from kafkarepl.server.client_quotas import (
    CLIENT_ID,
    FETCH,
    PRODUCE,
    USER,
    ClientQuotas,
    QuotaError,
    QuotaRate,
    check_op,
    entity_from_path,
    entity_of,
    entity_path,
    quota_values,
    sanitize,
)
from kafkarepl.server.quota_gate import fetch_response_bytes, quota_user


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def test_entity_paths_are_kafkas_and_round_trip() -> None:
    cases = {
        "users/alice": entity_of([(USER, "alice")]),
        "users/alice/clients/app": entity_of([(CLIENT_ID, "app"), (USER, "alice")]),
        "users/<default>": entity_of([(USER, None)]),
        "users/<default>/clients/<default>": entity_of([(USER, None), (CLIENT_ID, None)]),
        "clients/app": entity_of([(CLIENT_ID, "app")]),
        "clients/<default>": entity_of([(CLIENT_ID, None)]),
        "ips/10.0.0.1": entity_of([("ip", "10.0.0.1")]),
        "ips/<default>": entity_of([("ip", None)]),
        # Kafka's Sanitizer: URL-encoded, '*' and ' ' as %2A / %20
        "users/CN%3Dbob%2COU%3Dx%2A%20y": entity_of([(USER, "CN=bob,OU=x* y")]),
    }
    for path, entity in cases.items():
        assert entity_path(entity) == path
        assert entity_from_path(path) == entity
    assert sanitize("<default>") == "%3Cdefault%3E"  # a user named so is not the default
    assert entity_from_path("users/%3Cdefault%3E") == ((USER, "<default>"),)
    assert entity_from_path("topics/t") is None and entity_from_path("users/a/x/b") is None


@pytest.mark.parametrize("components", [
    [], [("ip", "1.2.3.400")], [("ip", "host.example")], [("ip", "1.2.3.4"), (USER, "a")], [("group", "g")],
    [(USER, "a"), (USER, "b")], [(USER, "")], [(USER, "x" * 1025)], [(USER, "..")], [(CLIENT_ID, ".")]])
def test_bad_entities_are_refused(components: list[tuple[str, str | None]]) -> None:
    with pytest.raises(QuotaError):
        entity_of(components)


def test_op_values_follow_the_key_types() -> None:
    user, ip = entity_of([(USER, "a")]), entity_of([("ip", "10.0.0.1")])
    assert check_op(user, "producer_byte_rate", 1024.0) == "1024"
    assert check_op(user, "request_percentage", 12.5) == "12.5"
    assert check_op(ip, "connection_creation_rate", 10.0) == "10"
    for entity, key, value in [(user, "producer_byte_rate", 10.5), (user, "producer_byte_rate", 0.0),
                               (user, "consumer_byte_rate", -5.0), (user, "consumer_byte_rate", float("nan")),
                               (user, "consumer_byte_rate", float("inf")), (user, "consumer_byte_rate", 1e40),
                               (user, "retention.ms", 5.0), (user, "connection_creation_rate", 5.0),
                               (ip, "producer_byte_rate", 5.0), (ip, "connection_creation_rate", 2.0**31)]:
        with pytest.raises(QuotaError):
            check_op(entity, key, value)
    # SCRAM credentials share a user's znode; values that do not parse are left out
    assert quota_values({"SCRAM-SHA-256": "salt=..", "producer_byte_rate": "100",
                         "consumer_byte_rate": "x"}) == {"producer_byte_rate": 100.0}


def test_resolution_order_and_rate_keys() -> None:
    q = ClientQuotas(Clock())
    assert q.quota(PRODUCE, "alice", "app") is None
    levels = [
        ([(CLIENT_ID, None)], ("", "app")),
        ([(CLIENT_ID, "app")], ("", "app")),
        ([(USER, None)], ("alice", "")),
        ([(USER, None), (CLIENT_ID, None)], ("alice", "app")),
        ([(USER, None), (CLIENT_ID, "app")], ("alice", "app")),
        ([(USER, "alice")], ("alice", "")),
        ([(USER, "alice"), (CLIENT_ID, None)], ("alice", "app")),
        ([(USER, "alice"), (CLIENT_ID, "app")], ("alice", "app")),
    ]
    # each more specific level, once set, wins over every level set before it
    for limit, (components, key) in enumerate(levels, start=1):
        q.set_config(entity_of(components), {"producer_byte_rate": float(limit)})
        assert q.quota(PRODUCE, "alice", "app") == (float(limit), key)
        assert q.quota(FETCH, "alice", "app") is None  # another key
    assert q.quota(PRODUCE, "bob", "other") == (4.0, ("bob", "other"))  # <default> user + client id
    q.set_config(entity_of([(USER, None), (CLIENT_ID, None)]), {})
    assert q.quota(PRODUCE, "bob", "other") == (3.0, ("bob", ""))  # <default> user
    q.set_config(entity_of([(USER, None)]), {})
    assert q.quota(PRODUCE, "bob", "other") == (1.0, ("", "other"))  # <default> client id


def test_rate_is_padded_to_the_full_window() -> None:
    rate = QuotaRate(samples=11, window_ms=1000)
    rate.record(10_000, 5_000)
    assert rate.window_size_ms(5_000) == 10_000  # a fresh sensor: 10 windows of padding
    assert rate.rate(5_000) == pytest.approx(1_000.0)
    rate.record(10_000, 25_500)  # the first window has aged out
    assert rate.rate(25_500) == pytest.approx(10_000 / 10.5)


def test_throttle_time_brings_the_average_back_to_the_quota() -> None:
    clock = Clock()
    q = ClientQuotas(clock)
    q.set_config(entity_of([(CLIENT_ID, "app")]), {"producer_byte_rate": 1000.0})
    assert q.record(PRODUCE, "ANONYMOUS", "app", 10_000) == 0  # exactly the padded window's allowance
    throttle = q.record(PRODUCE, "ANONYMOUS", "app", 5_000)
    assert throttle == 5_000  # (1500 - 1000) / 1000 * 10 s
    assert q.record(PRODUCE, "ANONYMOUS", "other", 50_000) == 0  # no quota for other client ids
    # Kafka's formula: the padded window does not shrink, so the rate only falls as
    # windows age out; once the burst's window has, the client is within its quota
    clock.ms += throttle
    assert 0 < q.record(PRODUCE, "ANONYMOUS", "app", 0) <= throttle
    clock.ms += 6_000
    assert q.record(PRODUCE, "ANONYMOUS", "app", 0) == 0
    assert q.throttled["Produce"] == 2 and q.throttle_ms_total["Produce"] > 5_000
    m = q.metrics()
    assert m["kafka_server_produce_throttled_requests_total"] == 2
    assert m["kafka_server_fetch_throttle_time_ms_total"] == 0


def test_unrecord_and_the_largest_fetch() -> None:
    q = ClientQuotas(Clock())
    q.set_config(entity_of([(USER, "alice")]), {"consumer_byte_rate": 2048.0})
    assert q.max_bytes_in_window(FETCH, "alice", "any") == 2048 * 10
    assert q.max_bytes_in_window(FETCH, "bob", "any") is None
    assert q.record(FETCH, "alice", "c1", 30_000) > 0
    q.unrecord(FETCH, "alice", "c1", 30_000)
    # all client ids of a user-level quota share it
    assert q.record(FETCH, "alice", "c2", 20_000) == 0
    assert q.record(FETCH, "alice", "c3", 1_000) > 0


def test_idle_rates_are_dropped() -> None:
    """A rate whose windows have all aged out is 0: it is dropped, so made-up client ids
    under a default quota cost memory only while they are active."""
    clock = Clock()
    q = ClientQuotas(clock)
    q.set_config(entity_of([(CLIENT_ID, None)]), {"producer_byte_rate": 1e9})
    for i in range(1000):
        q.record(PRODUCE, "u", f"client-{i}", 1)
        clock.ms += 10
    assert len(q._rates) == 1000  # all within the last 11 windows
    q.record(PRODUCE, "u", "client-0", 1)  # used again: now the most recent
    clock.ms += 11_000 - 5_000
    q.record(PRODUCE, "u", "late", 1)
    # dropped: those last recorded more than 11 s ago; kept: the rest, client-0 and late
    assert len(q._rates) == 1000 - 500 + 2 and ("Produce", "", "client-0") in q._rates
    assert ("Produce", "", "client-499") not in q._rates and ("Produce", "", "client-500") in q._rates


def test_describe_filters() -> None:
    q = ClientQuotas(Clock())
    alice = entity_of([(USER, "alice")])
    alice_app = entity_of([(USER, "alice"), (CLIENT_ID, "app")])
    default_user = entity_of([(USER, None)])
    app = entity_of([(CLIENT_ID, "app")])
    for e in (alice, alice_app, default_user, app):
        q.set_config(e, {"producer_byte_rate": 1.0})

    def found(components: list[tuple[str, int, str | None]], strict: bool = False) -> set:
        return {e for e, _ in q.describe(components, strict)}

    assert found([(USER, 0, "alice")]) == {alice, alice_app}
    assert found([(USER, 0, "alice")], strict=True) == {alice}
    assert found([(USER, 1, None)]) == {default_user}
    assert found([(USER, 2, None)]) == {alice, alice_app, default_user}
    assert found([(CLIENT_ID, 2, None)], strict=True) == {app}
    assert found([]) == {alice, alice_app, default_user, app}
    for bad in ([(USER, 3, None)], [(USER, 0, None)], [("group", 2, None)], [(USER, 2, None), (USER, 1, None)]):
        with pytest.raises(QuotaError):
            q.describe(bad, False)


def test_gate_helpers() -> None:
    assert quota_user("User:alice") == "alice" and quota_user("User:CN=a,O=b") == "CN=a,O=b"
    body = {"responses": [{"topic": "t", "partitions": [{"records": b"x" * 100}, {"records": b""}]}]}
    assert fetch_response_bytes(body) == 100 + 2 * 48


class _Conn:
    """What the gate uses of a connection (server/network.py Connection)."""

    def __init__(self) -> None:
        self.principal = "User:ANONYMOUS"
        self.quota_tail = None
        self.muted_until = 0.0

    def throttle(self, ms: int) -> None:
        import asyncio

        self.muted_until = max(self.muted_until, asyncio.get_running_loop().time() + ms / 1000)

    def muted_for(self) -> float:
        import asyncio

        return max(0.0, self.muted_until - asyncio.get_running_loop().time())


def test_gate_throttles_pipelined_produce_in_order_and_holds_old_answers() -> None:
    import asyncio

    from kafkarepl.protocol import ApiKey, Request
    from kafkarepl.server.quota_gate import ClientQuotaGate

    clock = Clock()
    q = ClientQuotas(clock, samples=2)
    q.set_config(entity_of([(CLIENT_ID, "app")]), {"producer_byte_rate": 1000.0})
    gate = ClientQuotaGate(q)
    started: list[int] = []

    async def serve(req: Request) -> dict:
        started.append(req.correlation_id)
        return {"responses": [], "throttle_time_ms": 0}

    async def run() -> tuple[list, list[float]]:
        conn, loop = _Conn(), asyncio.get_running_loop()
        t0 = loop.time()
        done_at: list[float] = []

        async def one(cid: int, version: int, size: int) -> dict:
            r = await gate.produce(Request(ApiKey.PRODUCE, version, cid, "app", {}, 0, size), conn, serve)
            done_at.append(loop.time() - t0)
            return r

        # 1000 B fit the padded window (1 s); the second goes over by 10 ms worth; the
        # third, read before that throttle began, waits it out before it starts
        results = await asyncio.gather(one(1, 9, 1000), one(2, 9, 10), one(3, 9, 0), one(4, 5, 10))
        return results, done_at

    results, done_at = asyncio.run(run())
    assert started == [1, 2, 3, 4]
    assert [r["throttle_time_ms"] for r in results][:2] == [0, 10]
    assert results[3]["throttle_time_ms"] > 0
    # the third started only after the second's throttle; the fourth (Produce v5, before
    # KIP-219) also had its answer held back for its own throttle
    assert done_at[2] >= 0.009 and done_at[3] >= done_at[2] + results[3]["throttle_time_ms"] / 1000 - 0.002


def test_request_time_quota_counts_handler_steps_not_waits(monkeypatch) -> None:
    import asyncio
    from types import SimpleNamespace

    from kafkarepl.protocol import ApiKey, Request
    from kafkarepl.server import quota_gate
    from kafkarepl.server.quota_gate import ClientQuotaGate

    # The gate times steps with perf_counter: a fake one that only the handlers' work moves,
    # so a step preempted on a busy host cannot count more than its work (it once did: 29 ms).
    now = [0.0]
    monkeypatch.setattr(quota_gate, "time", SimpleNamespace(perf_counter=lambda: now[0]))

    clock = Clock()
    q = ClientQuotas(clock, samples=2)
    q.set_config(entity_of([(CLIENT_ID, "app")]), {"request_percentage": 1.0})  # 10 ms per 1 s window
    gate = ClientQuotaGate(q)

    async def serve(req: Request) -> dict:
        # 50 ms of waiting (e.g. for replication), passing while the handler is suspended:
        # not counted
        waited = asyncio.get_running_loop().create_future()

        def wake() -> None:
            now[0] += 0.05
            waited.set_result(None)

        asyncio.get_running_loop().call_soon(wake)
        await waited
        now[0] += 0.005  # 5 ms of work
        return {"throttle_time_ms": 0, "error_code": 0}

    async def run() -> list:
        conn = _Conn()
        out = []
        for cid, key, client, body in [(1, ApiKey.METADATA, "app", {}), (2, ApiKey.METADATA, "app", {}),
                                       (3, ApiKey.METADATA, "app", {}), (4, ApiKey.METADATA, "other", {}),
                                       (5, ApiKey.FETCH, "app", {"replica_id": 2}),
                                       (6, ApiKey.LEADER_AND_ISR, "app", {}),
                                       (7, ApiKey.PRODUCE, "app", {"acks": 0})]:
            out.append(await gate.serve(Request(key, 9, cid, client, body, 0, 10), conn, serve))
        return out

    r = asyncio.run(run())
    # Counting the 50 ms sleeps would make the third request ~165 ms of 10, a throttle of
    # ~15 s ((165 - 10) / 10 x the 1 s window).
    assert r[0]["throttle_time_ms"] <= 1000, r[0]  # 5 ms: half the window's 10 ms (a 55 ms wait: ~4.5 s)
    assert r[1]["throttle_time_ms"] <= 1000, r[1]  # ~10 ms: at the quota (a 60 ms sleep would be 5 s)
    assert 100 <= r[2]["throttle_time_ms"] <= 5000, r[2]  # ~15 ms of 10: over
    assert r[3]["throttle_time_ms"] == 0  # another client id: no quota
    assert r[4]["throttle_time_ms"] == 0 and r[5]["throttle_time_ms"] == 0  # between brokers: exempt
    assert r[6]["throttle_time_ms"] == 0  # acks=0: no answer to carry a throttle (Kafka exempts it)
    assert q.throttled["Request"] >= 1


def test_connection_creation_rate_per_ip() -> None:
    clock = Clock()
    q = ClientQuotas(clock, samples=2)
    q.set_config(entity_of([("ip", "10.0.0.1")]), {"connection_creation_rate": 5.0})
    assert [q.record_connection("10.0.0.1") for _ in range(5)] == [0] * 5  # 5 in the padded 1 s
    delay = q.record_connection("10.0.0.1")
    assert 0 < delay <= 1000  # bounded by one window, as Kafka's ConnectionQuotas
    assert q.record_connection("10.0.0.2") == 0  # no default: other addresses are free
    q.set_config(entity_of([("ip", None)]), {"connection_creation_rate": 1.0})
    assert q.record_connection("10.0.0.2") == 0 and q.record_connection("10.0.0.2") > 0
    clock.ms += 2000  # the windows aged out: refused connections were not counted
    assert q.record_connection("10.0.0.1") == 0
    assert q.throttled["Connection"] == 2



def test_broker_wide_connection_creation_rate() -> None:
    clock = Clock()
    assert ClientQuotas(clock).record_broker_connection("PLAINTEXT", False) == 0  # no limit by default
    q = ClientQuotas(clock, samples=2, max_connection_creation_rate=3)
    assert [q.record_broker_connection("PLAINTEXT", False) for _ in range(3)] == [0, 0, 0]
    waits = [q.record_broker_connection("PLAINTEXT", False) for _ in range(3)]
    assert all(0 < w <= 1000 for w in waits) and waits == sorted(waits)  # counted: each waits longer
    assert q.record_broker_connection("REPLICATION", True) == 0  # the inter-broker listener: exempt
    assert ClientQuotas(clock, max_connection_creation_rate=0).record_broker_connection("P", False) == 1000


def test_listener_connection_creation_rate_applies_to_the_inter_broker_listener_too() -> None:
    clock = Clock()
    q = ClientQuotas(clock, samples=2, listener_connection_rates={"REPLICATION": 2, "EXTERNAL": 100})
    assert [q.record_broker_connection("REPLICATION", True) for _ in range(2)] == [0, 0]
    assert q.record_broker_connection("REPLICATION", True) > 0
    assert q.record_broker_connection("EXTERNAL", False) == 0  # its own, larger limit
    assert q.record_broker_connection("PLAINTEXT", False) == 0  # no limit of its own, no broker-wide one


def test_controller_mutation_quota_refuses_topics_once_the_bucket_is_empty() -> None:
    import asyncio

    from kafkarepl.protocol import ApiKey, Request
    from kafkarepl.server.quota_gate import ClientQuotaGate

    clock = Clock()
    q = ClientQuotas(clock, samples=2)  # burst: 2 windows of the quota
    q.set_config(entity_of([(CLIENT_ID, "admin")]), {"controller_mutation_rate": 2.0})
    gate = ClientQuotaGate(q, lambda name, _tid: {"old": 6}.get(name or "", 0), default_partitions=3)
    served: list[list[str]] = []

    async def serve(req: Request) -> dict:
        names = [t["name"] for t in req.body.get("topics") or []] or list(req.body.get("topic_names") or [])
        served.append(names)
        key = "responses" if req.api_key == ApiKey.DELETE_TOPICS else "topics"
        return {"throttle_time_ms": 0, key: [{"name": n, "error_code": 0} for n in names]}

    def create(version: int, *topics: tuple[str, int]) -> dict:
        body = {"topics": [{"name": n, "num_partitions": p, "assignments": []} for n, p in topics],
                "validate_only": False}
        return asyncio.run(gate.serve(Request(ApiKey.CREATE_TOPICS, version, 1, "admin", body, 0, 10), _Conn(), serve))

    # 4 tokens: a (3) leaves 1, b (-1: num.partitions, 3) leaves -2, c is refused
    r = create(7, ("a", 3), ("b", -1), ("c", 1))
    assert served[-1] == ["a", "b"]
    assert [(t["name"], t["error_code"]) for t in r["topics"]] == [("a", 0), ("b", 0), ("c", 89)]
    assert r["throttle_time_ms"] == 1000  # 2 tokens short at 2 a second
    clock.ms += 1000  # back to 0: not exceeded, so the next topic is taken
    r = create(7, ("d", 1))
    assert [t["error_code"] for t in r["topics"]] == [0] and r["throttle_time_ms"] == 500
    # before v6 the quota is permissive: everything served, then throttled
    r = create(5, ("e", 4), ("f", 4))
    assert served[-1] == ["e", "f"] and r["throttle_time_ms"] == 4500
    # DeleteTopics counts the topic's partitions from the metadata
    clock.ms += 10_000
    body = {"topic_names": ["old"], "timeout_ms": 1000}
    r = asyncio.run(gate.serve(Request(ApiKey.DELETE_TOPICS, 4, 2, "admin", body, 0, 10), _Conn(), serve))
    assert r["throttle_time_ms"] == 1000  # 6 partitions of a 4-token burst
    # another client id: no quota
    r = asyncio.run(gate.serve(Request(ApiKey.CREATE_TOPICS, 7, 3, "other", {
        "topics": [{"name": "x", "num_partitions": 100, "assignments": []}], "validate_only": False}, 0, 10),
        _Conn(), serve))
    assert r["throttle_time_ms"] == 0 and q.throttled["ControllerMutation"] == 4


def test_request_time_counts_decoding_and_encoding() -> None:
    """The connection's time on a request (decoding it, encoding its answer) counts
    against request_percentage too, as Kafka counts its network threads' time."""
    import asyncio

    from kafkarepl.protocol import ApiKey, Request
    from kafkarepl.server.quota_gate import ClientQuotaGate
    from kafkarepl.server.request_cost import RequestCost, set_request_cost

    clock = Clock()
    q = ClientQuotas(clock, samples=2)
    q.set_config(entity_of([(CLIENT_ID, "app")]), {"request_percentage": 1.0})  # 10 ms per window
    gate = ClientQuotaGate(q)

    async def serve(req: Request) -> dict:
        return {"throttle_time_ms": 0}

    async def one(decode_s: float) -> tuple[dict, RequestCost]:
        cost = RequestCost(decode_s)
        set_request_cost(cost)  # this task's context, as the connection sets it
        return await gate.serve(Request(ApiKey.METADATA, 9, 1, "app", {}, 0, 10), _Conn(), serve), cost

    r, cost = asyncio.run(one(0.008))  # 8 ms decoding: within 10
    assert r["throttle_time_ms"] == 0 and cost.account == ("ANONYMOUS", "app")
    assert cost.network_s == 0.0  # counted once
    gate.record_network(("ANONYMOUS", "app"), 0.004)  # encoding its answer: 12 ms now
    r, _ = asyncio.run(one(0.0))
    assert r["throttle_time_ms"] >= 100  # (12 - 10) / 10 * 1 s, and a bit of handler time
