"""The broker's view of the cluster, fed by the controller's UpdateMetadata requests.

Metadata requests are answered from here, never from ZooKeeper, so a client storm does
not turn into a ZooKeeper storm (seed 003's herd concern).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field


@dataclass
class BrokerInfo:
    broker_id: int
    host: str  # host and port: the inter-broker listener's endpoint
    port: int
    rack: str | None = None
    endpoints: dict[str, tuple[str, int]] = field(default_factory=dict)  # listener -> (host, port)


@dataclass
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    offline_replicas: list[int] = field(default_factory=list)
    partition_epoch: int = 0
    controller_epoch: int = 0


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)


class MetadataCache:
    def __init__(self, inter_broker_listener: str | None = None) -> None:
        self.inter_broker_listener = inter_broker_listener
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}  # topic_by_id's index of `topics`
        self.controller_id: int = -1
        self.controller_epoch: int = -1
        self.version = 0  # changes with every update: a reader's copy of the topics is stale
        # Leaders' inter-broker endpoints from LeaderAndIsr (its live_leaders), as Kafka's
        # fetchers use: a broker just started follows before the UpdateMetadata that lists
        # the other brokers has arrived. Never served to clients.
        self.live_leaders: dict[int, tuple[str, int]] = {}

    # -- updates -------------------------------------------------------------------
    def update(self, body: dict) -> None:
        """Apply an UpdateMetadata request body (v5+ topic_states layout)."""
        self.version += 1
        self.controller_id = body.get("controller_id", self.controller_id)
        self.controller_epoch = max(self.controller_epoch, body.get("controller_epoch", -1))
        brokers: dict[int, BrokerInfo] = {}
        for b in body.get("live_brokers") or []:
            eps = {(e.get("listener") or "PLAINTEXT").upper(): (e["host"], e["port"]) for e in b.get("endpoints") or []}
            if eps:
                first = next(iter(eps.values()))
                host, port = eps.get(self.inter_broker_listener or "", first)
            else:
                host, port = b.get("v0_host", ""), b.get("v0_port", -1)
            brokers[b["id"]] = BrokerInfo(b["id"], host, port, b.get("rack"), eps)
        if brokers or body.get("live_brokers") is not None:
            self.brokers = brokers
        for ts in body.get("topic_states") or []:
            name = ts["topic_name"]
            tid = ts.get("topic_id")
            topic = self.topics.get(name)
            if topic is None:
                topic = self.topics[name] = TopicInfo(name, _as_uuid(tid))
            elif tid is not None and _as_uuid(tid) != uuid.UUID(int=0):
                topic.topic_id = _as_uuid(tid)
            self._by_id[topic.topic_id] = topic
            for ps in ts.get("partition_states") or []:
                self._apply_partition(topic, ps)

    def _apply_partition(self, topic: TopicInfo, ps: dict) -> None:
        p = ps["partition_index"]
        if ps["leader"] == -2:  # LeaderDuringDelete: the topic is being deleted
            topic.partitions.pop(p, None)
            if not topic.partitions:
                self.topics.pop(topic.name, None)
            return
        topic.partitions[p] = PartitionInfo(
            topic=topic.name,
            partition=p,
            leader=ps["leader"],
            leader_epoch=ps["leader_epoch"],
            isr=list(ps["isr"]),
            replicas=list(ps["replicas"]),
            offline_replicas=list(ps.get("offline_replicas") or []),
            partition_epoch=ps.get("zk_version", 0),
            controller_epoch=ps.get("controller_epoch", 0),
        )

    def remove_topic(self, name: str) -> None:
        self.version += 1
        self.topics.pop(name, None)

    # -- queries -------------------------------------------------------------------
    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        t = self.topics.get(topic)
        return t.partitions.get(partition) if t else None

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        """One lookup, not a scan: clients name any number of topic ids per request. The
        index is checked against `topics` (the source of truth), and rebuilt when they
        differ in size (a topic removed, or entered without update())."""
        t = self._by_id.get(topic_id)
        if (t is None or self.topics.get(t.name) is not t) and len(self._by_id) != len(self.topics):
            self._by_id = {t.topic_id: t for t in self.topics.values()}
            t = self._by_id.get(topic_id)
        return t if t is not None and t.topic_id == topic_id and self.topics.get(t.name) is t else None

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return self.brokers.get(broker_id)

    def note_live_leaders(self, leaders: list[dict]) -> None:
        """LeaderAndIsr's live_leaders (broker_id, host_name, port)."""
        for ld in leaders:
            self.live_leaders[ld["broker_id"]] = (ld["host_name"], ld["port"])

    def replica_endpoint(self, broker_id: int) -> tuple[str, int] | None:
        """Where to fetch from a leader: the UpdateMetadata view, else LeaderAndIsr's."""
        info = self.brokers.get(broker_id)
        return (info.host, info.port) if info is not None else self.live_leaders.get(broker_id)


def _as_uuid(value: object) -> uuid.UUID:
    if value is None:
        return uuid.UUID(int=0)
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, (bytes, bytearray)):
        return uuid.UUID(bytes=bytes(value))
    return uuid.UUID(str(value))
