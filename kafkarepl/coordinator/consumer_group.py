"""A consumer group of KIP-848's protocol (ConsumerGroupHeartbeat), sans-I/O.

The coordinator, not a member, assigns: each change of membership, subscriptions or the
subscribed topics' partitions bumps the *group epoch* and the assignor (assignors.py)
computes a new *target assignment* for that epoch. Each member then moves to its target in
steps (Kafka's CurrentAssignmentBuilder) so that no partition is ever held by two members:
it first gives up the partitions it must revoke, keeping its member epoch
(UNREVOKED_PARTITIONS); once its heartbeat no longer lists them it gets the target epoch
and the partitions already released by their previous holders (UNRELEASED_PARTITIONS while
some are still held elsewhere), then STABLE. A member that misses
`group.consumer.session.timeout.ms` of heartbeats, or does not revoke within its rebalance
timeout, is fenced: removed, its partitions free for the others.

What changed is also kept as Kafka's records (consumer_group_records.py): the caller
writes `pending_records()` to `__consumer_offsets` after each call, and a new coordinator
(after a failover) `restore`s the group from them, so its members carry on in their epochs.
Time is the caller's `now_ms`.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import re2  # type: ignore[import-untyped]

from kafkarepl.coordinator import consumer_group_records as records
from kafkarepl.coordinator import consumer_protocol
from kafkarepl.coordinator.assignors import ASSIGNORS, TopicPartitions, assign
from kafkarepl.coordinator.group import JoinRequest, JoinResponse, SyncResponse
from kafkarepl.errors import ErrorCode

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a client's bad pattern is its answer, not the broker's log

Assignment = dict[uuid.UUID, frozenset[int]]  # topic id -> partitions


@dataclass(frozen=True)
class TopicsView:
    """The cluster's topics as the coordinator's broker knows them; `version` changes
    whenever they do (the groups recheck their subscriptions only then)."""

    version: int
    by_name: Mapping[str, tuple[uuid.UUID, int]]  # topic name -> (topic id, partition count)

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
MAX_REGEX_LENGTH = 1000
# A member's subscription is one record (ConsumerGroupMemberMetadata), which must fit a
# __consumer_offsets batch (message.max.bytes, 1 MiB by default): larger, its write would
# fail at every heartbeat of the group. Kafka fails that member's heartbeat only
# (UNKNOWN_SERVER_ERROR, its state rolled back); so does this check, before any change.
MAX_SUBSCRIPTION_BYTES = 512 << 10


@dataclass(frozen=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45000  # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5000  # group.consumer.heartbeat.interval.ms
    max_size: int = 2**31 - 1  # group.consumer.max.size
    assignors: tuple[str, ...] = ASSIGNORS  # group.consumer.assignors, the first the default
    migration_policy: str = "bidirectional"  # group.consumer.migration.policy

    @property
    def upgrade_enabled(self) -> bool:
        return self.migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        return self.migration_policy in ("downgrade", "bidirectional")

MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


# as ConsumerGroupCurrentMemberAssignment's State holds them (Kafka's MemberState)
_STATE_CODES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1, MemberState.UNRELEASED_PARTITIONS: 2}
_STATES = {code: state for state, code in _STATE_CODES.items()}
_UNKNOWN = object()  # what the log holds for a record whose write failed


@dataclass
class HeartbeatRequest:
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None  # TopicPartitions: null when unchanged
    client_id: str = ""
    client_host: str = ""
    version: int = 0
    # under ACLs: whether the member's principal may DESCRIBE a topic (its regex resolves
    # to those only, as Kafka's since KAFKA-18813); None: every topic
    may_describe: Callable[[str], bool] | None = None


@dataclass
class HeartbeatResponse:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@dataclass(frozen=True)
class ClassicMetadata:
    """A member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) in a
    KIP-848 group: its session timeout and the protocols it joined with, in its order."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        return self.protocols[0][0]

    @property
    def version(self) -> int:
        """Its consumer protocol version: its assignments are written at it."""
        data = self.protocols[0][1]
        return int.from_bytes(data[:2], "big", signed=True) if len(data) >= 2 else 0


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed_names: frozenset[str] = frozenset()
    regex: str | None = None
    assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    session_deadline_ms: int = 0
    revocation_deadline_ms: int | None = None
    left: bool = False  # a static member that left with epoch -2: its partitions wait for its return
    classic: ClassicMetadata | None = None  # a member of the classic protocol (a group mid-migration)


def classic_protocols_bytes(protocols: Iterable[tuple[str, bytes]]) -> int:
    """What a classic member's protocols take in its ConsumerGroupMemberMetadata record."""
    return sum(len(name) + len(metadata) for name, metadata in protocols)


def _compile(regex: str) -> Any:
    """RE2, as Kafka's RE2J: linear time in the name matched, whatever the pattern (a
    backtracking engine would let a client's pattern hold the event loop)."""
    return re2.compile(regex, options=_RE2_OPTIONS)


def _subset(small: Assignment, big: Assignment) -> bool:
    return all(parts <= big.get(tid, frozenset()) for tid, parts in small.items())


def _overlaps(a: Assignment, b: Assignment) -> bool:
    return any(parts & b.get(tid, frozenset()) for tid, parts in a.items())


def _clean(a: Mapping[uuid.UUID, frozenset[int]]) -> Assignment:
    return {tid: parts for tid, parts in a.items() if parts}


def _metadata_value(m: ConsumerMember) -> dict[str, Any]:
    return {"instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
            "client_host": m.client_host, "subscribed_topic_names": sorted(m.subscribed_names),
            "subscribed_topic_regex": m.regex, "rebalance_timeout_ms": m.rebalance_timeout_ms,
            "server_assignor": m.assignor,
            "classic_member_metadata": None if m.classic is None else {
                "session_timeout_ms": m.classic.session_timeout_ms,
                "supported_protocols": [{"name": n, "metadata": md} for n, md in m.classic.protocols]}}


def _current_value(m: ConsumerMember) -> dict[str, Any]:
    """A static member that left is written at epoch -2, its epoch as the previous (Kafka's)."""
    return {"member_epoch": STATIC_LEAVE_EPOCH if m.left else m.epoch,
            "previous_member_epoch": m.epoch if m.left else m.previous_epoch,
            "state": _STATE_CODES[m.state], "assigned_partitions": records.topic_partitions(m.assigned),
            "partitions_pending_revocation": records.topic_partitions(m.pending_revocation)}


class ConsumerGroup:
    def __init__(self, group_id: str, config: ConsumerGroupConfig,
                 new_member_id: Callable[[], str] = lambda: str(uuid.uuid4())) -> None:
        self.group_id = group_id
        self.config = config
        self._new_member_id = new_member_id
        self.members: dict[str, ConsumerMember] = {}
        self.static: dict[str, str] = {}  # instance id -> member id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.target: dict[str, TopicPartitions] = {}  # member id -> partitions by topic name
        self.topics: dict[str, tuple[uuid.UUID, int]] = {}  # the subscribed topics at the group epoch
        self.owners: dict[tuple[uuid.UUID, int], str] = {}  # partition -> member holding it
        self._regex_cache: dict[str, tuple[int, frozenset[str]]] = {}  # regex -> (topics version, names)
        self._seen_version = -1  # of the TopicsView the target was last checked against
        self._may_describe: Callable[[str], bool] | None = None  # of the last heartbeat (regexes)
        self._subscriptions: dict[frozenset[str], frozenset[str]] = {}  # one object per distinct subscription
        # What the log holds (as last asked for): what each member's records (metadata,
        # target, current assignment) and the group's epochs were made of; members whose
        # records may have changed since.
        self._written_members: dict[str, tuple[Any, Any, Any]] = {}
        self._written_group: tuple[Any, Any] | None = None
        self._dirty: set[str] = set()
        self._all_dirty = False
        # members whose tombstones went to writes not yet known to have landed: if one
        # fails, the log may still hold them (tombstoned again by the next records)
        self._unconfirmed: set[str] = set()
        self._topic_ids = 0  # bumped when a target topic's id changes (its records name ids)

    # ------------------------------------------------------------------ state ------
    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(m.epoch != self.assignment_epoch or m.state is not MemberState.STABLE for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    @property
    def is_empty(self) -> bool:
        return not self.members

    def subscribed_topics(self) -> set[str]:
        """The topics the members subscribe to, by name or by regex (as last resolved)."""
        return set(self.topics) | {t for m in self.members.values() for t in m.subscribed_names}

    def next_deadline(self) -> int | None:
        deadlines = [m.session_deadline_ms for m in self.members.values()]
        deadlines += [m.revocation_deadline_ms for m in self.members.values() if m.revocation_deadline_ms is not None]
        return min(deadlines, default=None)

    # --------------------------------------------------------------- heartbeat -----
    @staticmethod
    def refusal(r: HeartbeatRequest, config: ConsumerGroupConfig) -> HeartbeatResponse | None:
        """The answer to a heartbeat refused whatever the group's state (Kafka checks the
        request before it looks at the group: nothing changes, no group converts)."""
        err = ConsumerGroup._invalid(r)
        if err:
            return HeartbeatResponse(ErrorCode.INVALID_REQUEST, err)
        if r.subscribed_topic_names is not None and (
                size := sum(len(t.encode()) for t in r.subscribed_topic_names)) > MAX_SUBSCRIPTION_BYTES:
            return HeartbeatResponse(ErrorCode.UNKNOWN_SERVER_ERROR,
                                     f"SubscribedTopicNames of {size} bytes do not fit the member's record "
                                     f"(at most {MAX_SUBSCRIPTION_BYTES} bytes).")
        if r.server_assignor is not None and r.server_assignor not in config.assignors:
            return HeartbeatResponse(ErrorCode.UNSUPPORTED_ASSIGNOR,
                                     f"ServerAssignor {r.server_assignor} is not supported. Supported assignors: "
                                     f"{', '.join(config.assignors)}.")
        return None

    def heartbeat(self, r: HeartbeatRequest, topics: TopicsView, now_ms: int) -> HeartbeatResponse:
        refused = self.refusal(r, self.config)
        if refused is not None:
            return refused
        self._may_describe = r.may_describe
        if r.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(r, topics, now_ms)
        member, error = self._member(r, now_ms)
        if member is None:
            assert error is not None
            return error
        bump = False
        if member.classic is not None and r.member_epoch == 0:  # a classic member's id, in this protocol now
            member.classic = None
        if r.member_epoch == 0 and member.member_id not in self.members:
            if len(self.members) >= self.config.max_size:
                return HeartbeatResponse(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                         f"The consumer group has reached its maximum capacity of "
                                         f"{self.config.max_size} members.")
            self.members[member.member_id] = member
            if member.instance_id is not None:
                self.static[member.instance_id] = member.member_id
            bump = True
        if r.subscribed_topic_names is not None and frozenset(r.subscribed_topic_names) != member.subscribed_names:
            names = frozenset(r.subscribed_topic_names)
            # members with the same subscription share one set: the assignors group them by it
            member.subscribed_names = self._subscriptions.setdefault(names, names)
            if len(self._subscriptions) > 2 * len(self.members) + 16:
                self._subscriptions = {m.subscribed_names: m.subscribed_names for m in self.members.values()}
            bump = True
        if r.subscribed_topic_regex is not None and (r.subscribed_topic_regex or None) != member.regex:
            member.regex = r.subscribed_topic_regex or None
            bump = True
        if r.server_assignor is not None:
            member.assignor = r.server_assignor  # used from the next rebalance, as Kafka
        if r.rack_id is not None:
            member.rack_id = r.rack_id  # no rebalance for it, as Kafka (no rack-aware assignor here)
        if r.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = r.rebalance_timeout_ms
        member.client_id, member.client_host = r.client_id, r.client_host
        member.session_deadline_ms = now_ms + self.config.session_timeout_ms
        self._refresh(topics, force=bump)
        before = dict(member.assigned)
        self._reconcile(member, r.owned, now_ms)
        full = (r.rebalance_timeout_ms != -1 and r.owned is not None
                and (r.subscribed_topic_names is not None or r.subscribed_topic_regex is not None))
        send = r.member_epoch == 0 or full or member.assigned != before
        self._dirty.add(member.member_id)
        return HeartbeatResponse(ErrorCode.NONE, None, member.member_id, member.epoch,
                                 self.config.heartbeat_interval_ms, dict(member.assigned) if send else None)

    @staticmethod
    def _invalid(r: HeartbeatRequest) -> str | None:
        """Kafka's request checks, in its order, with its messages."""
        if (r.version >= 1 or r.member_epoch > 0 or r.member_epoch == LEAVE_EPOCH) and not r.member_id.strip():
            return "MemberId can't be empty."
        if r.instance_id is not None and not r.instance_id.strip():
            return "InstanceId can't be empty."
        if r.rack_id is not None and not r.rack_id.strip():
            return "RackId can't be empty."
        if r.member_epoch == 0:
            if r.rebalance_timeout_ms == -1:
                return "RebalanceTimeoutMs must be provided in first request."
            if r.owned is None or r.owned:
                return "TopicPartitions must be empty when (re-)joining."
            if r.subscribed_topic_names is None and r.subscribed_topic_regex is None:
                return "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
        elif r.member_epoch == STATIC_LEAVE_EPOCH and r.instance_id is None:
            return "InstanceId can't be null."
        elif r.member_epoch < STATIC_LEAVE_EPOCH:
            return "MemberEpoch is invalid."
        if r.subscribed_topic_regex:
            if len(r.subscribed_topic_regex) > MAX_REGEX_LENGTH:
                return f"SubscribedTopicRegex is longer than {MAX_REGEX_LENGTH} characters."
            try:
                _compile(r.subscribed_topic_regex)
            except re2.error as exc:
                return f"SubscribedTopicRegex `{r.subscribed_topic_regex}` is not a valid regular expression: {exc}."
        return None

    def _member(self, r: HeartbeatRequest, now_ms: int) -> tuple[ConsumerMember | None, HeartbeatResponse | None]:
        """The member the heartbeat is from (a new one on joining), or the error to answer."""
        if r.instance_id is not None:
            current_id = self.static.get(r.instance_id)
            current = self.members.get(current_id) if current_id else None
            if r.member_epoch == 0:
                other = self.members.get(r.member_id) if r.member_id else None
                if other is not None and other is not current:
                    # another member's id (its instance's or none): taking it would leave that
                    # member's partitions held in the owners index by an object out of the group
                    return None, HeartbeatResponse(ErrorCode.INVALID_REQUEST,
                                                   f"MemberId {r.member_id} belongs to another member of the "
                                                   f"group than instance {r.instance_id}.")
                if current is not None and current.member_id != r.member_id:
                    if not current.left:
                        return None, HeartbeatResponse(ErrorCode.UNRELEASED_INSTANCE_ID,
                                                       f"Static member {current.member_id} with instance id "
                                                       f"{r.instance_id} is not released yet.")
                    # the same instance back: it takes the old member's place, epoch and
                    # partitions, without a rebalance (KIP-345 as Kafka's new protocol)
                    self._replace_static(current, r.member_id or self._new_member_id())
                    return current, None
                if current is not None:
                    current.left = False
                    return current, None
                return self._new_member(r, now_ms), None
            if current is None or current.member_id != r.member_id:
                if r.member_id in self.members:
                    return None, HeartbeatResponse(ErrorCode.FENCED_INSTANCE_ID,
                                                   f"Static member {r.member_id} with instance id {r.instance_id} "
                                                   "was fenced by another member.")
                return None, HeartbeatResponse(ErrorCode.UNKNOWN_MEMBER_ID,
                                               f"Member {r.member_id} is not a member of group {self.group_id}.")
            return (current, None) if (err := self._epoch_error(current, r)) is None else (None, err)
        member = self.members.get(r.member_id) if r.member_id else None
        if member is None:
            if r.member_epoch != 0:
                return None, HeartbeatResponse(ErrorCode.UNKNOWN_MEMBER_ID,
                                               f"Member {r.member_id} is not a member of group {self.group_id}.")
            return self._new_member(r, now_ms), None
        if r.member_epoch == 0:
            return member, None  # a rejoin of a member still known: it gets its partitions again
        return (member, None) if (err := self._epoch_error(member, r)) is None else (None, err)

    def _replace_static(self, current: ConsumerMember, new_id: str) -> None:
        """The same instance back under `new_id`: it takes the old member's place, epoch,
        partitions and target; the old id's records go."""
        del self.members[current.member_id]
        self._dirty.add(current.member_id)
        self._hold(new_id, current.assigned)
        self._hold(new_id, current.pending_revocation)
        if current.member_id in self.target:
            self.target[new_id] = self.target.pop(current.member_id)
        current.member_id, current.left = new_id, False
        self.members[new_id] = current
        assert current.instance_id is not None
        self.static[current.instance_id] = new_id

    def _new_member(self, r: HeartbeatRequest, now_ms: int) -> ConsumerMember:
        return ConsumerMember(r.member_id or self._new_member_id(), r.instance_id, r.rack_id, r.client_id,
                              r.client_host, r.rebalance_timeout_ms, session_deadline_ms=now_ms)

    @staticmethod
    def _epoch_error(member: ConsumerMember, r: HeartbeatRequest) -> HeartbeatResponse | None:
        """FENCED_MEMBER_EPOCH unless the member is at its epoch, or at the previous one
        (the answer that moved it on was lost) owning nothing it no longer has."""
        if r.member_epoch == member.epoch:
            return None
        if (r.member_epoch < member.epoch and r.member_epoch == member.previous_epoch
                and r.owned is not None and _subset(r.owned, member.assigned)):
            return None
        return HeartbeatResponse(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The consumer group member has a {'greater' if r.member_epoch > member.epoch else 'smaller'}"
                                 f" member epoch ({r.member_epoch}) than the one known by the group coordinator "
                                 f"({member.epoch}). The member must abandon all its partitions and rejoin.")

    def _leave(self, r: HeartbeatRequest, topics: TopicsView, now_ms: int) -> HeartbeatResponse:
        member = self.members.get(r.member_id)
        if r.instance_id is not None:
            current_id = self.static.get(r.instance_id)
            if current_id is None:
                return HeartbeatResponse(ErrorCode.UNKNOWN_MEMBER_ID,
                                         f"Instance id {r.instance_id} is unknown.")
            if current_id != r.member_id:
                return HeartbeatResponse(ErrorCode.FENCED_INSTANCE_ID,
                                         f"Static member {r.member_id} with instance id {r.instance_id} "
                                         "was fenced by another member.")
        if member is None:
            return HeartbeatResponse(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Member {r.member_id} is not a member of group {self.group_id}.")
        if r.member_epoch == STATIC_LEAVE_EPOCH:
            member.left = True  # keeps its partitions until it returns or its session ends
            member.session_deadline_ms = now_ms + self.config.session_timeout_ms
            # those it was revoking are released (it consumes nothing now), as Kafka
            self._release(member.member_id, member.pending_revocation)
            if member.state is MemberState.UNREVOKED_PARTITIONS:  # reconciled again when it returns
                member.state = MemberState.UNRELEASED_PARTITIONS
            member.pending_revocation, member.revocation_deadline_ms = {}, None
            self._dirty.add(member.member_id)
        else:
            self.remove(member.member_id, topics)
        return HeartbeatResponse(ErrorCode.NONE, None, r.member_id, r.member_epoch, 0)

    def remove(self, member_id: str, topics: TopicsView | None) -> None:
        """The member left or was fenced: its partitions are free, the group rebalances
        (`topics` None: over the topics of the last assignment)."""
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self._dirty.add(member_id)
        if member.instance_id is not None and self.static.get(member.instance_id) == member_id:
            del self.static[member.instance_id]
        self._release(member_id, member.assigned)
        self._release(member_id, member.pending_revocation)
        self.target.pop(member_id, None)
        self._refresh(topics if topics is not None else self.topics_view(), force=True)

    def topics_view(self) -> TopicsView:
        """The topics as of the last assignment (for changes made without the broker's)."""
        return TopicsView(self._seen_version, self.topics)

    def _release(self, member_id: str, partitions: Assignment) -> None:
        """The member no longer holds `partitions`: each is free for its next owner
        (unless another member holds it already)."""
        owners = self.owners
        for tid, parts in partitions.items():
            for p in parts:
                if owners.get((tid, p)) == member_id:
                    del owners[(tid, p)]

    def _hold(self, member_id: str, partitions: Assignment) -> None:
        for tid, parts in partitions.items():
            for p in parts:
                self.owners[(tid, p)] = member_id

    # ------------------------------------------- classic members (migration) -----
    # A group converted from the classic protocol keeps its classic members until they
    # move over (a rolling upgrade): Kafka's GroupMetadataManager serves their JoinGroup,
    # SyncGroup, Heartbeat and LeaveGroup from the KIP-848 group. A JoinGroup is their
    # heartbeat with a full subscription: it reconciles them one step and its generation
    # is their member epoch; a Heartbeat answers REBALANCE_IN_PROGRESS when they have a
    # step to take (so they rejoin); SyncGroup hands them their current partitions.

    def _session_timeout_ms(self, m: ConsumerMember) -> int:
        return m.classic.session_timeout_ms if m.classic is not None else self.config.session_timeout_ms

    def all_classic(self) -> bool:
        """Whether every member speaks the classic protocol."""
        return all(m.classic is not None for m in self.members.values())

    def _supports_classic(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Kafka's ConsumerGroup.supportsClassicProtocols: the consumer type, and (with
        classic members) one protocol name every one of them has."""
        if protocol_type != consumer_protocol.PROTOCOL_TYPE or not protocols:
            return False
        classic = [m.classic for m in self.members.values() if m.classic is not None]
        names = {n for n, _ in protocols}
        return not classic or any(all(n in {p for p, _ in c.protocols} for c in classic) for n in names)

    def _classic_member(self, member_id: str, instance_id: str | None) -> tuple[ConsumerMember | None, ErrorCode]:
        """The classic member a Sync/Heartbeat/Leave names, Kafka's validateConsumerGroupMember
        then throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is not None:
            current = self.members.get(self.static.get(instance_id, ""))
            if current is None:
                return None, ErrorCode.UNKNOWN_MEMBER_ID
            if member_id and current.member_id != member_id:
                return None, ErrorCode.FENCED_INSTANCE_ID
            member: ConsumerMember | None = current
        else:
            member = self.members.get(member_id)
        if member is None or member.classic is None:
            return None, ErrorCode.UNKNOWN_MEMBER_ID
        return member, ErrorCode.NONE

    def topic_names(self) -> dict[uuid.UUID, str]:
        """Topic id -> name, of the topics of the last assignment."""
        return {tid: name for name, (tid, _n) in self.topics.items()}

    def adopt(self, members: list[tuple[ConsumerMember, TopicPartitions]], epoch: int, topics: TopicsView) -> None:
        """The members of a classic group converted to this one (group_conversion.py),
        each with its target: the group at `epoch`, all of it to be written."""
        self.group_epoch = self.assignment_epoch = epoch
        for m, target in members:
            m.subscribed_names = self._subscriptions.setdefault(m.subscribed_names, m.subscribed_names)
            self.members[m.member_id] = m
            if m.instance_id is not None:
                self.static[m.instance_id] = m.member_id
            self._hold(m.member_id, m.assigned)
            self.target[m.member_id] = target
        self.topics = {t: topics.by_name[t] for goal in self.target.values() for t in goal}
        self._seen_version = topics.version
        self._all_dirty = True

    def classic_join(self, r: JoinRequest, topics: TopicsView, now_ms: int) -> JoinResponse:
        member_id = r.member_id or self._new_member_id()
        known = r.member_id in self.members or (r.group_instance_id is not None and r.group_instance_id in self.static)
        if len(self.members) >= self.config.max_size and not known:
            return JoinResponse(ErrorCode.GROUP_MAX_SIZE_REACHED, r.member_id)
        if not self._supports_classic(r.protocol_type, r.protocols):
            return JoinResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, r.member_id)
        if not r.member_id and r.group_instance_id is None and r.require_known_member_id:
            return JoinResponse(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        if classic_protocols_bytes(r.protocols) > MAX_SUBSCRIPTION_BYTES:  # its record must fit a batch
            return JoinResponse(ErrorCode.UNKNOWN_SERVER_ERROR, r.member_id)
        try:
            sub = consumer_protocol.read_subscription(r.protocols[0][1])
        except ValueError:
            return JoinResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, r.member_id)
        bump = False
        if r.group_instance_id is not None:
            current = self.members.get(self.static.get(r.group_instance_id, ""))
            if current is not None and r.member_id and current.member_id != r.member_id:
                return JoinResponse(ErrorCode.FENCED_INSTANCE_ID, r.member_id)
            if current is not None and current.member_id != member_id:
                # a static member restarted: the new id takes its place and partitions (KIP-345)
                self._replace_static(current, member_id)
                current.classic = ClassicMetadata(r.session_timeout_ms, tuple(r.protocols))  # whatever it was
        member = self.members.get(member_id)
        if member is not None and member.classic is None:  # a consumer-protocol member's id
            return JoinResponse(ErrorCode.UNKNOWN_MEMBER_ID, r.member_id)
        if member is None:
            member = ConsumerMember(member_id, r.group_instance_id, sub.rack_id, r.client_id, r.client_host,
                                    r.rebalance_timeout_ms, epoch=0)
            self.members[member_id] = member
            if r.group_instance_id is not None:
                self.static[r.group_instance_id] = member_id
            bump = True
        names = frozenset(sub.topics)
        if names != member.subscribed_names:
            member.subscribed_names = self._subscriptions.setdefault(names, names)
            bump = True
        member.rack_id = sub.rack_id
        member.rebalance_timeout_ms = r.rebalance_timeout_ms
        member.client_id, member.client_host = r.client_id, r.client_host
        member.assignor = None
        member.classic = ClassicMetadata(r.session_timeout_ms, tuple(r.protocols))
        member.session_deadline_ms = now_ms + r.session_timeout_ms
        self._refresh(topics, force=bump)
        # what it says it owns: an eager member (and a v0 subscription) owns nothing now
        owned = {topics.by_name[t][0]: ps for t, ps in sub.owned.items() if t in topics.by_name}
        if member.state is not MemberState.UNREVOKED_PARTITIONS:
            member.revocation_deadline_ms = None  # it rejoined as asked
        self._reconcile(member, owned, now_ms)
        if member.revocation_deadline_ms is None:  # Kafka's sync timeout: SyncGroup in time
            member.revocation_deadline_ms = now_ms + max(0, member.rebalance_timeout_ms)
        self._dirty.add(member_id)
        return JoinResponse(ErrorCode.NONE, member_id, member.epoch, consumer_protocol.PROTOCOL_TYPE,
                            member.classic.protocol_name, "", [])

    def classic_sync(self, member_id: str, instance_id: str | None, generation_id: int,
                     protocol_type: str | None, protocol_name: str | None, now_ms: int) -> SyncResponse:
        member, err = self._classic_member(member_id, instance_id)
        if member is None:
            return SyncResponse(err)
        assert member.classic is not None
        if generation_id != member.epoch:
            return SyncResponse(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != consumer_protocol.PROTOCOL_TYPE) or (
                protocol_name is not None and protocol_name != member.classic.protocol_name):
            return SyncResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        # a newer group epoch: it must rejoin first, unless it rejoined already and has
        # partitions to give up (it learns which from this assignment)
        if self.group_epoch > member.epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            return SyncResponse(ErrorCode.REBALANCE_IN_PROGRESS)
        member.session_deadline_ms = now_ms + member.classic.session_timeout_ms
        if member.state is not MemberState.UNREVOKED_PARTITIONS:
            member.revocation_deadline_ms = None  # synced in time (a revocation keeps its deadline)
        names = self.topic_names()
        assigned = {names[tid]: ps for tid, ps in member.assigned.items() if tid in names}
        return SyncResponse(ErrorCode.NONE, protocol_type, protocol_name,
                            consumer_protocol.write_assignment(member.classic.version, assigned))

    def classic_heartbeat(self, member_id: str, instance_id: str | None, generation_id: int,
                          now_ms: int) -> ErrorCode:
        member, err = self._classic_member(member_id, instance_id)
        if member is None:
            return err
        assert member.classic is not None
        if generation_id != member.epoch:
            return ErrorCode.ILLEGAL_GENERATION
        member.session_deadline_ms = now_ms + member.classic.session_timeout_ms
        if (member.epoch < self.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS
                or (member.state is MemberState.UNRELEASED_PARTITIONS and not self._still_held(member))):
            if member.revocation_deadline_ms is None:  # Kafka's join timeout: rejoin in time
                member.revocation_deadline_ms = now_ms + max(0, member.rebalance_timeout_ms)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _still_held(self, member: ConsumerMember) -> bool:
        """Whether a partition of its target is still held by another member."""
        mid = member.member_id
        return any(self.owners.get((tid, p), mid) != mid for tid, parts in self._target_of(mid).items()
                   for p in parts - member.assigned.get(tid, frozenset()))

    def classic_leave(self, members: list[tuple[str, str | None]], topics: TopicsView) -> list[ErrorCode]:
        out = []
        for member_id, instance_id in members:
            member, err = self._classic_member(member_id, instance_id)
            if member is not None:
                self.remove(member.member_id, topics)
            out.append(err)
        return out

    # ------------------------------------------------------------ assignment ------
    def _regex_topics(self, regex: str, topics: TopicsView) -> frozenset[str]:
        hit = self._regex_cache.get(regex)
        if hit is not None and hit[0] == topics.version:
            return hit[1]
        pattern = _compile(regex)
        names = frozenset(t for t in topics.by_name if not t.startswith("__") and pattern.fullmatch(t))
        if self._may_describe is not None:  # resolved as the heartbeat that asked may see them
            names = frozenset(filter(self._may_describe, names))
        self._regex_cache[regex] = (topics.version, names)
        return names

    def _refresh(self, topics: TopicsView, force: bool) -> None:
        """A new group epoch and target assignment when the membership changed (`force`)
        or the subscribed topics did (created, deleted, more partitions)."""
        if not force and topics.version == self._seen_version:
            return
        self._seen_version = topics.version
        # members with the same subscription get the same set object (the assignors group
        # members by it: an equal but distinct set costs a compare of all its topics)
        unions: dict[tuple[int, str], frozenset[str]] = {}
        subscriptions = {}
        for mid, m in self.members.items():
            sub = m.subscribed_names
            if m.regex:
                key = (id(sub), m.regex)
                if (union := unions.get(key)) is None:
                    union = unions[key] = sub | self._regex_topics(m.regex, topics)
                sub = union
            subscriptions[mid] = sub
        self._regex_cache = {m.regex: self._regex_cache[m.regex] for m in self.members.values()
                             if m.regex in self._regex_cache}
        # set operations (in C): a member may name any number of topics
        distinct = {id(sub): sub for sub in subscriptions.values()}.values()  # members share their sets
        wanted = frozenset().union(*distinct) & topics.by_name.keys()
        seen = {t: topics.by_name[t] for t in wanted}
        if not force and seen == self.topics:
            return
        if any(self.topics.get(t, (tid,))[0] != tid for t, (tid, _n) in seen.items()):
            # a topic deleted and created again: targets are kept by name, their records
            # by topic id, so every member's is written again even if its partitions stay
            self._topic_ids += 1
        self.topics = seen
        self.group_epoch += 1
        self.target = assign(self.assignor(), subscriptions, {t: n for t, (_tid, n) in seen.items()}, self.target)
        self.assignment_epoch = self.group_epoch
        self._all_dirty = True  # every member's target may have moved

    def assignor(self) -> str:
        """The members' most common ServerAssignor, else the default (Kafka's rule)."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.assignor:
                votes[m.assignor] = votes.get(m.assignor, 0) + 1
        return max(sorted(votes), key=lambda a: votes[a]) if votes else self.config.assignors[0]

    def _target_of(self, member_id: str) -> Assignment:
        return {self.topics[t][0]: parts for t, parts in self.target.get(member_id, {}).items() if t in self.topics}

    def _reconcile(self, m: ConsumerMember, owned: Assignment | None, now_ms: int) -> None:
        """Kafka's CurrentAssignmentBuilder: one step of the member towards its target."""
        if m.state is MemberState.UNREVOKED_PARTITIONS:
            if owned is None or _overlaps(owned, m.pending_revocation):
                return  # still revoking
        elif m.state is MemberState.STABLE and m.epoch == self.assignment_epoch:
            return
        target = self._target_of(m.member_id)
        kept: dict[uuid.UUID, frozenset[int]] = {}
        revoke: dict[uuid.UUID, frozenset[int]] = {}
        add: dict[uuid.UUID, frozenset[int]] = {}
        unreleased = False
        for tid in set(m.assigned) | set(target):
            have, want = m.assigned.get(tid, frozenset()), target.get(tid, frozenset())
            kept[tid] = have & want
            revoke[tid] = have - want
            free = frozenset(p for p in want - have if self.owners.get((tid, p), m.member_id) == m.member_id)
            unreleased |= len(free) < len(want - have)
            add[tid] = free
        self._release(m.member_id, m.pending_revocation)  # revoked now: no longer held
        m.pending_revocation = {}
        # revoked partitions the member says it no longer owns (a replaced static member,
        # a rejoin) need no wait for it; unreported ones might still be in use
        if any(revoke.values()) and (owned is None or _overlaps(owned, revoke)):
            m.state = MemberState.UNREVOKED_PARTITIONS
            m.assigned, m.pending_revocation = _clean(kept), _clean(revoke)
            m.revocation_deadline_ms = now_ms + max(0, m.rebalance_timeout_ms)
        else:
            self._release(m.member_id, revoke)
            m.previous_epoch, m.epoch = m.epoch, self.assignment_epoch
            m.assigned = _clean({tid: kept.get(tid, frozenset()) | add.get(tid, frozenset()) for tid in kept})
            m.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
            m.revocation_deadline_ms = None
        self._hold(m.member_id, m.assigned)
        self._hold(m.member_id, m.pending_revocation)

    # ----------------------------------------------------------------- records -----
    def pending_records(self) -> list[records.Record]:
        """The records of what changed since the last call, in Kafka's order: members'
        metadata and the group epoch, then the target assignment and its epoch, then the
        members' current assignments. Members gone get tombstones."""
        ids: Iterable[str]
        if self._all_dirty:
            ids = sorted(set(self.members) | set(self._written_members))
        else:
            ids = self._dirty if len(self._dirty) < 2 else sorted(self._dirty)
        self._dirty, self._all_dirty = set(), False
        if not ids and self._written_group is None and not self.group_epoch:
            return []  # a group no heartbeat joined yet has nothing to keep
        meta: list[records.Record] = []
        target: list[records.Record] = []
        current: list[records.Record] = []
        gid, encode = self.group_id, records.encode
        for mid in ids:
            m = self.members.get(mid)
            was = self._written_members.get(mid)
            if m is None:
                if was is not None:
                    del self._written_members[mid]
                    self._unconfirmed.add(mid)
                    current.append(encode(records.CURRENT_ASSIGNMENT, gid, mid, None))
                    target.append(encode(records.TARGET_ASSIGNMENT, gid, mid, None))
                    meta.append(encode(records.MEMBER_METADATA, gid, mid, None))
                continue
            # what each record is made of, by reference: a member's assignments and the
            # target's are replaced, never changed in place, so an unchanged member costs
            # a few identity checks (a stable heartbeat)
            now = ((m.instance_id, m.rack_id, m.client_id, m.client_host, m.subscribed_names, m.regex,
                    m.rebalance_timeout_ms, m.assignor, m.classic), (self.target.get(mid), self._topic_ids),
                   (m.epoch, m.previous_epoch, m.state, m.left, m.assigned, m.pending_revocation))
            if was == now:
                continue
            self._written_members[mid] = now
            if was is None or was[0] != now[0]:
                meta.append(encode(records.MEMBER_METADATA, gid, mid, _metadata_value(m)))
            if was is None or was[1] != now[1]:
                target.append(encode(records.TARGET_ASSIGNMENT, gid, mid, {
                    "topic_partitions": records.topic_partitions(self._target_of(mid))}))
            if was is None or was[2] != now[2]:
                current.append(encode(records.CURRENT_ASSIGNMENT, gid, mid, _current_value(m)))
        epochs = (self.group_epoch, self.assignment_epoch)
        was_group = self._written_group
        if was_group != epochs:
            self._written_group = epochs
            if was_group is None or was_group[0] != epochs[0]:
                meta.append(encode(records.GROUP_EPOCH, gid, None, {"epoch": self.group_epoch}))
            if was_group is None or was_group[1] != epochs[1]:
                target.append(encode(records.ASSIGNMENT_EPOCH, gid, None, {"assignment_epoch": self.assignment_epoch}))
        return meta + target + current

    def tombstones(self) -> list[records.Record]:
        """The tombstones of every record the group has in the log (it is being deleted)."""
        out = [records.encode(kind, self.group_id, mid, None)
               for mid in sorted(self._written_members.keys() | self._unconfirmed)
               for kind in (records.CURRENT_ASSIGNMENT, records.TARGET_ASSIGNMENT, records.MEMBER_METADATA)]
        if self._written_group is not None:
            out += [records.encode(kind, self.group_id, None, None)
                    for kind in (records.GROUP_EPOCH, records.ASSIGNMENT_EPOCH)]
        return out

    def write_failed(self) -> None:
        """A write of pending_records() failed: what the log holds of the group is not
        known, so the next records rewrite all of it (and tombstone what it wrote, the
        members tombstoned by unconfirmed writes included)."""
        self._written_members = dict.fromkeys(self._written_members.keys() | self._unconfirmed,
                                              (_UNKNOWN, _UNKNOWN, _UNKNOWN))
        if self._written_group is not None:
            self._written_group = (_UNKNOWN, _UNKNOWN)
        self._all_dirty = True

    def write_done(self) -> None:
        """Every record pending_records() returned so far is in the log."""
        self._unconfirmed.clear()

    def restore(self, loaded: records.LoadedConsumerGroup, topics: TopicsView | None, now_ms: int) -> None:
        """The group as its records left it (a new coordinator took its partition over):
        members keep their epochs and partitions, their sessions start now."""
        self.group_epoch = loaded.group_epoch or 0
        self.assignment_epoch = loaded.assignment_epoch
        names = {tid: name for name, (tid, _n) in topics.by_name.items()} if topics is not None else {}
        for mid, meta in loaded.members.items():
            cur = loaded.currents.get(mid, {})
            subscribed = frozenset(meta["subscribed_topic_names"])
            m = ConsumerMember(mid, meta["instance_id"], meta["rack_id"], meta["client_id"], meta["client_host"],
                               meta["rebalance_timeout_ms"],
                               subscribed_names=self._subscriptions.setdefault(subscribed, subscribed),
                               regex=meta["subscribed_topic_regex"], assignor=meta["server_assignor"])
            if (classic := meta.get("classic_member_metadata")) is not None and classic["supported_protocols"]:
                m.classic = ClassicMetadata(classic["session_timeout_ms"], tuple(
                    (p["name"], bytes(p["metadata"])) for p in classic["supported_protocols"]))
            epoch = cur.get("member_epoch", 0)
            m.left = epoch == STATIC_LEAVE_EPOCH
            m.epoch = cur.get("previous_member_epoch", -1) if m.left else epoch
            m.previous_epoch = -1 if m.left else cur.get("previous_member_epoch", -1)
            # a state a later version wrote: reconciled again at its next heartbeat
            m.state = _STATES.get(cur.get("state", 0), MemberState.UNRELEASED_PARTITIONS)
            m.assigned = records.assignment_of(cur.get("assigned_partitions", []))
            m.pending_revocation = records.assignment_of(cur.get("partitions_pending_revocation", []))
            m.session_deadline_ms = now_ms + self._session_timeout_ms(m)
            if m.state is MemberState.UNREVOKED_PARTITIONS:
                m.revocation_deadline_ms = now_ms + max(0, m.rebalance_timeout_ms)
            self.members[mid] = m
            if m.instance_id is not None:
                self.static[m.instance_id] = mid
            self._hold(mid, m.assigned)
            self._hold(mid, m.pending_revocation)
            goal = loaded.targets.get(mid, {})
            self.target[mid] = {names[tid]: parts for tid, parts in goal.items() if tid in names}
        # the topics of the target as they were when it was computed: every partition of a
        # subscribed topic is in someone's target, so their count is its highest + 1. The
        # first heartbeat's check finds them unchanged unless they changed meanwhile (more
        # partitions: then a new epoch, as Kafka's partition metadata record would say)
        counts: dict[str, int] = {}
        for by_name in self.target.values():
            for t, parts in by_name.items():
                if parts:
                    counts[t] = max(counts.get(t, 0), max(parts) + 1)
        self.topics = {t: (topics.by_name[t][0], n) for t, n in counts.items()} if topics else {}
        self._all_dirty = True
        self.pending_records()  # what the log holds: nothing to write

    # ------------------------------------------------------------------ timers -----
    def expire(self, now_ms: int) -> list[str]:
        """Members whose session ended, or that did not revoke in time, are fenced."""
        gone = [mid for mid, m in self.members.items()
                if m.session_deadline_ms <= now_ms
                or (m.revocation_deadline_ms is not None and m.revocation_deadline_ms <= now_ms)]
        for mid in gone:
            self.remove(mid, None)
        return gone

    # ----------------------------------------------------------------- offsets -----
    def commit_error(self, member_id: str, epoch: int, api_version: int = 9) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetCommit: a commit from outside the group
        (epoch -1, no member id) only while it is empty; else a member at its epoch, with
        OffsetCommit v9+ (the first to carry a member epoch; `api_version` 9 for
        TxnOffsetCommit, which Kafka does not hold to it)."""
        if epoch < 0 and not self.members:
            return ErrorCode.NONE
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.classic is not None:  # its generation is its member epoch
            return ErrorCode.NONE if epoch == member.epoch else ErrorCode.ILLEGAL_GENERATION
        if api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        return ErrorCode.NONE if epoch == member.epoch else ErrorCode.STALE_MEMBER_EPOCH

    def fetch_error(self, member_id: str | None, epoch: int) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetFetch: a fetch naming no member (an admin
        client, OffsetFetch before v9) is answered; a member's only at its epoch."""
        if member_id is None and epoch < 0:
            return ErrorCode.NONE
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE if epoch == member.epoch else ErrorCode.STALE_MEMBER_EPOCH

    # ---------------------------------------------------------------- describe -----
    def describe(self, names: Mapping[uuid.UUID, str]) -> dict[str, Any]:
        def parts(a: Assignment) -> list[dict[str, Any]]:
            return [{"topic_id": tid, "topic_name": names.get(tid, ""), "partitions": sorted(ps)}
                    for tid, ps in sorted(a.items(), key=lambda kv: names.get(kv[0], ""))]

        return {
            "group_state": self.state, "group_epoch": self.group_epoch, "assignment_epoch": self.assignment_epoch,
            "assignor_name": self.assignor(),
            "members": [{
                "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                "member_epoch": m.epoch, "client_id": m.client_id, "client_host": m.client_host,
                "subscribed_topic_names": sorted(m.subscribed_names), "subscribed_topic_regex": m.regex,
                "assignment": {"topic_partitions": parts(m.assigned)},
                "target_assignment": {"topic_partitions": parts(self._target_of(m.member_id))},
            } for m in sorted(self.members.values(), key=lambda m: m.member_id)],
        }
