"""DelayedProduce (the commit queue) and DelayedFetch in the sans-I/O purgatory."""

from __future__ import annotations

from kafkarepl.errors import ErrorCode
from kafkarepl.replication import (
    DelayedFetch,
    DelayedProduce,
    FetchWait,
    MemoryLog,
    PartitionConfig,
    PartitionState,
    ProduceWait,
    Purgatory,
)


def leader(min_isr: int = 2, isr=(0, 1), replicas=(0, 1)) -> PartitionState:
    p = PartitionState(0, MemoryLog(), PartitionConfig(min_insync_replicas=min_isr))
    p.become_leader(1, isr, replicas, 1, 0)
    return p


def append(p: PartitionState, n: int) -> int:
    nxt = p.log.append_as_leader(list(range(n)), p.leader_epoch).last_offset + 1  # type: ignore[attr-defined]
    p.on_leader_append(0)
    return nxt


def produce(p: PartitionState, n: int, deadline: int = 1_000, key: str = "t-0") -> DelayedProduce:
    return DelayedProduce({key: ProduceWait(p, append(p, n), p.leader_term)}, deadline)


def test_produce_completes_when_hw_passes() -> None:
    done: list[DelayedProduce] = []
    purg: Purgatory[DelayedProduce] = Purgatory(done.append)
    p = leader()
    op1, op2 = produce(p, 2), produce(p, 3)
    assert not purg.try_complete_else_watch(op1, 0) and not purg.try_complete_else_watch(op2, 0)
    p.on_follower_fetch(1, 2, 1, 1)
    assert purg.check("t-0", 1) == [op1] and done == [op1]
    assert op1.results == {"t-0": ErrorCode.NONE} and len(purg) == 1
    p.on_follower_fetch(1, 5, 1, 2)
    assert purg.check("t-0", 2) == [op2] and len(purg) == 0


def test_produce_across_partitions_waits_for_all() -> None:
    purg: Purgatory[DelayedProduce] = Purgatory()
    a, b = leader(), leader()
    op = DelayedProduce(
        {"a": ProduceWait(a, append(a, 1), 1), "b": ProduceWait(b, append(b, 1), 1)}, 1_000
    )
    purg.try_complete_else_watch(op, 0)
    a.on_follower_fetch(1, 1, 1, 1)
    assert purg.check("a", 1) == []
    b.on_follower_fetch(1, 1, 1, 1)
    assert purg.check("b", 1) == [op] and op.results == {"a": ErrorCode.NONE, "b": ErrorCode.NONE}


def test_isr_below_min_while_waiting() -> None:
    purg: Purgatory[DelayedProduce] = Purgatory()
    p = leader()
    op = produce(p, 1)
    purg.try_complete_else_watch(op, 0)
    p.on_isr_change_committed([0], 2, 5)
    assert purg.check("t-0", 5) == [op]
    assert op.results["t-0"] is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_leadership_lost_while_waiting() -> None:
    purg: Purgatory[DelayedProduce] = Purgatory()
    p = leader()
    op = produce(p, 1)
    purg.try_complete_else_watch(op, 0)
    p.become_follower(1, 2, [1], [0, 1], 2, 5)
    assert purg.check("t-0", 5) == [op] and op.results["t-0"] is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_deadline_expiry_and_next_deadline() -> None:
    purg: Purgatory[DelayedProduce] = Purgatory()
    p = leader()
    early, late = produce(p, 1, deadline=100), produce(p, 1, deadline=300)
    purg.try_complete_else_watch(late, 0)
    purg.try_complete_else_watch(early, 0)
    assert purg.next_deadline() == 100
    assert purg.poll(99) == []
    assert purg.poll(100) == [early] and early.results["t-0"] is ErrorCode.REQUEST_TIMED_OUT
    assert purg.next_deadline() == 300
    p.on_follower_fetch(1, 2, 1, 150)
    assert purg.check("t-0", 150) == [late]
    assert purg.next_deadline() is None and len(purg) == 0


def test_only_the_changed_key_is_examined() -> None:
    calls = {"n": 0}

    class Counting(DelayedProduce):
        def try_complete(self, now_ms: int) -> bool:
            calls["n"] += 1
            return super().try_complete(now_ms)

        def try_complete_key(self, key: object, now_ms: int) -> bool:
            calls["n"] += 1
            return super().try_complete_key(key, now_ms)

    purg: Purgatory[DelayedProduce] = Purgatory()
    parts = {f"t-{i}": leader() for i in range(50)}
    for key, p in parts.items():
        purg.try_complete_else_watch(Counting({key: ProduceWait(p, append(p, 1), 1)}, 1_000), 0)
    calls["n"] = 0
    parts["t-7"].on_follower_fetch(1, 1, 1, 1)
    assert len(purg.check("t-7", 1)) == 1 and calls["n"] == 1


def test_a_wide_op_looks_only_at_the_signalled_partition() -> None:
    """A follower's fetch over n partitions, signalled once per partition (e.g. n ISR
    changes after a broker came back), costs O(n) partition looks, not O(n^2)."""
    looks = {"n": 0}

    def counting_bytes(key: object, w: FetchWait) -> int:
        looks["n"] += 1
        return _bytes(key, w)

    parts = {f"t-{i}": leader() for i in range(200)}
    for p in parts.values():
        append(p, 1)
    waits = {k: FetchWait(p, p.log.log_end_offset, 1, from_follower=True) for k, p in parts.items()}
    purg: Purgatory[DelayedFetch] = Purgatory()
    op = DelayedFetch(waits, min_bytes=150, deadline_ms=500, available_bytes=counting_bytes)
    assert not purg.try_complete_else_watch(op, 0)
    looks["n"] = 0
    for key in parts:  # nothing readable changed: examined, not completed
        assert purg.check(key, 1) == []
    assert looks["n"] == 0  # no partition had bytes to count
    append(parts["t-3"], 1)
    assert purg.check("t-3", 2) == []  # 100 bytes < min_bytes
    append(parts["t-9"], 1)
    assert purg.check("t-9", 3) == [op]  # 200 bytes over two partitions
    assert looks["n"] == 2


def test_completed_ops_do_not_accumulate() -> None:
    purg: Purgatory[DelayedProduce] = Purgatory()
    a, b = leader(min_isr=1, isr=(0,)), leader()
    for _ in range(1_000):
        # Watched on "a" and "b"; completes via "a" only, so "b" keeps a stale entry.
        op = DelayedProduce({"a": ProduceWait(a, a.log.log_end_offset + 1, 1), "b": ProduceWait(b, 0, 1)}, 10**9)
        purg.try_complete_else_watch(op, 0)
        append(a, 1)
        assert purg.check("a", 0) == [op]
    assert len(purg) == 0
    assert sum(len(v) for v in purg._watchers.values()) < 200
    assert len(purg._deadlines) < 200


def _bytes(_key: object, w: FetchWait) -> int:
    end = w.partition.fetch_upper_bound(w.from_follower)
    return 100 * (end - w.fetch_offset)  # 100-byte records


def test_fetch_min_bytes_and_max_wait() -> None:
    purg: Purgatory[DelayedFetch] = Purgatory()
    p = leader(min_isr=1, isr=(0,))
    op = DelayedFetch({"t-0": FetchWait(p, 0, 1, True)}, min_bytes=250, deadline_ms=500, available_bytes=_bytes)
    assert not purg.try_complete_else_watch(op, 0)
    append(p, 2)
    assert purg.check("t-0", 1) == []  # 200 bytes < min.bytes
    append(p, 1)
    assert purg.check("t-0", 2) == [op] and not op.expired
    slow = DelayedFetch({"t-0": FetchWait(p, 3, 1, True)}, min_bytes=1, deadline_ms=500, available_bytes=_bytes)
    purg.try_complete_else_watch(slow, 2)
    assert purg.poll(500) == [slow] and slow.expired


def test_consumer_fetch_waits_for_hw_not_leo() -> None:
    purg: Purgatory[DelayedFetch] = Purgatory()
    p = leader()
    op = DelayedFetch({"t-0": FetchWait(p, 0, 1, False)}, min_bytes=1, deadline_ms=500, available_bytes=_bytes)
    purg.try_complete_else_watch(op, 0)
    append(p, 5)
    assert purg.check("t-0", 1) == []  # appended but not committed
    p.on_follower_fetch(1, 5, 1, 2)
    assert purg.check("t-0", 2) == [op]


def test_fetch_completes_on_leader_change_or_truncation() -> None:
    purg: Purgatory[DelayedFetch] = Purgatory()
    p = leader(min_isr=1, isr=(0,))
    op = DelayedFetch({"t-0": FetchWait(p, 0, 1, True)}, min_bytes=1, deadline_ms=500, available_bytes=_bytes)
    purg.try_complete_else_watch(op, 0)
    p.become_follower(1, 2, [1], [0, 1], 2, 1)
    assert purg.check("t-0", 1) == [op]
    q = leader(min_isr=1, isr=(0,))
    beyond = DelayedFetch({"t-0": FetchWait(q, 7, 1, True)}, min_bytes=1, deadline_ms=500, available_bytes=_bytes)
    assert purg.try_complete_else_watch(beyond, 0)  # offset past the end: answer now (error)


def test_callback_may_watch_new_operations() -> None:
    p = leader(min_isr=1, isr=(0,))
    purg: Purgatory[DelayedProduce] = Purgatory()
    later: list[DelayedProduce] = []

    def again(op: DelayedProduce) -> None:  # e.g. the next pipelined request of a client
        if not later:
            later.append(DelayedProduce({"t-0": ProduceWait(p, 50, 1)}, 1_000))
            assert not purg.try_complete_else_watch(later[0], 0)

    purg.on_complete = again
    waiting = DelayedProduce({"t-0": ProduceWait(p, 100, 1)}, 1_000)
    first = DelayedProduce({"t-0": ProduceWait(p, 1, 1)}, 1_000)
    purg.try_complete_else_watch(waiting, 0)
    purg.try_complete_else_watch(first, 0)
    append(p, 1)
    assert purg.check("t-0", 1) == [first]
    p.become_follower(1, 2, [1], [0, 1], 2, 2)
    assert set(purg.check("t-0", 2)) == {waiting, later[0]}  # both still watched


def test_an_op_that_raises_leaves_the_others_watched() -> None:
    """A bug or a disk error in one op's check must not drop the other ops of the key
    unanswered (they stay watched and under their deadlines)."""
    p = leader(min_isr=1, isr=(0,))
    purg: Purgatory[DelayedProduce] = Purgatory()
    ops = [DelayedProduce({"t-0": ProduceWait(p, 100, 1)}, 1_000) for _ in range(3)]
    for op in ops:
        assert not purg.try_complete_else_watch(op, 0)

    def boom(key: str, now_ms: int) -> bool:
        raise RuntimeError("broken check")

    ops[1].try_complete_key = boom  # type: ignore[method-assign]
    try:
        purg.check("t-0", 1)
    except RuntimeError:
        pass
    del ops[1].try_complete_key  # healthy again
    p.become_follower(1, 2, [1], [0, 1], 2, 2)  # leadership lost: every waiting op completes
    assert set(purg.check("t-0", 2)) == set(ops)
