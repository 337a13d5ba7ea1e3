"""KafkaZkStore and AsyncZk against a real ZooKeeper: formats, round trips, fencing."""

from __future__ import annotations

import asyncio
import json

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError

from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.zk import AsyncZk, KafkaZkStore, PartitionState, topic_id_from_uuid, topic_id_to_uuid
from kafkarepl.zk.store import ControllerMovedError, TopicExistsError

pytestmark = pytest.mark.integration


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


async def connect(hosts: str, timeout_ms: int = 2000) -> tuple[AsyncZk, KafkaZkStore]:
    zk = AsyncZk(hosts, session_timeout_ms=timeout_ms)
    await zk.start()
    store = KafkaZkStore(zk)
    await store.ensure_layout()
    return zk, store


def raw_json(zk: AsyncZk, path: str):
    async def get():
        data, stat = await zk.get(path)
        return json.loads(data), stat

    return get()


def test_broker_registration_is_ephemeral_and_kafka_formatted(zk_chroot):
    async def main():
        zk1, s1 = await connect(zk_chroot)
        zk2, s2 = await connect(zk_chroot)
        epoch = await s1.register_broker(3, "127.0.0.1", 19092, rack="r1")
        body, stat = await raw_json(zk1, "/brokers/ids/3")
        assert body["version"] == 5 and body["host"] == "127.0.0.1" and body["port"] == 19092
        assert body["endpoints"] == ["PLAINTEXT://127.0.0.1:19092"] and body["rack"] == "r1"
        assert stat.ephemeralOwner == zk1.session_id and epoch == stat.czxid
        brokers = await s2.get_brokers()
        assert brokers[3].rack == "r1" and brokers[3].epoch == epoch
        # Same id from another live session: refused (after a short wait).
        with pytest.raises(KafkaError) as e:
            await s2.register_broker(3, "127.0.0.1", 19093, wait_for_old_s=0.2)
        assert e.value.code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
        await zk1.stop()
        assert await s2.get_broker_ids() == []
        await zk2.stop()

    run(main())


def test_topic_round_trip_and_duplicate_create(zk_chroot):
    async def main():
        zk, s = await connect(zk_chroot)
        tid = await s.create_topic("orders", {0: [1, 2], 1: [2, 1]}, {"cleanup.policy": "compact"})
        body, _ = await raw_json(zk, "/brokers/topics/orders")
        assert body == {
            "version": 3,
            "partitions": {"0": [1, 2], "1": [2, 1]},
            "adding_replicas": {},
            "removing_replicas": {},
            "topic_id": tid,
        }
        assert topic_id_from_uuid(topic_id_to_uuid(tid)) == tid
        cfg, _ = await raw_json(zk, "/config/topics/orders")
        assert cfg == {"version": 1, "config": {"cleanup.policy": "compact"}}
        with pytest.raises(TopicExistsError) as e:
            await s.create_topic("orders", {0: [1]})
        assert e.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        t = await s.get_topic("orders")
        assert t.partitions == {0: [1, 2], 1: [2, 1]} and t.topic_id == tid
        t = await s.add_partitions("orders", {2: [1, 2]})
        assert (await s.get_topic("orders")).partitions[2] == [1, 2]
        with pytest.raises(KafkaError) as e:
            await s.add_partitions("orders", {2: [1, 2]})
        assert e.value.code == ErrorCode.INVALID_PARTITIONS
        await s.set_topic_config("orders", {"retention.ms": "1000"})
        assert await s.get_topic_config("orders") == {"retention.ms": "1000"}
        changes = await zk.get_children("/config/changes")
        assert any(c.startswith("config_change_") for c in changes)
        await s.mark_topic_for_deletion("orders")
        assert await s.get_topics_to_delete() == ["orders"]
        with pytest.raises(KafkaError) as e:
            await s.mark_topic_for_deletion("nope")
        assert e.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        await zk.stop()

    run(main())


def test_controller_election_multi_and_fenced_writes(zk_chroot):
    async def main():
        zk1, s1 = await connect(zk_chroot)
        zk2, s2 = await connect(zk_chroot)
        f1 = await s1.try_become_controller(1)
        assert f1 is not None and f1.epoch == 1
        assert await s2.try_become_controller(2) is None  # /controller exists
        body, stat = await raw_json(zk1, "/controller")
        assert (
            body["version"] == 2 and body["brokerid"] == 1 and stat.ephemeralOwner == zk1.session_id
        )
        await s1.create_topic("t", {0: [1, 2]})
        created = await s1.create_partition_states(
            f1, {("t", 0): PartitionState(1, 0, [1, 2], f1.epoch)}
        )
        assert created == {("t", 0): 0}
        state, _ = await raw_json(zk1, "/brokers/topics/t/partitions/0/state")
        assert state == {
            "version": 1,
            "leader": 1,
            "leader_epoch": 0,
            "controller_epoch": 1,
            "isr": [1, 2],
        }
        # Conditional on the partition epoch (zkVersion).
        v = await s1.update_partition_state(f1, "t", 0, PartitionState(1, 0, [1], 1), 0)
        assert v == 1
        with pytest.raises(BadVersionError):
            await s1.update_partition_state(f1, "t", 0, PartitionState(1, 0, [1, 2], 1), 0)
        # Broker 1's session ends: broker 2 wins epoch 2; controller 1's writes are void.
        await zk1.stop()
        f2 = await s2.try_become_controller(2)
        assert f2 is not None and f2.epoch == 2
        assert await s2.get_controller_epoch() == (2, f2.zk_version)
        zk1b, s1b = await connect(zk_chroot)
        with pytest.raises(ControllerMovedError) as e:
            await s1b.update_partition_state(f1, "t", 0, PartitionState(1, 5, [1], 1), 1)
        assert e.value.code == ErrorCode.NOT_CONTROLLER
        assert (await s2.get_partition_state("t", 0)).leader_epoch == 0
        await zk1b.stop()
        await zk2.stop()

    run(main())


def test_producer_id_blocks_never_overlap(zk_chroot):
    async def main():
        zks = [await connect(zk_chroot) for _ in range(3)]
        blocks = await asyncio.gather(
            *(s.allocate_producer_id_block(i) for i, (_, s) in enumerate(zks) for _ in range(4))
        )
        starts = sorted(b[0] for b in blocks)
        assert starts == [i * 1000 for i in range(12)]
        assert all(end - start == 999 for start, end in blocks)
        body, _ = await raw_json(zks[0][0], "/latest_producer_id_block")
        assert body["version"] == 1 and body["block_end"] == "11999"
        for zk, _ in zks:
            await zk.stop()

    run(main())


def test_cluster_id_created_once(zk_chroot):
    async def main():
        (zk1, s1), (zk2, s2) = await connect(zk_chroot), await connect(zk_chroot)
        ids = await asyncio.gather(s1.get_cluster_id(), s2.get_cluster_id())
        assert ids[0] == ids[1] and len(ids[0]) == 22
        await zk1.stop()
        await zk2.stop()

    run(main())


def test_watches_and_state_changes_are_delivered_on_the_loop(zk_chroot, zookeeper):
    async def main():
        zk, s = await connect(zk_chroot, timeout_ms=1000)
        loop = asyncio.get_running_loop()
        seen, threads = [], set()
        import threading

        def on_children(children):
            threads.add(threading.current_thread())
            seen.append(sorted(children))

        await zk.children_watch("/brokers/topics", on_children)
        await s.create_topic("a", {0: [1]})
        for _ in range(100):
            if seen and seen[-1] == ["a"]:
                break
            await asyncio.sleep(0.02)
        assert seen[-1] == ["a"]
        assert threads == {threading.main_thread()}
        states, lost, back = [], asyncio.Event(), asyncio.Event()
        zk.add_state_listener(states.append)
        zk.on_session_lost(lost.set)
        zk.on_session_reestablished(back.set)
        # Expire the session the classic way: another client takes over its id and closes.
        sid, passwd = zk.client.client_id
        other = KazooClient(hosts=zk_chroot, client_id=(sid, passwd))
        await loop.run_in_executor(None, other.start)
        await loop.run_in_executor(None, other.stop)
        await asyncio.wait_for(lost.wait(), 10)
        await asyncio.wait_for(back.wait(), 10)
        assert "LOST" in states and states[-1] == "CONNECTED"
        assert zk.session_id != sid
        # The recipe watch survived the session loss.
        await s.create_topic("b", {0: [1]})
        for _ in range(100):
            if seen[-1] == ["a", "b"]:
                break
            await asyncio.sleep(0.02)
        assert seen[-1] == ["a", "b"]
        await zk.stop()

    run(main())


def test_missing_chroot_is_created_and_unreachable_server_is_a_clear_error(zookeeper):
    async def main():
        import uuid

        hosts = f"{zookeeper.connect_string}/fresh-{uuid.uuid4().hex[:8]}/kafka"
        zk, s = await connect(hosts)
        await s.register_broker(1, "127.0.0.1", 9092)
        assert await s.get_broker_ids() == [1]
        await zk.stop()
        dead = AsyncZk("127.0.0.1:1", session_timeout_ms=1000)
        with pytest.raises(ConnectionError, match="cannot connect to ZooKeeper"):
            await dead.start(timeout=0.5)

    run(main())


def test_config_change_notifications_are_purged_oldest_first_once_expired(zk_chroot):
    async def main():
        zk, s = await connect(zk_chroot)
        for i in range(3):
            await s.set_broker_config(i, {"leader.replication.throttled.rate": "1000"})
            await asyncio.sleep(0.05)  # distinct creation times
        changes = sorted(await zk.get_children("/config/changes"))
        assert len(changes) == 3
        assert await s.purge_config_changes(0) == 0  # none is that old
        newest = await zk.exists(f"/config/changes/{changes[-1]}")
        assert await s.purge_config_changes(newest.ctime) == 2  # created before the newest
        assert await zk.get_children("/config/changes") == [changes[-1]]
        assert await s.purge_config_changes(newest.ctime + 1) == 1
        assert await zk.get_children("/config/changes") == []
        await zk.stop()

    run(main())


def test_multi_read_reads_many_znodes_in_a_few_requests(zk_chroot):
    """get_many / get_children_many (ZooKeeper's multiRead) under a chroot: values and
    stats as single gets give them, None for a missing node, order kept past one request."""
    async def main():
        zk, store = await connect(zk_chroot)
        try:
            await zk.ensure_path("/many")
            n = 2500  # more than one multiRead request
            await asyncio.gather(*(zk.create(f"/many/n{i}", b"v%d" % i) for i in range(n)))
            paths = [f"/many/n{i}" for i in range(n)]
            paths.insert(7, "/many/missing")
            got = await zk.get_many(paths)
            assert len(got) == n + 1 and got[7] is None
            values = [g[0] for g in got if g is not None]
            assert values == [b"v%d" % i for i in range(n)]
            single = await zk.get("/many/n42")
            assert got[43] == single
            children = await zk.get_children_many(["/many", "/nowhere"])
            assert sorted(children[0]) == sorted(f"n{i}" for i in range(n)) and children[1] is None
            states = {("t", p): PartitionState(p % 3, 5, [0, 1, 2], 1) for p in range(3)}
            await zk.ensure_path("/brokers/topics/t/partitions")
            for (_t, p), s in states.items():
                await zk.create(f"/brokers/topics/t/partitions/{p}/state",
                                json.dumps({"version": 1, "leader": s.leader, "leader_epoch": 5,
                                            "isr": s.isr, "controller_epoch": 1}).encode(),
                                makepath=True)
            read = await store.get_partition_states([("t", 0), ("t", 1), ("t", 2), ("t", 9)])
            assert sorted(read) == [("t", 0), ("t", 1), ("t", 2)]
            assert read[("t", 1)].leader == 1 and read[("t", 1)].isr == [0, 1, 2]
            assert sorted(await store.get_existing_partition_states(["t", "nope"])) == sorted(read)
        finally:
            await zk.stop()

    run(main())
