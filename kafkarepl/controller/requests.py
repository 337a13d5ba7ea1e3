"""Builds the controller's requests to brokers, batched per broker (as Kafka's
ControllerBrokerRequestBatch): one LeaderAndIsr (v5), one UpdateMetadata (v7) and one
StopReplica (v3) per broker per controller event.

Bodies use Kafka's JSON schema field names in snake_case; topic ids are uuid.UUID.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from kafkarepl.controller.context import ControllerContext, TopicPartition
from kafkarepl.zk.znodes import topic_id_to_uuid

LEADER_DURING_DELETE = -2  # UpdateMetadata leader for a topic being deleted: forget it
SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
LEADER_AND_ISR_INCREMENTAL = 0
LEADER_AND_ISR_FULL = 1


class RequestBatch:
    def __init__(self, ctx: ControllerContext, controller_id: int, controller_epoch: int) -> None:
        self.ctx = ctx
        self.controller_id = controller_id
        self.controller_epoch = controller_epoch
        self.leader_and_isr: dict[int, dict[TopicPartition, bool]] = defaultdict(dict)  # -> is_new
        self.update_metadata_brokers: set[int] = set()
        self.update_metadata_partitions: set[TopicPartition] = set()
        self.stop_replica: dict[int, dict[TopicPartition, bool]] = defaultdict(dict)  # -> delete
        # LeaderAndIsr partition states of this batch (bodies are built when it is sent,
        # from the states then current, and only read by the encoder).
        self._partition_states: dict[tuple[str, int, bool], dict] = {}

    # --- collecting ----------------------------------------------------------------

    def add_leader_and_isr(
        self, brokers: Iterable[int], tp: TopicPartition, is_new: bool = False
    ) -> None:
        live = self.ctx.live
        for b in brokers:
            if b in live:
                self.leader_and_isr[b][tp] = self.leader_and_isr[b].get(tp, False) or is_new

    def add_leader_and_isr_for_replicas(
        self, tps: Iterable[TopicPartition], is_new: bool = False
    ) -> None:
        for tp in tps:
            if tp in self.ctx.states:
                self.add_leader_and_isr(self.ctx.replicas(tp), tp, is_new)

    def add_update_metadata(
        self, brokers: Iterable[int], tps: Iterable[TopicPartition] = ()
    ) -> None:
        self.update_metadata_brokers.update(b for b in brokers if b in self.ctx.live)
        self.update_metadata_partitions.update(tps)

    def add_stop_replica(self, brokers: Iterable[int], tp: TopicPartition, delete: bool) -> None:
        for b in brokers:
            if b in self.ctx.live:
                self.stop_replica[b][tp] = self.stop_replica[b].get(tp, False) or delete

    def empty(self) -> bool:
        return not (self.leader_and_isr or self.update_metadata_brokers or self.stop_replica)

    # --- bodies --------------------------------------------------------------------

    def _topic_uuid(self, topic: str):
        ta = self.ctx.topics.get(topic)
        if ta is None or not ta.topic_id:
            return None
        return topic_id_to_uuid(ta.topic_id)

    def _live_leaders(self, leaders: set[int]) -> list[dict]:
        out = []
        for b in sorted(leaders):
            info = self.ctx.live.get(b)
            if info is not None:
                out.append({"broker_id": b, "host_name": info.host, "port": info.port})
        return out

    def leader_and_isr_body(self, broker_id: int, partitions: dict[TopicPartition, bool]) -> dict:
        by_topic: dict[str, list[dict]] = defaultdict(list)
        leaders: set[int] = set()
        cache = self._partition_states  # the same partition for several brokers: built once
        for (t, p), is_new in sorted(partitions.items()):
            st = self.ctx.states.get((t, p))
            if st is None:
                continue
            leaders.add(st.leader)
            ps = cache.get((t, p, is_new))
            if ps is None:
                ta = self.ctx.topics[t]
                ps = cache[(t, p, is_new)] = {
                    "partition_index": p,
                    "controller_epoch": st.controller_epoch,
                    "leader": st.leader,
                    "leader_epoch": st.leader_epoch,
                    "isr": list(st.isr),
                    "partition_epoch": st.zk_version,
                    "replicas": list(ta.partitions.get(p, [])),
                    "adding_replicas": list(ta.adding_replicas.get(p, [])),
                    "removing_replicas": list(ta.removing_replicas.get(p, [])),
                    "is_new": is_new,
                }
            by_topic[t].append(ps)
        return {
            "controller_id": self.controller_id,
            "controller_epoch": self.controller_epoch,
            "broker_epoch": self.ctx.broker_epoch(broker_id),
            "type": LEADER_AND_ISR_INCREMENTAL,
            "topic_states": [
                {"topic_name": t, "topic_id": self._topic_uuid(t), "partition_states": ps}
                for t, ps in sorted(by_topic.items())
            ],
            "live_leaders": self._live_leaders(leaders),
        }

    def live_brokers(self) -> list[dict]:
        out = []
        for b, info in sorted(self.ctx.live.items()):
            endpoints = [
                {
                    "port": e.port,
                    "host": e.host,
                    "listener": e.listener,
                    "security_protocol": SECURITY_PROTOCOLS.get(e.security_protocol, 0),
                }
                for e in info.endpoints
            ] or [
                {
                    "port": info.port,
                    "host": info.host,
                    "listener": "PLAINTEXT",
                    "security_protocol": 0,
                }
            ]
            out.append({"id": b, "endpoints": endpoints, "rack": info.rack})
        return out

    def update_metadata_body(self, broker_id: int, partitions: Iterable[TopicPartition]) -> dict:
        return self._update_metadata_body(
            broker_id, self._update_metadata_topic_states(partitions), self.live_brokers()
        )

    def update_metadata_bodies(self) -> dict[int, dict]:
        """This batch's UpdateMetadata per broker. The partitions and brokers are the same
        for every broker: built once (the encoder only reads them); broker_epoch differs."""
        if not self.update_metadata_brokers:
            return {}
        states = self._update_metadata_topic_states(self.update_metadata_partitions)
        live = self.live_brokers()
        return {b: self._update_metadata_body(b, states, live) for b in sorted(self.update_metadata_brokers)}

    def _update_metadata_body(self, broker_id: int, topic_states: list[dict], live_brokers: list[dict]) -> dict:
        return {
            "controller_id": self.controller_id,
            "controller_epoch": self.controller_epoch,
            "broker_epoch": self.ctx.broker_epoch(broker_id),
            "topic_states": topic_states,
            "live_brokers": live_brokers,
        }

    def _update_metadata_topic_states(self, partitions: Iterable[TopicPartition]) -> list[dict]:
        by_topic: dict[str, list[dict]] = defaultdict(list)
        live = self.ctx.live
        failed = self.ctx.offline_replicas
        for t, p in sorted(partitions):
            st = self.ctx.states.get((t, p))
            ta = self.ctx.topics.get(t)
            if st is None or ta is None:
                continue
            replicas = list(ta.partitions.get(p, []))
            by_topic[t].append(
                {
                    "partition_index": p,
                    "controller_epoch": st.controller_epoch,
                    "leader": LEADER_DURING_DELETE if t in self.ctx.deleting else st.leader,
                    "leader_epoch": st.leader_epoch,
                    "isr": list(st.isr),
                    "zk_version": st.zk_version,
                    "replicas": replicas,
                    "offline_replicas": [b for b in replicas
                                         if b not in live or (t, p) in failed.get(b, ())],
                }
            )
        return [
            {"topic_name": t, "topic_id": self._topic_uuid(t), "partition_states": ps}
            for t, ps in sorted(by_topic.items())
        ]

    def stop_replica_body(self, broker_id: int, partitions: dict[TopicPartition, bool]) -> dict:
        by_topic: dict[str, list[dict]] = defaultdict(list)
        for (t, p), delete in sorted(partitions.items()):
            st = self.ctx.states.get((t, p))
            # Deleting: -2 lets the broker skip its leader epoch check (Kafka's EpochDuringDelete).
            epoch = -2 if delete and t in self.ctx.deleting else (st.leader_epoch if st else -1)
            by_topic[t].append(
                {"partition_index": p, "leader_epoch": epoch, "delete_partition": delete}
            )
        return {
            "controller_id": self.controller_id,
            "controller_epoch": self.controller_epoch,
            "broker_epoch": self.ctx.broker_epoch(broker_id),
            "topic_states": [
                {"topic_name": t, "partition_states": ps} for t, ps in sorted(by_topic.items())
            ],
        }
