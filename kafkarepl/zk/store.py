"""Typed, async access to Kafka's ZooKeeper-mode cluster state (Kafka's KafkaZkClient);
the znodes' paths and JSON are zk.znodes'.

Brokers use the plain methods (register, read, create topics, mark for deletion, ...).
Controller writes take a `ControllerEpochFence`: they run as
multi(check(/controller_epoch, fence.zk_version), op...), so a controller that lost
its election changes nothing (ControllerMovedError). Partition state znodes are written
conditionally on their zkVersion, which is the partition epoch.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.zk.client import AsyncZk, WatchHandle, ZkTransactionError
from kafkarepl.zk.znodes import (
    BROKER_IDS,
    BROKER_TOPICS,
    CLUSTER_ID,
    CONFIG_BROKERS,
    CONFIG_CHANGES,
    CONFIG_CLIENTS,
    CONFIG_IPS,
    CONFIG_TOPICS,
    CONFIG_USERS,
    CONTROLLER,
    CONTROLLER_EPOCH,
    DEFAULT_BROKER_CONFIG,
    DELEGATION_TOKENS,
    DELETE_TOPICS,
    LOG_DIR_EVENT_NOTIFICATION,
    LOG_DIR_FAILURE_EVENT,
    PERSISTENT_PATHS,
    PREFERRED_REPLICA_ELECTION,
    PRODUCER_ID_BLOCK,
    REASSIGN_PARTITIONS,
    TOKEN_CHANGES,
    BrokerInfo,
    ControllerEpochFence,
    Endpoint,
    PartitionState,
    TopicAssignment,
    decode_broker,
    decode_partition_state,
    decode_topic,
    encode_broker,
    encode_partition_state,
    encode_topic,
    from_json,
    new_topic_id,
    now_ms,
    partition_path,
    partition_state_path,
    partitions_path,
    to_json,
    topic_path,
)

PRODUCER_ID_BLOCK_SIZE = 1000
# Ops per multi: ZooKeeper's request limit is ~1 MB (jute.maxbuffer); stay well below.
MAX_OPS_PER_MULTI = 500


class ControllerMovedError(KafkaError):
    """This controller's epoch is stale: another broker has been elected since."""

    code = ErrorCode.NOT_CONTROLLER


class TopicExistsError(KafkaError):
    code = ErrorCode.TOPIC_ALREADY_EXISTS


class UnknownTopicError(KafkaError):
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class BrokerRegistrationError(KafkaError):
    code = ErrorCode.DUPLICATE_BROKER_REGISTRATION


def _chunks(items: list, n: int) -> Iterable[list]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


class KafkaZkStore:
    """Typed, async access to Kafka's znodes over one AsyncZk session."""

    def __init__(self, zk: AsyncZk) -> None:
        self.zk = zk

    # --- setup ---------------------------------------------------------------------

    async def ensure_layout(self) -> None:
        """Create the persistent top-level znodes (idempotent)."""
        await asyncio.gather(*(self.zk.ensure_path(p) for p in PERSISTENT_PATHS))

    async def get_cluster_id(self) -> str:
        """The cluster id, created once by whoever asks first."""
        try:
            data, _ = await self.zk.get(CLUSTER_ID)
            return from_json(data)["id"]
        except NoNodeError:
            pass
        candidate = new_topic_id()
        try:
            await self.zk.create(
                CLUSTER_ID, to_json({"version": "1", "id": candidate}), makepath=True
            )
            return candidate
        except NodeExistsError:
            data, _ = await self.zk.get(CLUSTER_ID)
            return from_json(data)["id"]

    # --- brokers -------------------------------------------------------------------

    async def register_broker(
        self,
        broker_id: int,
        host: str,
        port: int,
        rack: str | None = None,
        endpoints: list[Endpoint] | None = None,
        wait_for_old_s: float | None = None,
    ) -> int:
        """Create the ephemeral /brokers/ids/<id>; returns the broker epoch (its czxid).

        A znode left by this broker's previous, not yet expired session is waited out
        (up to the session timeout); one owned by a live other session is an error."""
        path = f"{BROKER_IDS}/{broker_id}"
        data = encode_broker(BrokerInfo(broker_id, host, port, rack, endpoints=endpoints or []))
        await self.zk.ensure_path(BROKER_IDS)
        wait = (
            self.zk.session_timeout_ms / 1000.0 * 1.5 if wait_for_old_s is None else wait_for_old_s
        )
        deadline = time.monotonic() + wait
        while True:
            try:
                await self.zk.create(path, data, ephemeral=True)
            except NodeExistsError:
                stat = await self.zk.exists(path)
                if stat is not None and stat.ephemeralOwner == self.zk.session_id:
                    await self.zk.set(path, data)
                    return stat.czxid
                if time.monotonic() >= deadline:
                    raise BrokerRegistrationError(
                        f"broker id {broker_id} is registered by another live session"
                    ) from None
                await asyncio.sleep(0.1)
                continue
            stat = await self.zk.exists(path)
            return stat.czxid if stat is not None else -1

    async def fence_dead_broker(self, broker_id: int, epoch: int) -> tuple[bool, bool]:
        """Delete the registration of a broker found dead (its listener refuses
        connections: the process is gone) while its ZooKeeper session lives on until the
        session timeout, and /controller when that same session holds it. The controller
        (or the next election) then acts at once. Only the registration with broker
        epoch `epoch` (its czxid) goes, never a restarted broker's new one. Returns
        (registration deleted, controller deleted)."""
        path = f"{BROKER_IDS}/{broker_id}"
        stat = await self.zk.exists(path)
        if stat is None or stat.czxid != epoch or not stat.ephemeralOwner:
            return False, False
        ops: list[tuple] = [("delete", path, stat.version)]
        ctrl = await self.zk.exists(CONTROLLER)
        if ctrl is not None and ctrl.ephemeralOwner == stat.ephemeralOwner:
            ops.append(("delete", CONTROLLER, ctrl.version))
        try:
            await self.zk.multi(ops)
        except ZkTransactionError:
            return False, False  # it moved meanwhile (expired, re-registered): nothing to do
        return True, len(ops) == 2

    async def watch_registration(self, broker_id: int, fn: Callable[[], Any]) -> WatchHandle:
        """fn() (on the loop) whenever this broker's registration is found missing: once
        deleted, and after every reconnection that finds it gone. A persistent watch:
        kazoo drops every one-shot watch when its connection drops (it fires them with
        EventType.NONE instead of restoring them, as ZooKeeper's Java client would), so a
        deletion while disconnected, or after a reconnection, would go unseen."""
        def changed(_data: bytes | None, stat: Any) -> None:
            if stat is None:
                fn()

        return await self.zk.data_watch(f"{BROKER_IDS}/{broker_id}", changed)

    async def get_broker_ids(self) -> list[int]:
        return sorted(int(c) for c in await self.zk.get_children(BROKER_IDS) if c.isdigit())

    async def get_broker(self, broker_id: int) -> BrokerInfo | None:
        found = await self.get_registration(broker_id)
        return None if found is None else found[0]

    async def get_registration(self, broker_id: int) -> tuple[BrokerInfo, int] | None:
        """A broker's registration and the ZooKeeper session that holds it."""
        try:
            data, stat = await self.zk.get(f"{BROKER_IDS}/{broker_id}")
        except NoNodeError:
            return None
        return decode_broker(broker_id, data, stat.czxid), stat.ephemeralOwner

    async def get_brokers(self) -> dict[int, BrokerInfo]:
        ids = await self.get_broker_ids()
        found = await self.zk.get_many([f"{BROKER_IDS}/{i}" for i in ids])
        return {
            i: decode_broker(i, r[0], r[1].czxid)
            for i, r in zip(ids, found, strict=True)
            if r is not None
        }

    # --- controller ----------------------------------------------------------------

    async def get_controller_id(self) -> int | None:
        try:
            data, _ = await self.zk.get(CONTROLLER)
        except NoNodeError:
            return None
        return int(from_json(data)["brokerid"])

    async def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, zkVersion) of /controller_epoch, None before the first election."""
        try:
            data, stat = await self.zk.get(CONTROLLER_EPOCH)
        except NoNodeError:
            return None
        return int(data.decode()), stat.version

    async def try_become_controller(self, broker_id: int) -> ControllerEpochFence | None:
        """One election attempt: multi(create ephemeral /controller, setData
        /controller_epoch = e+1 if still at the version read). None if lost."""
        current = await self.get_controller_epoch()
        if current is None:
            try:
                await self.zk.create(CONTROLLER_EPOCH, b"0")
            except NodeExistsError:
                pass
            current = await self.get_controller_epoch()
            assert current is not None
        epoch, version = current
        body = to_json({"version": 2, "brokerid": broker_id, "timestamp": str(now_ms())})
        try:
            results = await self.zk.multi(
                [
                    ("create", CONTROLLER, body, True),
                    ("set", CONTROLLER_EPOCH, str(epoch + 1).encode(), version),
                ]
            )
        except ZkTransactionError as e:
            if isinstance(e.cause, (NodeExistsError, BadVersionError)):
                return await self.controller_fence_if_ours()
            raise e.cause from e
        return ControllerEpochFence(epoch + 1, results[1].version)

    async def controller_fence_if_ours(self) -> ControllerEpochFence | None:
        """The fence of an election this session already won (e.g. the multi's reply was
        lost to a connection drop). Safe: /controller_epoch only moves together with the
        creation of /controller, which is ours."""
        stat = await self.zk.exists(CONTROLLER)
        if stat is None or stat.ephemeralOwner != self.zk.session_id:
            return None
        current = await self.get_controller_epoch()
        if current is None:
            return None
        if await self.zk.exists(CONTROLLER) != stat:  # re-check: nothing moved meanwhile
            return None
        return ControllerEpochFence(current[0], current[1])

    async def resign_controller(self, fence: ControllerEpochFence) -> None:
        """Delete /controller if we still hold the epoch (clean controller shutdown)."""
        try:
            await self.zk.multi(
                [("check", CONTROLLER_EPOCH, fence.zk_version), ("delete", CONTROLLER)]
            )
        except ZkTransactionError:
            pass

    async def fenced(self, fence: ControllerEpochFence, ops: list[tuple]) -> list:
        """multi(check(/controller_epoch), *ops); ControllerMovedError when fenced out,
        else the first failing op's own error (BadVersionError, NoNodeError, ...)."""
        try:
            results = await self.zk.multi([("check", CONTROLLER_EPOCH, fence.zk_version), *ops])
        except ZkTransactionError as e:
            if isinstance(e.results[0], BadVersionError) or isinstance(e.results[0], NoNodeError):
                raise ControllerMovedError(
                    f"controller epoch {fence.epoch} (zkVersion {fence.zk_version}) is stale"
                ) from e
            raise e.cause from e
        return results[1:]

    # --- topics --------------------------------------------------------------------

    async def get_topic_names(self) -> list[str]:
        return sorted(await self.zk.get_children(BROKER_TOPICS))

    async def get_topic(self, name: str) -> TopicAssignment | None:
        try:
            data, stat = await self.zk.get(topic_path(name))
        except NoNodeError:
            return None
        return decode_topic(name, data, stat.version)

    async def get_topics(self, names: Iterable[str] | None = None) -> dict[str, TopicAssignment]:
        names = list(await self.get_topic_names() if names is None else names)
        found = await self.zk.get_many([topic_path(n) for n in names])
        return {
            n: decode_topic(n, r[0], r[1].version)
            for n, r in zip(names, found, strict=True)
            if r is not None
        }

    async def topic_exists(self, name: str) -> bool:
        return await self.zk.exists(topic_path(name)) is not None

    async def create_topic(
        self,
        name: str,
        assignment: Mapping[int, list[int]],
        configs: Mapping[str, str] | None = None,
        topic_id: str | None = None,
    ) -> str:
        """Write /config/topics/<t> then /brokers/topics/<t> (what the controller watches),
        atomically. Returns the topic id. TopicExistsError if the topic exists or is
        still being deleted."""
        topic_id = topic_id or new_topic_id()
        topic = TopicAssignment(name, topic_id, {int(p): list(r) for p, r in assignment.items()})
        config_body = to_json(
            {"version": 1, "config": {k: str(v) for k, v in (configs or {}).items()}}
        )
        ops: list[tuple] = []
        if await self.zk.exists(f"{CONFIG_TOPICS}/{name}") is None:
            ops.append(("create", f"{CONFIG_TOPICS}/{name}", config_body))
        else:
            # Left over from a deleted topic, or from a failed create: overwrite.
            ops.append(("set", f"{CONFIG_TOPICS}/{name}", config_body))
        ops.append(("create", topic_path(name), encode_topic(topic)))
        try:
            await self.zk.multi(ops)
        except ZkTransactionError as e:
            if isinstance(e.cause, NodeExistsError):
                raise TopicExistsError(f"Topic '{name}' already exists.") from None
            if isinstance(e.cause, NoNodeError):
                # Config vanished between exists() and the multi: retry once as create.
                return await self.create_topic(name, assignment, configs, topic_id)
            raise e.cause from e
        return topic_id

    async def add_partitions(
        self, name: str, new_partitions: Mapping[int, list[int]]
    ) -> TopicAssignment:
        """Append partitions to a topic's assignment (conditional on its zkVersion)."""
        for _ in range(10):
            topic = await self.get_topic(name)
            if topic is None:
                raise UnknownTopicError(f"Topic '{name}' does not exist.")
            clash = set(new_partitions) & set(topic.partitions)
            if clash:
                raise KafkaError(
                    f"partitions {sorted(clash)} already exist", ErrorCode.INVALID_PARTITIONS
                )
            topic.partitions.update({int(p): list(r) for p, r in new_partitions.items()})
            try:
                stat = await self.zk.set(topic_path(name), encode_topic(topic), topic.zk_version)
            except BadVersionError:
                continue
            topic.zk_version = stat.version
            return topic
        raise KafkaError(f"topic {name} changed concurrently", ErrorCode.REASSIGNMENT_IN_PROGRESS)

    async def set_topic_assignment(
        self, fence: ControllerEpochFence, topic: TopicAssignment, expected_version: int = -1
    ) -> int:
        """Controller write of a topic znode (reassignment); returns the new zkVersion."""
        (stat,) = await self.fenced(
            fence, [("set", topic_path(topic.name), encode_topic(topic), expected_version)]
        )
        return stat.version

    async def mark_topic_for_deletion(self, name: str) -> None:
        if not await self.topic_exists(name):
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        try:
            await self.zk.create(f"{DELETE_TOPICS}/{name}", makepath=True)
        except NodeExistsError:
            pass  # already queued

    async def get_topics_to_delete(self) -> list[str]:
        try:
            return sorted(await self.zk.get_children(DELETE_TOPICS))
        except NoNodeError:
            return []

    async def delete_topic_znodes(self, fence: ControllerEpochFence, name: str) -> None:
        """Remove everything of a deleted topic: partition states, topic, config, marker."""
        paths: list[str] = []
        try:
            partitions = await self.zk.get_children(partitions_path(name))
        except NoNodeError:
            partitions = []
        for p in partitions:
            try:
                children = await self.zk.get_children(f"{partitions_path(name)}/{p}")
            except NoNodeError:
                children = []
            paths.extend(f"{partitions_path(name)}/{p}/{c}" for c in children)
            paths.append(f"{partitions_path(name)}/{p}")
        if partitions or await self.zk.exists(partitions_path(name)) is not None:
            paths.append(partitions_path(name))
        for chunk in _chunks(paths, MAX_OPS_PER_MULTI):
            await self.fenced(fence, [("delete", p) for p in chunk])
        tail = []
        if await self.zk.exists(topic_path(name)) is not None:
            tail.append(("delete", topic_path(name)))
        if await self.zk.exists(f"{CONFIG_TOPICS}/{name}") is not None:
            tail.append(("delete", f"{CONFIG_TOPICS}/{name}"))
        if await self.zk.exists(f"{DELETE_TOPICS}/{name}") is not None:
            tail.append(("delete", f"{DELETE_TOPICS}/{name}"))
        if tail:
            await self.fenced(fence, tail)

    async def remove_deletion_marker(self, fence: ControllerEpochFence, name: str) -> None:
        try:
            await self.fenced(fence, [("delete", f"{DELETE_TOPICS}/{name}")])
        except NoNodeError:
            pass

    # --- configs -------------------------------------------------------------------

    async def _get_config(self, path: str) -> dict[str, str]:
        try:
            data, _ = await self.zk.get(path)
        except NoNodeError:
            return {}
        if not data:  # a bare parent (users/<u> of a users/<u>/clients/<c> quota): no config, as Kafka reads it
            return {}
        return {k: str(v) for k, v in (from_json(data).get("config") or {}).items()}

    async def _set_config(self, path: str, entity_path: str, config: Mapping[str, str]) -> None:
        body = to_json({"version": 1, "config": {k: str(v) for k, v in config.items()}})
        try:
            await self.zk.set(path, body)
        except NoNodeError:
            try:
                await self.zk.create(path, body, makepath=True)
            except NodeExistsError:
                await self.zk.set(path, body)
        await self.zk.create(
            f"{CONFIG_CHANGES}/config_change_",
            to_json({"version": 2, "entity_path": entity_path}),
            sequence=True,
            makepath=True,
        )

    async def purge_config_changes(self, older_than_ms: int, root: str = CONFIG_CHANGES) -> int:
        """Delete change notifications (of /config/changes, or of `root`) created before
        `older_than_ms` (wall clock), oldest first, stopping at the first newer one (Kafka
        purges them after 15 minutes)."""
        try:
            children = await self.zk.get_children(root)
        except NoNodeError:
            return 0
        purged = 0
        for node in sorted(children):
            path = f"{root}/{node}"
            stat = await self.zk.exists(path)
            if stat is None:
                continue
            if stat.ctime >= older_than_ms:
                break
            try:
                await self.zk.delete(path)
                purged += 1
            except NoNodeError:
                pass  # another broker purged it
        return purged

    async def config_change_entity(self, node: str) -> str | None:
        """The entity path ("topics/<t>", "brokers/<id>") of /config/changes/<node>."""
        try:
            data, _ = await self.zk.get(f"{CONFIG_CHANGES}/{node}")
        except NoNodeError:
            return None
        entity = from_json(data).get("entity_path")
        return entity if isinstance(entity, str) else None

    # --- log dir failures (KIP-112) -------------------------------------------------------

    async def notify_log_dir_failure(self, broker_id: int) -> None:
        """A broker tells the controller one of its log dirs failed, as Kafka's brokers:
        /log_dir_event_notification/log_dir_event_<seq> = {"version":1,"broker":id,"event":1}."""
        await self.zk.create(
            f"{LOG_DIR_EVENT_NOTIFICATION}/log_dir_event_",
            to_json({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT}),
            sequence=True,
            makepath=True,
        )

    async def take_log_dir_events(self) -> set[int]:
        """The controller reads and deletes the pending log dir failure notifications;
        returns the brokers that sent them."""
        try:
            children = await self.zk.get_children(LOG_DIR_EVENT_NOTIFICATION)
        except NoNodeError:
            return set()
        brokers: set[int] = set()
        for node in sorted(children):
            path = f"{LOG_DIR_EVENT_NOTIFICATION}/{node}"
            try:
                data, _ = await self.zk.get(path)
                event = from_json(data)
                if event.get("event") == LOG_DIR_FAILURE_EVENT and isinstance(event.get("broker"), int):
                    brokers.add(event["broker"])
                await self.zk.delete(path)
            except NoNodeError:
                pass
            except KafkaError:  # corrupt JSON: dropped
                await self.zk.delete(path)
        return brokers

    async def get_topic_config(self, name: str) -> dict[str, str]:
        return await self._get_config(f"{CONFIG_TOPICS}/{name}")

    async def get_topic_configs(self, names: Iterable[str]) -> dict[str, dict[str, str]]:
        names = list(names)
        configs = await asyncio.gather(*(self.get_topic_config(n) for n in names))
        return dict(zip(names, configs, strict=True))

    async def set_topic_config(self, name: str, config: Mapping[str, str]) -> None:
        """Replace a topic's overrides (the whole map) and log a config change."""
        if not await self.topic_exists(name):
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        await self._set_config(f"{CONFIG_TOPICS}/{name}", f"topics/{name}", config)

    async def get_broker_config(self, broker: int | str = DEFAULT_BROKER_CONFIG) -> dict[str, str]:
        return await self._get_config(f"{CONFIG_BROKERS}/{broker}")

    async def set_broker_config(self, broker: int | str, config: Mapping[str, str]) -> None:
        await self._set_config(f"{CONFIG_BROKERS}/{broker}", f"brokers/{broker}", config)

    async def get_user_config(self, user: str) -> dict[str, str]:
        """A user's SCRAM credentials ({"SCRAM-SHA-256": "salt=...,..."}), Kafka's layout."""
        return await self._get_config(f"{CONFIG_USERS}/{user}")

    async def set_user_config(self, user: str, config: Mapping[str, str]) -> None:
        await self._set_config(f"{CONFIG_USERS}/{user}", f"users/{user}", config)

    async def get_user_names(self) -> list[str]:
        try:
            return sorted(await self.zk.get_children(CONFIG_USERS))
        except NoNodeError:
            return []

    async def get_entity_config(self, entity_path: str) -> dict[str, str]:
        """The config of /config/<entity_path> (a quota entity: "users/alice/clients/app")."""
        return await self._get_config(f"/config/{entity_path}")

    async def set_entity_config(self, entity_path: str, config: Mapping[str, str]) -> None:
        await self._set_config(f"/config/{entity_path}", entity_path, config)

    async def quota_entity_paths(self) -> list[str]:
        """Every users/<u>, users/<u>/clients/<c>, clients/<c> and ips/<ip> entity with a znode."""
        out: list[str] = []
        for user in await self.get_user_names():
            out.append(f"users/{user}")
            try:
                out += [f"users/{user}/clients/{c}" for c in sorted(
                    await self.zk.get_children(f"{CONFIG_USERS}/{user}/clients"))]
            except NoNodeError:
                pass
        for root, prefix in ((CONFIG_CLIENTS, "clients"), (CONFIG_IPS, "ips")):
            try:
                out += [f"{prefix}/{c}" for c in sorted(await self.zk.get_children(root))]
            except NoNodeError:
                pass
        return out

    # --- delegation tokens (KIP-48, Kafka's ZooKeeper layout) -------------------------

    async def get_delegation_token_ids(self) -> list[str]:
        try:
            return sorted(await self.zk.get_children(DELEGATION_TOKENS))
        except NoNodeError:
            return []

    async def get_delegation_token(self, token_id: str) -> dict | None:
        """A token's information (no HMAC: every broker derives it from the secret)."""
        try:
            data, _ = await self.zk.get(f"{DELEGATION_TOKENS}/{token_id}")
        except NoNodeError:
            return None
        return from_json(data)

    async def set_delegation_token(self, token_id: str, info: Mapping[str, Any]) -> None:
        """Create or replace a token's znode and tell every broker (a token change)."""
        path, body = f"{DELEGATION_TOKENS}/{token_id}", to_json(dict(info))
        try:
            await self.zk.set(path, body)
        except NoNodeError:
            await self.zk.create(path, body, makepath=True)
        await self._token_changed(token_id)

    async def delete_delegation_token(self, token_id: str) -> None:
        try:
            await self.zk.delete(f"{DELEGATION_TOKENS}/{token_id}")
        except NoNodeError:
            return  # another broker removed it (expired tokens are removed by every broker)
        await self._token_changed(token_id)

    async def _token_changed(self, token_id: str) -> None:
        await self.zk.create(f"{TOKEN_CHANGES}/token_change_", token_id.encode(), sequence=True, makepath=True)

    async def token_change_id(self, node: str) -> str | None:
        """The token id a /delegation_token/token_changes/<node> notification names."""
        try:
            data, _ = await self.zk.get(f"{TOKEN_CHANGES}/{node}")
        except NoNodeError:
            return None
        return data.decode("utf-8", "replace")

    # --- partition state -----------------------------------------------------------

    async def get_partition_state(self, topic: str, partition: int) -> PartitionState | None:
        try:
            data, stat = await self.zk.get(partition_state_path(topic, partition))
        except NoNodeError:
            return None
        return decode_partition_state(data, stat.version)

    async def get_partition_states(
        self, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], PartitionState]:
        """Many state znodes in a few multiRead round trips; missing ones left out."""
        keys = list(partitions)
        found = await self.zk.get_many([partition_state_path(t, p) for t, p in keys])
        return {
            k: decode_partition_state(r[0], r[1].version)
            for k, r in zip(keys, found, strict=True)
            if r is not None
        }

    async def get_existing_partition_states(
        self, topics: Iterable[str]
    ) -> dict[tuple[str, int], PartitionState]:
        """The state znodes a topic already has (a topic re-created over leftovers); a new
        topic has none, found with one getChildren per topic, all in one request."""
        names = list(topics)
        children = await self.zk.get_children_many([partitions_path(t) for t in names])
        keys = [
            (t, int(p))
            for t, ps in zip(names, children, strict=True)
            for p in ps or []
            if p.isdigit()
        ]
        return await self.get_partition_states(keys) if keys else {}

    async def create_partition_states(
        self, fence: ControllerEpochFence, states: Mapping[tuple[str, int], PartitionState]
    ) -> dict[tuple[str, int], int]:
        """Create state znodes of new partitions (and their parents); returns each one's
        zkVersion (0). A partition whose state already exists is left out of the result."""
        created: dict[tuple[str, int], int] = {}
        topics = {t for t, _ in states}

        async def parent(t: str) -> None:
            try:
                await self.fenced(fence, [("create", partitions_path(t), b"")])
            except NodeExistsError:
                pass

        await asyncio.gather(*(parent(t) for t in topics))

        async def create(chunk: list) -> None:
            ops = []
            for (t, p), s in chunk:
                ops.append(("create", partition_path(t, p), b""))
                ops.append(("create", partition_state_path(t, p), encode_partition_state(s)))
            try:
                await self.fenced(fence, ops)
                created.update({k: 0 for k, _ in chunk})
                return
            except (NodeExistsError, NoNodeError):
                pass
            # Some partition existed already: one by one.
            for (t, p), s in chunk:
                try:
                    await self.fenced(fence, [("create", partition_path(t, p), b"")])
                except NodeExistsError:
                    pass
                try:
                    await self.fenced(
                        fence, [("create", partition_state_path(t, p), encode_partition_state(s))]
                    )
                    created[(t, p)] = 0
                except NodeExistsError:
                    pass

        # All multis in flight at once (ZooKeeper applies them in order): no round trip
        # per chunk of 250 partitions.
        await asyncio.gather(*(create(c) for c in _chunks(sorted(states.items()), MAX_OPS_PER_MULTI // 2)))
        return created

    async def update_partition_state(
        self,
        fence: ControllerEpochFence,
        topic: str,
        partition: int,
        state: PartitionState,
        expected_zk_version: int,
    ) -> int:
        """Conditional write of one partition state; returns the new zkVersion (partition
        epoch). BadVersionError if someone wrote it since expected_zk_version."""
        (stat,) = await self.fenced(
            fence,
            [
                (
                    "set",
                    partition_state_path(topic, partition),
                    encode_partition_state(state),
                    expected_zk_version,
                )
            ],
        )
        return stat.version

    async def update_partition_states(
        self,
        fence: ControllerEpochFence,
        updates: Mapping[tuple[str, int], tuple[PartitionState, int]],
    ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], Exception]]:
        """Many conditional writes, batched in multis with a per-partition fallback.
        Returns ({key: new zkVersion}, {key: error}) — errors are BadVersionError/NoNodeError.
        ControllerMovedError propagates."""
        done: dict[tuple[str, int], int] = {}
        failed: dict[tuple[str, int], Exception] = {}

        async def update(chunk: list) -> None:
            ops = [
                ("set", partition_state_path(t, p), encode_partition_state(s), v)
                for (t, p), (s, v) in chunk
            ]
            try:
                stats = await self.fenced(fence, ops)
                done.update({k: st.version for (k, _), st in zip(chunk, stats, strict=True)})
                return
            except (BadVersionError, NoNodeError):
                pass
            for (t, p), (s, v) in chunk:
                try:
                    done[(t, p)] = await self.update_partition_state(fence, t, p, s, v)
                except (BadVersionError, NoNodeError) as e:
                    failed[(t, p)] = e

        # Every multi in flight at once; each is atomic and fenced on its own.
        await asyncio.gather(*(update(c) for c in _chunks(sorted(updates.items()), MAX_OPS_PER_MULTI)))
        return done, failed

    # --- admin requests ------------------------------------------------------------

    async def get_partition_reassignments(self) -> dict[tuple[str, int], list[int]]:
        try:
            data, _ = await self.zk.get(REASSIGN_PARTITIONS)
        except NoNodeError:
            return {}
        body = from_json(data)
        return {
            (e["topic"], int(e["partition"])): [int(b) for b in e["replicas"]]
            for e in body.get("partitions", [])
        }

    async def request_partition_reassignments(
        self, reassignments: Mapping[tuple[str, int], list[int]]
    ) -> None:
        """The legacy admin path: write /admin/reassign_partitions (fails if one is pending)."""
        body = to_json(
            {
                "version": 1,
                "partitions": [
                    {"topic": t, "partition": p, "replicas": list(r)}
                    for (t, p), r in sorted(reassignments.items())
                ],
            }
        )
        try:
            await self.zk.create(REASSIGN_PARTITIONS, body, makepath=True)
        except NodeExistsError:
            raise KafkaError(
                "a reassignment is in progress", ErrorCode.REASSIGNMENT_IN_PROGRESS
            ) from None

    async def delete_reassignment_request(self, fence: ControllerEpochFence) -> None:
        try:
            await self.fenced(fence, [("delete", REASSIGN_PARTITIONS)])
        except NoNodeError:
            pass

    async def get_preferred_replica_election(self) -> set[tuple[str, int]]:
        try:
            data, _ = await self.zk.get(PREFERRED_REPLICA_ELECTION)
        except NoNodeError:
            return set()
        return {(e["topic"], int(e["partition"])) for e in from_json(data).get("partitions", [])}

    async def request_preferred_replica_election(
        self, partitions: Iterable[tuple[str, int]]
    ) -> None:
        body = to_json(
            {
                "version": 1,
                "partitions": [{"topic": t, "partition": p} for t, p in sorted(partitions)],
            }
        )
        try:
            await self.zk.create(PREFERRED_REPLICA_ELECTION, body, makepath=True)
        except NodeExistsError:
            raise KafkaError(
                "a preferred replica election is in progress", ErrorCode.ELECTION_NOT_NEEDED
            ) from None

    async def delete_preferred_replica_election(self, fence: ControllerEpochFence) -> None:
        try:
            await self.fenced(fence, [("delete", PREFERRED_REPLICA_ELECTION)])
        except NoNodeError:
            pass

    # --- producer ids --------------------------------------------------------------

    async def allocate_producer_id_block(
        self, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE
    ) -> tuple[int, int]:
        """Claim the next block of producer ids: (first, last) inclusive. Conditional
        writes on /latest_producer_id_block so two brokers never get the same block."""
        while True:
            try:
                data, stat = await self.zk.get(PRODUCER_ID_BLOCK)
            except NoNodeError:
                data, stat = None, None
            if data:
                body = from_json(data)
                start = int(body["block_end"]) + 1
            else:
                start = 0
            end = start + size - 1
            new = to_json(
                {
                    "version": 1,
                    "broker": broker_id,
                    "block_start": str(start),
                    "block_end": str(end),
                }
            )
            try:
                if stat is None:
                    await self.zk.create(PRODUCER_ID_BLOCK, new)
                else:
                    await self.zk.set(PRODUCER_ID_BLOCK, new, stat.version)
            except (NodeExistsError, BadVersionError):
                continue
            return start, end
