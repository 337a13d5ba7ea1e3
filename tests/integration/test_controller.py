"""The controller against a real ZooKeeper. Brokers are simulated by ZooKeeper sessions
that register /brokers/ids/<id>; what the controller would send them is captured by a
RecordingBrokerChannel (real broker processes come in the cluster tests)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from kazoo.client import KazooClient

from kafkarepl.controller.channel import (
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    RecordingBrokerChannel,
    success_response,
)
from kafkarepl.controller.controller import Controller
from kafkarepl.errors import ErrorCode
from kafkarepl.zk import AsyncZk, KafkaZkStore

pytestmark = pytest.mark.integration

SESSION_MS = 1000


def run(coro, timeout: float = 40):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def wait_for(cond, timeout: float = 10.0, what: str = "condition"):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = cond()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


class Harness:
    """Broker sessions + controllers sharing one chroot."""

    def __init__(self, hosts: str) -> None:
        self.hosts = hosts
        self.brokers: dict[int, AsyncZk] = {}
        self.controllers: dict[int, tuple[Controller, AsyncZk, RecordingBrokerChannel]] = {}
        self.admin: KafkaZkStore | None = None
        self._admin_zk: AsyncZk | None = None

    async def __aenter__(self) -> Harness:
        self._admin_zk = AsyncZk(self.hosts, session_timeout_ms=SESSION_MS * 5)
        await self._admin_zk.start()
        self.admin = KafkaZkStore(self._admin_zk)
        await self.admin.ensure_layout()
        return self

    async def __aexit__(self, *exc) -> None:
        for c, zk, _ in self.controllers.values():
            with contextlib.suppress(Exception):
                await c.stop()
            with contextlib.suppress(Exception):
                await zk.stop()
        for zk in self.brokers.values():
            with contextlib.suppress(Exception):
                await zk.stop()
        await self._admin_zk.stop()

    async def start_broker(self, bid: int, rack: str | None = None) -> int:
        zk = AsyncZk(self.hosts, session_timeout_ms=SESSION_MS)
        await zk.start()
        self.brokers[bid] = zk
        store = KafkaZkStore(zk)
        # As a real broker does: a new session after an expired one re-registers.
        zk.on_session_reestablished(
            lambda: store.register_broker(bid, "127.0.0.1", 9000 + bid, rack=rack)
        )
        return await store.register_broker(bid, "127.0.0.1", 9000 + bid, rack=rack)

    async def kill_broker(self, bid: int) -> None:
        await self.brokers.pop(bid).stop()  # session closed: its ephemeral znode goes now

    async def start_controller(
        self, bid: int, **config
    ) -> tuple[Controller, RecordingBrokerChannel]:
        zk = AsyncZk(self.hosts, session_timeout_ms=SESSION_MS)
        await zk.start()
        channel = RecordingBrokerChannel()
        cfg = {"auto.leader.rebalance.enable": False, **config}
        c = Controller(bid, zk, channel, cfg)
        await c.start()
        self.controllers[bid] = (c, zk, channel)
        return c, channel

    async def active(self, timeout: float = 10.0) -> Controller:
        async def find():
            for c, _, _ in self.controllers.values():
                if c.is_active:
                    await c.wait_idle()
                    return c
            return None

        return await wait_for(find, timeout, "an active controller")

    async def state(self, topic: str, partition: int):
        return await self.admin.get_partition_state(topic, partition)


async def settle(c: Controller) -> None:
    await asyncio.sleep(0.05)
    await c.wait_idle()


def test_election_failover_and_epoch_bump(zk_chroot):
    async def main():
        async with Harness(zk_chroot) as h:
            c1, _ = await h.start_controller(1)
            await wait_for(lambda: c1.is_active, what="controller 1 active")
            assert c1.epoch == 1 and c1.metrics.active_controller == 1
            c2, _ = await h.start_controller(2)
            await settle(c2)
            assert not c2.is_active and c2.metrics.active_controller == 0
            assert await h.admin.get_controller_id() == 1
            # Controller 1's session ends: 2 takes over with a higher epoch.
            await h.controllers[1][1].stop()
            await wait_for(lambda: c2.is_active, what="controller 2 takes over")
            assert c2.epoch == 2
            assert await h.admin.get_controller_id() == 2
            assert (await h.admin.get_controller_epoch())[0] == 2
            # A clean stop hands over at once.
            c3, _ = await h.start_controller(3)
            await c2.stop()
            await wait_for(lambda: c3.is_active, what="controller 3 takes over")
            assert c3.epoch == 3

    run(main())


def test_new_topic_gets_leaders_and_brokers_are_told(zk_chroot):
    async def main():
        async with Harness(zk_chroot) as h:
            for b in (1, 2, 3):
                await h.start_broker(b)
            c, ch = await h.start_controller(1)
            c = await h.active()
            ch.clear()
            await h.admin.create_topic("t", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
            await wait_for(
                lambda: c.partition_state("t", 2) is not None, what="partitions initialized"
            )
            await settle(c)
            for p, leader in [(0, 1), (1, 2), (2, 3)]:
                st = await h.state("t", p)
                assert st.leader == leader and st.leader_epoch == 0 and st.zk_version == 0
                assert sorted(st.isr) == [1, 2, 3] and st.controller_epoch == c.epoch
            lai = ch.requests(LEADER_AND_ISR)
            assert sorted(b for b, _ in lai) == [1, 2, 3]
            for _b, body in lai:
                assert body["controller_epoch"] == c.epoch and body["controller_id"] == 1
                parts = body["topic_states"][0]["partition_states"]
                assert {p["partition_index"] for p in parts} == {0, 1, 2}
                assert all(p["is_new"] and p["partition_epoch"] == 0 for p in parts)
                assert body["topic_states"][0]["topic_id"] is not None
            um = ch.requests(UPDATE_METADATA)
            assert sorted(b for b, _ in um) == [1, 2, 3]
            assert [x["id"] for x in um[0][1]["live_brokers"]] == [1, 2, 3]
            # Add partitions: the controller initializes the new one only.
            ch.clear()
            await h.admin.add_partitions("t", {3: [1, 3, 2]})
            await wait_for(lambda: c.partition_state("t", 3) is not None, what="new partition")
            st = await h.state("t", 3)
            assert st.leader == 1 and st.isr == [1, 3, 2]
            assert (await h.state("t", 0)).leader_epoch == 0
            assert c.metrics.global_partition_count == 4 and c.metrics.offline_partitions == 0

    run(main())


def test_broker_death_moves_leadership_within_the_isr(zk_chroot):
    async def main():
        async with Harness(zk_chroot) as h:
            for b in (1, 2, 3):
                await h.start_broker(b)
            c, ch = await h.start_controller(9)
            c = await h.active()
            await h.admin.create_topic("t", {0: [1, 2, 3], 1: [2, 3, 1]})
            await wait_for(lambda: c.partition_state("t", 1) is not None)
            await settle(c)
            ch.clear()
            await h.kill_broker(1)
            await wait_for(lambda: 1 not in c.ctx.live, what="broker 1 seen dead")
            await settle(c)
            st0 = await h.state("t", 0)
            assert st0.leader == 2 and st0.leader_epoch == 1 and st0.isr == [2, 3]
            st1 = await h.state("t", 1)
            # Follower death: leader stays, the dead broker leaves the ISR.
            assert st1.leader == 2 and st1.isr == [2, 3] and st1.leader_epoch == 1
            sent_to = {b for b, _ in ch.requests(LEADER_AND_ISR)}
            assert sent_to == {2, 3}
            assert c.metrics.leader_elections >= 1 and c.metrics.offline_partitions == 0
            um = ch.requests(UPDATE_METADATA)
            assert um and all(1 not in [x["id"] for x in body["live_brokers"]] for _, body in um)
            # Broker 1 returns: it gets the full metadata and its LeaderAndIsr.
            ch.clear()
            await h.start_broker(1)
            await wait_for(lambda: 1 in c.ctx.live, what="broker 1 back")
            await settle(c)
            to_1 = ch.requests(LEADER_AND_ISR, broker_id=1)
            assert to_1 and {
                p["partition_index"] for p in to_1[0][1]["topic_states"][0]["partition_states"]
            } == {0, 1}
            assert ch.requests(UPDATE_METADATA, broker_id=1)

    run(main())


def test_offline_without_unclean_and_unclean_when_the_topic_allows_it(zk_chroot):
    async def main():
        async with Harness(zk_chroot) as h:
            for b in (1, 2):
                await h.start_broker(b)
            c, ch = await h.start_controller(9)
            c = await h.active()
            await h.admin.create_topic("safe", {0: [1, 2]})
            await h.admin.create_topic(
                "lossy", {0: [1, 2]}, {"unclean.leader.election.enable": "true"}
            )
            await wait_for(lambda: c.partition_state("lossy", 0) and c.partition_state("safe", 0))
            await settle(c)
            # The leader (1) shrinks both ISRs to itself (broker 2 fell behind).
            for t in ("safe", "lossy"):
                st = await h.state(t, 0)
                resp = await c.handle_alter_partition(
                    {
                        "broker_id": 1,
                        "broker_epoch": -1,
                        "topics": [
                            {
                                "topic_name": t,
                                "partitions": [
                                    {
                                        "partition_index": 0,
                                        "leader_epoch": st.leader_epoch,
                                        "new_isr": [1],
                                        "partition_epoch": st.zk_version,
                                    }
                                ],
                            }
                        ],
                    }
                )
                assert resp["topics"][0]["partitions"][0]["error_code"] == 0
            await h.kill_broker(1)
            await wait_for(lambda: 1 not in c.ctx.live)
            await settle(c)
            safe = await h.state("safe", 0)
            assert safe.leader == -1 and safe.isr == [1]  # offline, waiting for broker 1
            lossy = await h.state("lossy", 0)
            assert lossy.leader == 2 and lossy.isr == [2]
            assert c.metrics.unclean_elections == 1 and c.metrics.offline_partitions == 1
            # Broker 1 comes back: it is the ISR, so it leads "safe" again, cleanly.
            await h.start_broker(1)
            await wait_for(lambda: 1 in c.ctx.live)
            await settle(c)
            safe = await h.state("safe", 0)
            assert safe.leader == 1 and safe.isr == [1] and c.metrics.offline_partitions == 0
            assert c.metrics.unclean_elections == 1

    run(main())


def test_unclean_broker_default_from_config(zk_chroot):
    async def main():
        async with Harness(zk_chroot) as h:
            for b in (1, 2):
                await h.start_broker(b)
            await h.start_controller(9, **{"unclean.leader.election.enable": "true"})
            c = await h.active()
            await h.admin.create_topic("t", {0: [1, 2]})
            await wait_for(lambda: c.partition_state("t", 0))
            await settle(c)
            await h.kill_broker(2)
            await wait_for(lambda: 2 not in c.ctx.live)
            await settle(c)
            assert (await h.state("t", 0)).isr == [1]
            await h.start_broker(2)
            await wait_for(lambda: 2 in c.ctx.live)
            await h.kill_broker(1)
            await wait_for(lambda: 1 not in c.ctx.live)
            await settle(c)
            st = await h.state("t", 0)
            assert st.leader == 2 and c.metrics.unclean_elections == 1

    run(main())


def test_alter_partition_rejects_stale_epochs(zk_chroot):
    async def main():
        async with Harness(zk_chroot) as h:
            for b in (1, 2, 3):
                await h.start_broker(b)
            c, ch = await h.start_controller(9)
            await h.start_controller(8)
            c = await h.active()
            standby = next(x for x, _, _ in h.controllers.values() if x is not c)
            await h.admin.create_topic("t", {0: [1, 2, 3]})
            await wait_for(lambda: c.partition_state("t", 0))

            def req(broker, leader_epoch, partition_epoch, isr, topic="t"):
                return {
                    "broker_id": broker,
                    "broker_epoch": -1,
                    "topics": [
                        {
                            "topic_name": topic,
                            "partitions": [
                                {
                                    "partition_index": 0,
                                    "leader_epoch": leader_epoch,
                                    "new_isr": isr,
                                    "partition_epoch": partition_epoch,
                                }
                            ],
                        }
                    ],
                }

            def code(resp):
                return resp["topics"][0]["partitions"][0]["error_code"]

            ok = await c.handle_alter_partition(req(1, 0, 0, [1, 2]))
            part = ok["topics"][0]["partitions"][0]
            assert (
                part["error_code"] == 0 and part["isr"] == [1, 2] and part["partition_epoch"] == 1
            )
            st = await h.state("t", 0)
            assert st.isr == [1, 2] and st.zk_version == 1 and st.leader_epoch == 0
            # Same change again (a retry): answered with the current state, nothing written.
            again = await c.handle_alter_partition(req(1, 0, 1, [1, 2]))
            assert code(again) == 0 and (await h.state("t", 0)).zk_version == 1
            assert (
                code(await c.handle_alter_partition(req(1, 0, 0, [1])))
                == ErrorCode.INVALID_UPDATE_VERSION
            )
            assert (
                code(await c.handle_alter_partition(req(1, 7, 1, [1])))
                == ErrorCode.FENCED_LEADER_EPOCH
            )
            assert (
                code(await c.handle_alter_partition(req(2, 0, 1, [2])))
                == ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
            assert (
                code(await c.handle_alter_partition(req(1, 0, 1, [1, 5])))
                == ErrorCode.INELIGIBLE_REPLICA
            )
            assert (
                code(await c.handle_alter_partition(req(1, 0, 1, [1], topic="nope")))
                == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            dead = await c.handle_alter_partition(
                {"broker_id": 77, "broker_epoch": 1, "topics": []}
            )
            assert dead["error_code"] == ErrorCode.STALE_BROKER_EPOCH
            assert (await standby.handle_alter_partition(req(1, 0, 1, [1])))[
                "error_code"
            ] == ErrorCode.NOT_CONTROLLER
            st = await h.state("t", 0)
            assert st.isr == [1, 2] and st.zk_version == 1
            # Expansion back to the full ISR is accepted and broadcast.
            ch.clear()
            grown = await c.handle_alter_partition(req(1, 0, 1, [1, 2, 3]))
            assert code(grown) == 0 and grown["topics"][0]["partitions"][0]["partition_epoch"] == 2
            await settle(c)
            assert {b for b, _ in ch.requests(UPDATE_METADATA)} == {1, 2, 3}

    run(main())


def test_stale_controller_cannot_change_anything(zk_chroot):
    async def main():
        async with Harness(zk_chroot) as h:
            for b in (1, 2):
                await h.start_broker(b)
            old, old_ch = await h.start_controller(1)
            await wait_for(lambda: old.is_active)
            await h.admin.create_topic("t", {0: [1, 2]})
            await wait_for(lambda: old.partition_state("t", 0))
            await settle(old)
            # The old controller stops noticing /controller changes (a long GC pause, say)...
            old._controller_watch.cancel()
            new, new_ch = await h.start_controller(2)
            # ...while /controller moves to the new one.
            await h._admin_zk.delete("/controller")
            await wait_for(lambda: new.is_active, what="new controller")
            assert new.epoch == old.epoch + 1 and old.is_active
            before = await h.state("t", 0)
            # The stale controller tries to act on a leader's ISR change: ZooKeeper refuses.
            resp = await old.handle_alter_partition(
                {
                    "broker_id": 1,
                    "broker_epoch": -1,
                    "topics": [
                        {
                            "topic_name": "t",
                            "partitions": [
                                {
                                    "partition_index": 0,
                                    "leader_epoch": before.leader_epoch,
                                    "new_isr": [1],
                                    "partition_epoch": before.zk_version,
                                }
                            ],
                        }
                    ],
                }
            )
            assert resp["error_code"] == ErrorCode.NOT_CONTROLLER
            assert not old.is_active  # it resigned on being fenced
            after = await h.state("t", 0)
            assert (after.isr, after.zk_version, after.leader_epoch) == (
                before.isr,
                before.zk_version,
                0,
            )
            # Requests the new controller sends carry the new epoch.
            await settle(new)
            assert new_ch.requests(UPDATE_METADATA)
            assert all(body["controller_epoch"] == new.epoch for _, _, body in new_ch.sent)

    run(main())


def test_topic_deletion_completes_when_the_down_broker_returns(zk_chroot):
    async def main():
        async with Harness(zk_chroot) as h:
            for b in (1, 2):
                await h.start_broker(b)
            c, ch = await h.start_controller(9)
            c = await h.active()
            await h.admin.create_topic("doomed", {0: [1, 2], 1: [2, 1]})
            await wait_for(lambda: c.partition_state("doomed", 1))
            await h.kill_broker(2)
            await wait_for(lambda: 2 not in c.ctx.live)
            await settle(c)
            ch.clear()
            await h.admin.mark_topic_for_deletion("doomed")
            await wait_for(lambda: "doomed" in c.ctx.deleting, what="deletion started")
            await settle(c)
            stops = ch.requests(STOP_REPLICA)
            assert [b for b, _ in stops] == [1]
            ps = stops[0][1]["topic_states"][0]["partition_states"]
            assert {p["partition_index"] for p in ps} == {0, 1} and all(
                p["delete_partition"] for p in ps
            )
            um = ch.requests(UPDATE_METADATA)
            assert um and all(
                p["leader"] == -2 for t in um[0][1]["topic_states"] for p in t["partition_states"]
            )
            assert await h.admin.topic_exists("doomed")  # broker 2 has not deleted its replicas
            ch.clear()
            await h.start_broker(2)
            await wait_for(lambda: "doomed" not in c.ctx.deleting, what="deletion completes")
            assert [b for b, _ in ch.requests(STOP_REPLICA)] == [2]
            assert not await h.admin.topic_exists("doomed")
            assert await h.admin.get_topics_to_delete() == []
            assert await h.admin.get_topic_config("doomed") == {}
            assert await h._admin_zk.exists("/brokers/topics/doomed/partitions/0/state") is None
            # The name is free again.
            await h.admin.create_topic("doomed", {0: [1]})
            await wait_for(lambda: c.partition_state("doomed", 0))
            assert (await h.state("doomed", 0)).leader_epoch == 0

    run(main())


def test_controlled_shutdown_moves_leadership_off_the_broker(zk_chroot):
    async def main():
        async with Harness(zk_chroot) as h:
            epochs = {b: await h.start_broker(b) for b in (1, 2, 3)}
            c, ch = await h.start_controller(9)
            c = await h.active()
            await h.admin.create_topic("t", {0: [1, 2], 1: [2, 1], 2: [1]})
            await wait_for(lambda: c.partition_state("t", 2))
            await settle(c)
            ch.clear()
            stale = await c.handle_controlled_shutdown(
                {"broker_id": 1, "broker_epoch": epochs[1] + 1}
            )
            assert stale["error_code"] == ErrorCode.STALE_BROKER_EPOCH
            resp = await c.handle_controlled_shutdown({"broker_id": 1, "broker_epoch": epochs[1]})
            assert resp == {
                "error_code": 0,
                "remaining_partitions": [],
            }  # RF=1 partitions don't count
            st0, st1 = await h.state("t", 0), await h.state("t", 1)
            assert st0.leader == 2 and st0.isr == [2] and st0.leader_epoch == 1
            assert st1.leader == 2 and st1.isr == [2]
            await settle(c)
            stop = ch.requests(STOP_REPLICA, broker_id=1)
            assert (
                stop
                and not stop[0][1]["topic_states"][0]["partition_states"][0]["delete_partition"]
            )
            # While shutting down, broker 1 cannot be re-elected or rejoin an ISR.
            st = await h.state("t", 0)
            resp = await c.handle_alter_partition(
                {
                    "broker_id": 2,
                    "topics": [
                        {
                            "topic_name": "t",
                            "partitions": [
                                {
                                    "partition_index": 0,
                                    "leader_epoch": st.leader_epoch,
                                    "new_isr": [2, 1],
                                    "partition_epoch": st.zk_version,
                                }
                            ],
                        }
                    ],
                }
            )
            assert resp["topics"][0]["partitions"][0]["error_code"] == ErrorCode.INELIGIBLE_REPLICA

    run(main())


def test_preferred_election_and_auto_rebalance(zk_chroot):
    async def main():
        async with Harness(zk_chroot) as h:
            for b in (1, 2):
                await h.start_broker(b)
            c, ch = await h.start_controller(9, **{"leader.imbalance.per.broker.percentage": 10})
            c = await h.active()
            await h.admin.create_topic("t", {0: [1, 2], 1: [1, 2]})
            await wait_for(lambda: c.partition_state("t", 1))
            await h.kill_broker(1)
            await wait_for(lambda: 1 not in c.ctx.live)
            await h.start_broker(1)
            await wait_for(lambda: 1 in c.ctx.live)
            await settle(c)
            assert (
                await h.state("t", 0)
            ).leader == 2 and c.metrics.preferred_replica_imbalance == 2
            # Broker 1 is not in the ISR yet: preferred election impossible.
            resp = await c.handle_elect_leaders(
                {
                    "election_type": 0,
                    "topic_partitions": [{"topic": "t", "partitions": [0]}],
                    "timeout_ms": 1000,
                }
            )
            r = resp["replica_election_results"][0]["partition_result"][0]
            assert r["error_code"] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
            for p in (0, 1):  # the leader (2) lets broker 1 back into the ISR
                st = await h.state("t", p)
                resp = await c.handle_alter_partition(
                    {
                        "broker_id": 2,
                        "topics": [
                            {
                                "topic_name": "t",
                                "partitions": [
                                    {
                                        "partition_index": p,
                                        "leader_epoch": st.leader_epoch,
                                        "new_isr": [2, 1],
                                        "partition_epoch": st.zk_version,
                                    }
                                ],
                            }
                        ],
                    }
                )
                assert resp["topics"][0]["partitions"][0]["error_code"] == 0
            resp = await c.handle_elect_leaders(
                {
                    "election_type": 0,
                    "topic_partitions": [{"topic": "t", "partitions": [0]}],
                    "timeout_ms": 1000,
                }
            )
            assert resp["replica_election_results"][0]["partition_result"][0]["error_code"] == 0
            assert (await h.state("t", 0)).leader == 1
            # Partition 1 through the legacy znode.
            await h.admin.request_preferred_replica_election([("t", 1)])
            await wait_for(lambda: c.partition_state("t", 1).leader == 1, what="znode election")
            await settle(c)
            assert await h._admin_zk.exists("/admin/preferred_replica_election") is None
            again = await c.handle_elect_leaders({"election_type": 0, "topic_partitions": None})
            codes = {
                (x["topic"], p["partition_id"]): p["error_code"]
                for x in again["replica_election_results"]
                for p in x["partition_result"]
            }
            assert codes == {
                ("t", 0): ErrorCode.ELECTION_NOT_NEEDED,
                ("t", 1): ErrorCode.ELECTION_NOT_NEEDED,
            }
            assert c.metrics.preferred_replica_imbalance == 0
            # Auto rebalance: broker 1 bounces again, rejoins the ISRs, a check moves both back.
            await h.kill_broker(1)
            await wait_for(lambda: 1 not in c.ctx.live)
            await h.start_broker(1)
            await wait_for(lambda: 1 in c.ctx.live)
            await settle(c)
            assert c.metrics.preferred_replica_imbalance == 2
            await c.trigger_auto_rebalance()
            assert c.metrics.preferred_replica_imbalance == 2  # broker 1 not in the ISRs: no move
            for p in (0, 1):
                st = await h.state("t", p)
                await c.handle_alter_partition(
                    {
                        "broker_id": 2,
                        "topics": [
                            {
                                "topic_name": "t",
                                "partitions": [
                                    {
                                        "partition_index": p,
                                        "leader_epoch": st.leader_epoch,
                                        "new_isr": [2, 1],
                                        "partition_epoch": st.zk_version,
                                    }
                                ],
                            }
                        ],
                    }
                )
            await c.trigger_auto_rebalance()
            assert c.metrics.preferred_replica_imbalance == 0
            assert (await h.state("t", 0)).leader == 1 and (await h.state("t", 1)).leader == 1

    run(main())


def test_partition_reassignment(zk_chroot):
    async def main():
        async with Harness(zk_chroot) as h:
            for b in (1, 2, 3):
                await h.start_broker(b)
            c, ch = await h.start_controller(9)
            c = await h.active()
            await h.admin.create_topic("t", {0: [1, 2]})
            await wait_for(lambda: c.partition_state("t", 0))
            await settle(c)
            ch.clear()
            resp = await c.handle_alter_partition_reassignments(
                {
                    "timeout_ms": 1000,
                    "topics": [
                        {"name": "t", "partitions": [{"partition_index": 0, "replicas": [3, 2]}]}
                    ],
                }
            )
            assert resp["responses"][0]["partitions"][0]["error_code"] == 0
            ta = await h.admin.get_topic("t")
            assert (
                ta.partitions[0] == [3, 2, 1]
                and ta.adding_replicas[0] == [3]
                and ta.removing_replicas[0] == [1]
            )
            assert c.list_partition_reassignments()[("t", 0)] == ([3, 2, 1], [3], [1])
            await settle(c)
            assert 3 in {
                b for b, _ in ch.requests(LEADER_AND_ISR)
            }  # the new replica starts following
            st = await h.state("t", 0)
            assert st.leader == 1 and st.leader_epoch == 1
            # Broker 3 catches up: the leader adds it to the ISR, which completes the move.
            ch.clear()
            resp = await c.handle_alter_partition(
                {
                    "broker_id": 1,
                    "topics": [
                        {
                            "topic_name": "t",
                            "partitions": [
                                {
                                    "partition_index": 0,
                                    "leader_epoch": st.leader_epoch,
                                    "new_isr": [1, 2, 3],
                                    "partition_epoch": st.zk_version,
                                }
                            ],
                        }
                    ],
                }
            )
            assert resp["topics"][0]["partitions"][0]["error_code"] == 0
            await settle(c)
            ta = await h.admin.get_topic("t")
            assert (
                ta.partitions[0] == [3, 2]
                and ta.adding_replicas == {}
                and ta.removing_replicas == {}
            )
            st = await h.state("t", 0)
            assert st.leader == 3 and sorted(st.isr) == [2, 3] and st.leader_epoch == 2
            stops = ch.requests(STOP_REPLICA, broker_id=1)
            assert (
                stops and stops[0][1]["topic_states"][0]["partition_states"][0]["delete_partition"]
            )
            assert c.list_partition_reassignments() == {}
            bad = await c.handle_alter_partition_reassignments(
                {
                    "topics": [
                        {"name": "t", "partitions": [{"partition_index": 0, "replicas": [3, 3]}]}
                    ]
                }
            )
            assert (
                bad["responses"][0]["partitions"][0]["error_code"]
                == ErrorCode.INVALID_REPLICA_ASSIGNMENT
            )

    run(main())


def test_new_controller_loads_state_and_resyncs_every_broker(zk_chroot):
    async def main():
        async with Harness(zk_chroot) as h:
            for b in (1, 2, 3):
                await h.start_broker(b)
            c1, _ = await h.start_controller(1)
            await wait_for(lambda: c1.is_active)
            await h.admin.create_topic("t", {p: [1 + p % 3, 1 + (p + 1) % 3] for p in range(6)})
            await wait_for(lambda: c1.partition_state("t", 5))
            await settle(c1)
            c2, ch2 = await h.start_controller(2)
            await h.controllers[1][1].stop()  # controller 1's session (not a broker) ends
            await wait_for(lambda: c2.is_active)
            await settle(c2)
            assert c2.epoch == 2
            assert {tp: s.leader for tp, s in c2.ctx.states.items()} == {
                ("t", p): 1 + p % 3 for p in range(6)
            }
            lai = {b: body for b, body in ch2.requests(LEADER_AND_ISR)}
            assert set(lai) == {1, 2, 3} and all(
                body["controller_epoch"] == 2 for body in lai.values()
            )
            assert sum(len(t["partition_states"]) for t in lai[1]["topic_states"]) == 4
            assert {b for b, _ in ch2.requests(UPDATE_METADATA)} == {1, 2, 3}
            # A broker that died while nobody was controller is handled on takeover.
            c3, ch3 = await h.start_controller(3)
            await c2.stop()
            await h.kill_broker(1)
            await wait_for(lambda: c3.is_active)
            await settle(c3)
            for p in range(6):
                st = await h.state("t", p)
                assert st.leader != 1 and 1 not in st.isr

    run(main())


def test_controller_session_expiry_resigns_and_another_takes_over(zk_chroot):
    async def main():
        async with Harness(zk_chroot) as h:
            await h.start_broker(1)
            c1, _ = await h.start_controller(1)
            await wait_for(lambda: c1.is_active)
            c2, _ = await h.start_controller(2)
            zk1 = h.controllers[1][1]
            sid, passwd = zk1.client.client_id
            loop = asyncio.get_running_loop()
            other = KazooClient(hosts=zk_chroot, client_id=(sid, passwd))
            await loop.run_in_executor(None, other.start)
            await loop.run_in_executor(
                None, other.stop
            )  # closing it expires controller 1's session
            await wait_for(lambda: c2.is_active, what="controller 2 after expiry")
            await wait_for(lambda: not c1.is_active, what="controller 1 resigned")
            await wait_for(lambda: zk1.connected and zk1.session_id != sid, what="new session")
            await settle(c1)
            assert not c1.is_active and c2.epoch == 2
            # Now controller 2 goes: controller 1, on its new session, wins again.
            await c2.stop()
            await wait_for(lambda: c1.is_active, what="controller 1 re-elected")
            assert c1.epoch == 3

    run(main())


def test_malformed_requests_get_error_responses(zk_chroot):
    async def main():
        async with Harness(zk_chroot) as h:
            await h.start_broker(1)
            await h.start_controller(9)
            c = await h.active()
            bad = await c.handle_alter_partition(
                {"broker_id": 1, "topics": [{"topic_name": "t", "partitions": [5]}]}
            )
            assert bad["error_code"] == ErrorCode.INVALID_REQUEST
            bad = await c.handle_alter_partition_reassignments({"topics": [{"partitions": []}]})
            assert bad["error_code"] == ErrorCode.INVALID_REQUEST
            bad = await c.handle_elect_leaders(
                {"election_type": 0, "topic_partitions": [{"partitions": [0]}]}
            )
            assert bad["error_code"] == ErrorCode.INVALID_REQUEST
            assert (await c.handle_controlled_shutdown({"broker_id": 5}))[
                "error_code"
            ] == ErrorCode.BROKER_NOT_AVAILABLE
            # Still serving afterwards.
            await h.admin.create_topic("t", {0: [1]})
            await wait_for(lambda: c.partition_state("t", 0), what="controller still works")

    run(main())


def test_broker_session_expiry_is_a_death_then_a_clean_rejoin(zk_chroot):
    async def main():
        async with Harness(zk_chroot) as h:
            for b in (1, 2):
                await h.start_broker(b)
            zk1 = h.brokers[1]
            rejoined = asyncio.Event()
            zk1.on_session_reestablished(rejoined.set)  # the harness re-registers the broker
            await h.start_controller(9)
            c = await h.active()
            await h.admin.create_topic("t", {0: [1, 2]})
            await wait_for(lambda: c.partition_state("t", 0))
            old_epoch = c.ctx.live[1].epoch
            sid, passwd = zk1.client.client_id
            loop = asyncio.get_running_loop()
            other = KazooClient(hosts=zk_chroot, client_id=(sid, passwd))
            await loop.run_in_executor(None, other.start)
            await loop.run_in_executor(None, other.stop)
            await asyncio.wait_for(rejoined.wait(), 10)
            await wait_for(
                lambda: 1 in c.ctx.live and c.ctx.live[1].epoch != old_epoch, what="rejoin seen"
            )
            await settle(c)
            st = await h.state("t", 0)
            # Broker 1 was treated as dead (leadership moved, it left the ISR) and is back.
            assert st.leader == 2 and st.isr == [2] and st.leader_epoch >= 1
            assert c.ctx.live[1].epoch > old_epoch

    run(main())


def test_reassignment_through_the_admin_znode_and_cancellation(zk_chroot):
    async def main():
        async with Harness(zk_chroot) as h:
            for b in (1, 2, 3, 4):
                await h.start_broker(b)
            await h.start_controller(9)
            c = await h.active()
            await h.admin.create_topic("t", {0: [1, 2], 1: [2, 1]})
            await wait_for(lambda: c.partition_state("t", 1))
            # Legacy path: /admin/reassign_partitions, moving p0 onto brokers already in its ISR.
            await h.admin.request_partition_reassignments({("t", 0): [2, 1]})
            await wait_for(
                lambda: c.ctx.topics["t"].partitions[0] == [2, 1], what="znode reassignment"
            )
            await settle(c)
            assert await h._admin_zk.exists("/admin/reassign_partitions") is None
            st = await h.state("t", 0)
            assert st.leader == 1 and sorted(st.isr) == [1, 2]  # leader still in target: kept
            # API path, then cancelled before the new replica (4) catches up.
            resp = await c.handle_alter_partition_reassignments(
                {
                    "topics": [
                        {"name": "t", "partitions": [{"partition_index": 1, "replicas": [4, 1]}]}
                    ]
                }
            )
            assert resp["responses"][0]["partitions"][0]["error_code"] == 0
            assert (await h.admin.get_topic("t")).adding_replicas == {1: [4]}
            resp = await c.handle_alter_partition_reassignments(
                {
                    "topics": [
                        {"name": "t", "partitions": [{"partition_index": 1, "replicas": None}]}
                    ]
                }
            )
            assert resp["responses"][0]["partitions"][0]["error_code"] == 0
            await settle(c)
            ta = await h.admin.get_topic("t")
            assert (
                ta.partitions[1] == [2, 1]
                and ta.adding_replicas == {}
                and ta.removing_replicas == {}
            )
            assert c.list_partition_reassignments() == {}
            none = await c.handle_alter_partition_reassignments(
                {
                    "topics": [
                        {"name": "t", "partitions": [{"partition_index": 1, "replicas": None}]}
                    ]
                }
            )
            assert (
                none["responses"][0]["partitions"][0]["error_code"]
                == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
            )

    run(main())


def test_topic_without_id_gets_one(zk_chroot):
    async def main():
        async with Harness(zk_chroot) as h:
            await h.start_broker(1)
            await h.start_controller(9)
            c = await h.active()
            # As an old tool would write it: no topic_id.
            await h._admin_zk.create("/brokers/topics/old", b'{"version":1,"partitions":{"0":[1]}}')
            await wait_for(lambda: c.partition_state("old", 0), what="old topic initialized")
            ta = await h.admin.get_topic("old")
            assert len(ta.topic_id) == 22 and ta.partitions == {0: [1]}

    run(main())


def test_thousand_partitions_create_kill_and_failover(zk_chroot):
    from kafkarepl.controller.placement import assign_replicas

    async def main():
        async with Harness(zk_chroot) as h:
            for b in (1, 2, 3):
                await h.start_broker(b)
            await h.start_controller(9)
            c = await h.active()
            await h.admin.create_topic(
                "big", assign_replicas([1, 2, 3], 1000, 3, fixed_start_index=0)
            )
            await wait_for(lambda: len(c.ctx.states) == 1000, timeout=30, what="1000 partitions")
            await settle(c)
            assert sum(1 for s in c.ctx.states.values() if s.leader == 1) == 334
            await h.kill_broker(1)
            await wait_for(
                lambda: all(s.leader in (2, 3) for s in c.ctx.states.values()), timeout=30
            )
            await settle(c)
            c2, ch2 = await h.start_controller(8)
            await h.controllers[9][1].stop()
            await wait_for(lambda: c2.is_active, timeout=30)
            await settle(c2)
            states = await h.admin.get_partition_states([("big", p) for p in range(1000)])
            assert len(states) == 1000
            assert all(s.leader in (2, 3) and 1 not in s.isr for s in states.values())
            assert c2.metrics.offline_partitions == 0 and c2.metrics.global_partition_count == 1000
            lai = dict(ch2.requests(LEADER_AND_ISR))
            assert sum(len(t["partition_states"]) for t in lai[2]["topic_states"]) == 1000

    run(main(), timeout=90)


def test_replicas_on_failed_log_dirs_are_never_elected(zk_chroot):
    """KIP-112: a replica a broker answered KAFKA_STORAGE_ERROR for is offline for every
    election (Kafka's isReplicaOnline), not only for the failover that follows: an
    unclean ElectLeaders picks the other replica, and a preferred election does not pick
    it even while it is listed in the ISR."""
    def storage_error_for(tps):
        def respond(body):
            resp = success_response(LEADER_AND_ISR, body)
            names = {t.get("topic_id"): t["topic_name"] for t in body.get("topic_states", [])}
            for t in resp["topics"]:
                for e in t["partition_errors"]:
                    if (names.get(t["topic_id"]), e["partition_index"]) in tps:
                        e["error_code"] = int(ErrorCode.KAFKA_STORAGE_ERROR)
            return resp
        return respond

    async def main():
        async with Harness(zk_chroot) as h:
            for b in (1, 2):
                await h.start_broker(b)
            c, ch = await h.start_controller(9)
            c = await h.active()
            await h.admin.create_topic("t", {0: [1, 2], 1: [2, 1]})
            await wait_for(lambda: c.partition_state("t", 1))
            await h.kill_broker(2)  # t-0: ISR [1]
            await wait_for(lambda: 2 not in c.ctx.live)
            await h.start_broker(2)
            await wait_for(lambda: 2 in c.ctx.live)
            await settle(c)
            assert (await h.state("t", 0)).isr == [1] and (await h.state("t", 1)).leader == 1

            # broker 1's dir holding t-0 fails: no clean leader is left (ISR [1])
            ch.responders[(1, LEADER_AND_ISR)] = storage_error_for({("t", 0)})
            await h.admin.notify_log_dir_failure(1)
            await wait_for(lambda: ("t", 0) in c.ctx.offline_replicas.get(1, ()), what="the offline replica")
            await settle(c)
            assert (await h.state("t", 0)).leader == -1
            resp = await c.handle_elect_leaders({"election_type": 1, "timeout_ms": 1000,
                                                 "topic_partitions": [{"topic": "t", "partitions": [0]}]})
            assert resp["replica_election_results"][0]["partition_result"][0]["error_code"] == 0
            assert (await h.state("t", 0)).leader == 2  # unclean, but not the failed replica

            # broker 2's replica of t-1 fails too; even listed in the ISR it is not preferred
            ch.responders[(2, LEADER_AND_ISR)] = storage_error_for({("t", 1)})
            await h.admin.notify_log_dir_failure(2)
            await wait_for(lambda: ("t", 1) in c.ctx.offline_replicas.get(2, ()), what="the offline replica")
            await settle(c)
            st = await h.state("t", 1)
            resp = await c.handle_alter_partition({"broker_id": 1, "topics": [{"topic_name": "t", "partitions": [
                {"partition_index": 1, "leader_epoch": st.leader_epoch, "new_isr": [1, 2],
                 "partition_epoch": st.zk_version}]}]})
            assert resp["topics"][0]["partitions"][0]["error_code"] == 0
            resp = await c.handle_elect_leaders({"election_type": 0, "timeout_ms": 1000,
                                                 "topic_partitions": [{"topic": "t", "partitions": [1]}]})
            r = resp["replica_election_results"][0]["partition_result"][0]
            assert r["error_code"] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, r
            assert (await h.state("t", 1)).leader == 1

    run(main())
