"""Fast failover (issue 16): a killed broker's listener refuses connections at once, so
the brokers that lose their connections to it fence its ZooKeeper registration (and
/controller) instead of waiting out its session. With a 30 s session timeout, leaders
and the controller move in a few seconds; a paused broker (listener still accepting) is
left alone until its session expires; a restarted broker registers at once."""

from __future__ import annotations

import time

import pytest
from kazoo.client import KazooClient

from tests.integration.chaos import partition_info, produce_raw, wait_until

pytestmark = pytest.mark.integration

SESSION_MS = 30_000  # far above anything below: only the fencing explains a fast move
FAST_S = 10.0


def _registered(zk_chroot: str) -> set[int]:
    zk = KazooClient(hosts=zk_chroot)
    zk.start(10)
    try:
        return {int(b) for b in zk.get_children("/brokers/ids")}
    finally:
        zk.stop()
        zk.close()


@pytest.mark.parametrize("victim_kind", ["controller", "leader"])
def test_kill9_moves_leaders_and_controller_long_before_the_session_expires(cluster_factory, zk_chroot,
                                                                             victim_kind) -> None:
    c = cluster_factory(3, min_insync_replicas=2, zookeeper_session_timeout_ms=SESSION_MS)
    c.create_topic("ff", partitions=6, rf=3)
    before = partition_info(c, "ff")
    ctl = c.metadata(["ff"])["controller_id"]
    if victim_kind == "controller":
        victim = ctl
    else:
        victim = next(info["leader_id"] for info in before.values() if info["leader_id"] != ctl)
    survivors = [b for b in c.brokers if b != victim]
    t0 = time.monotonic()
    c.kill(victim)

    def releaded():
        info = partition_info(c, "ff", via=survivors[0])
        ok = all(i["leader_id"] in survivors and victim not in i["isr_nodes"] for i in info.values())
        return info if ok else None

    after = wait_until(releaded, FAST_S, f"leaders of {victim} moved before its {SESSION_MS} ms session expired")
    moved_s = time.monotonic() - t0
    for p, i in after.items():
        assert i["leader_id"] in before[p]["isr_nodes"], (p, before[p], i)  # from the ISR only
    # acks=all produce works everywhere through the new leaders (ISR of 2 = min ISR).
    for p, i in after.items():
        r = produce_raw(c.brokers[i["leader_id"]].port, "ff", p, acks=-1)
        assert r["error_code"] == 0, (p, r)
    assert victim not in _registered(zk_chroot)
    if victim_kind == "controller":
        assert c.metadata(["ff"])["controller_id"] in survivors
    # The killed broker comes back at once (its old registration is gone, nothing to wait out).
    t1 = time.monotonic()
    c.brokers[victim].start()
    wait_until(lambda: victim in _registered(zk_chroot), FAST_S, "the restarted broker registered")
    print(f"moved in {moved_s:.2f}s; re-registered in {time.monotonic() - t1:.2f}s")


def test_a_paused_broker_is_not_fenced(cluster_factory, zk_chroot) -> None:
    c = cluster_factory(3, min_insync_replicas=2, zookeeper_session_timeout_ms=6000)
    c.create_topic("fp", partitions=3, rf=3)
    victim = c.leader_of("fp", 0)
    c.pause(victim)
    try:
        time.sleep(3.0)  # followers' fetches to it time out; its listener still accepts
        assert victim in _registered(zk_chroot)
        log = "".join(c.tail(b, 400) for b in c.brokers if b != victim)
        assert "refuses connections" not in log
    finally:
        c.resume(victim)
