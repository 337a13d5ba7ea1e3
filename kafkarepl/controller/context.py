"""The active controller's in-memory view of the cluster (a cache of ZooKeeper).

Only the controller's event task mutates it, always right after the matching
ZooKeeper write succeeded, so it never runs ahead of ZooKeeper.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from kafkarepl.zk.znodes import BrokerInfo, PartitionState, TopicAssignment

TopicPartition = tuple[str, int]


@dataclass
class TopicDeletion:
    """Progress of deleting one topic: which replicas have confirmed StopReplica(delete)."""

    pending: set[tuple[int, int]] = field(default_factory=set)  # (partition, broker) in flight
    done: set[tuple[int, int]] = field(default_factory=set)
    ineligible: set[tuple[int, int]] = field(default_factory=set)  # broker down: retry later


@dataclass
class ControllerMetrics:
    active_controller: int = 0
    controller_epoch: int = 0
    offline_partitions: int = 0
    preferred_replica_imbalance: int = 0
    global_topic_count: int = 0
    global_partition_count: int = 0
    unclean_elections: int = 0
    leader_elections: int = 0
    leader_election_time_ms_total: float = 0.0
    leader_election_time_ms_last: float = 0.0
    topics_to_delete: int = 0
    reassigning_partitions: int = 0

    def as_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


@dataclass
class ControllerContext:
    live: dict[int, BrokerInfo] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    topics: dict[str, TopicAssignment] = field(default_factory=dict)
    states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    deleting: dict[str, TopicDeletion] = field(default_factory=dict)
    reassigning: dict[TopicPartition, list[int]] = field(default_factory=dict)  # target replicas
    reassign_origin: dict[TopicPartition, list[int]] = field(default_factory=dict)
    reassign_from_znode: set[TopicPartition] = field(default_factory=set)
    # Replicas on failed log dirs of live brokers (KIP-112: learnt from LeaderAndIsr
    # answers of KAFKA_STORAGE_ERROR); forgotten when the broker restarts.
    offline_replicas: dict[int, set[TopicPartition]] = field(default_factory=dict)

    # --- brokers ---------------------------------------------------------------------

    @property
    def live_ids(self) -> set[int]:
        return set(self.live)

    @property
    def electable_ids(self) -> set[int]:
        """Brokers that may lead: live and not in controlled shutdown."""
        return set(self.live) - self.shutting_down

    def usable_for(self, tp: TopicPartition, brokers: set[int]) -> set[int]:
        """`brokers` (live, or electable) less those whose replica of `tp` is on a failed
        log dir: as Kafka's isReplicaOnline, every election and ISR change counts them
        out (elected, such a replica would only answer KAFKA_STORAGE_ERROR)."""
        if not self.offline_replicas:
            return brokers
        return {b for b in brokers if tp not in self.offline_replicas.get(b, ())}

    def broker_epoch(self, broker_id: int) -> int:
        info = self.live.get(broker_id)
        return info.epoch if info else -1

    # --- partitions ------------------------------------------------------------------

    def replicas(self, tp: TopicPartition) -> list[int]:
        topic = self.topics.get(tp[0])
        return list(topic.partitions.get(tp[1], [])) if topic else []

    def all_partitions(self) -> list[TopicPartition]:
        return [(t, p) for t, ta in self.topics.items() for p in ta.partitions]

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        ta = self.topics.get(topic)
        return [(topic, p) for p in sorted(ta.partitions)] if ta else []

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [
            (t, p)
            for t, ta in self.topics.items()
            for p, r in ta.partitions.items()
            if broker_id in r
        ]

    def partitions_by_broker(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[int, list[TopicPartition]]:
        out: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp in partitions:
            for b in self.replicas(tp):
                out[b].append(tp)
        return out

    def is_deleting(self, topic: str) -> bool:
        return topic in self.deleting

    def offline_partitions(self) -> list[TopicPartition]:
        live = self.live_ids
        return [
            tp
            for tp, st in self.states.items()
            if tp[0] not in self.deleting and (st.leader == -1 or st.leader not in live)
        ]

    def imbalanced_partitions(self) -> list[TopicPartition]:
        """Partitions not led by their preferred (first) replica."""
        out = []
        for tp, st in self.states.items():
            reps = self.replicas(tp)
            if reps and tp[0] not in self.deleting and st.leader != reps[0]:
                out.append(tp)
        return out

    def update_metrics(self, m: ControllerMetrics) -> None:
        # After every controller event: one pass, nothing copied (10,000 partitions).
        live, deleting, topics = self.live, self.deleting, self.topics
        offline = imbalanced = 0
        for (t, p), st in self.states.items():
            if t in deleting:
                continue
            if st.leader == -1 or st.leader not in live:
                offline += 1
            ta = topics.get(t)
            reps = ta.partitions.get(p) if ta is not None else None
            if reps and st.leader != reps[0]:
                imbalanced += 1
        m.global_topic_count = len(self.topics)
        m.global_partition_count = sum(len(t.partitions) for t in self.topics.values())
        m.offline_partitions = offline
        m.preferred_replica_imbalance = imbalanced
        m.topics_to_delete = len(self.deleting)
        m.reassigning_partitions = len(self.reassigning)

    def clear(self) -> None:
        self.live.clear()
        self.shutting_down.clear()
        self.topics.clear()
        self.states.clear()
        self.deleting.clear()
        self.reassigning.clear()
        self.reassign_origin.clear()
        self.reassign_from_znode.clear()
        self.offline_replicas.clear()
