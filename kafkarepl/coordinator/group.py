"""One consumer group of Kafka's classic group protocol, as a sans-I/O state machine.

States (Kafka's names): Empty -> PreparingRebalance -> CompletingRebalance -> Stable,
and Dead once the coordinator drops the group. A rebalance starts when a member joins,
leaves, changes its protocols, or misses its session timeout; it completes when every
known member has rejoined or the rebalance timeout expires (dynamic members that did not
rejoin are removed, static ones stay: KIP-345). The new generation's leader gets the
member list in its JoinGroup response and hands the assignments back in SyncGroup; the
coordinator then answers every member's SyncGroup with its own assignment.

JoinGroup and SyncGroup responses that must wait are *parked*: the call returns
`Parked(token)` and the response appears later in the shared `Outbox` as
(token, response). Time is the caller's `now_ms`; nothing here sleeps or does I/O.

Membership is persisted as Kafka's GroupMetadataManager does, so a new coordinator
resumes the group (kafkarepl/coordinator/group_records.py): the leader's assignment
before the group turns Stable, a static member's new id before its JoinGroup is
answered, and an Empty group after its last rebalance. The group asks for each write
with `Outbox.store` and learns its outcome through `store_done`; a failed write of an
assignment fails the SyncGroups and starts a rebalance, of a static member's new id
puts the old member back.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkarepl.coordinator.consumer_protocol import SUBSCRIPTION as _SUBSCRIPTION
from kafkarepl.coordinator.group_records import GroupSnapshot, MemberSnapshot
from kafkarepl.coordinator.offsets import OffsetAndMetadata
from kafkarepl.errors import ErrorCode


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class JoinResponse:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    # (member_id, group_instance_id, metadata): the leader's copy only, others get []
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass
class SyncResponse:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class Parked:
    """The response will come through the Outbox under this token."""

    token: int


@dataclass
class JoinRequest:
    member_id: str
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    group_instance_id: str | None = None
    client_host: str = ""
    require_known_member_id: bool = True  # JoinGroup v4+: MEMBER_ID_REQUIRED first


@dataclass(frozen=True)
class StoreRequest:
    """A group record to write: the snapshot (its state timestamp on the core's clock),
    or None for a tombstone. The writer reports back with `store_done(store_id, ...)`."""

    group_id: str
    store_id: int
    snapshot: GroupSnapshot | None


class Outbox:
    """Tokens for parked responses, and the responses completed since the last drain;
    group records to write, in the order they were asked for."""

    def __init__(self) -> None:
        self._next = 0
        self._done: list[tuple[int, Any]] = []
        self._stores: list[StoreRequest] = []

    def park(self) -> int:
        self._next += 1
        return self._next

    def complete(self, token: int, response: Any) -> None:
        self._done.append((token, response))

    def drain(self) -> list[tuple[int, Any]]:
        done, self._done = self._done, []
        return done

    def store(self, group_id: str, snapshot: GroupSnapshot | None) -> int:
        self._next += 1
        self._stores.append(StoreRequest(group_id, self._next, snapshot))
        return self._next

    def drain_stores(self) -> list[StoreRequest]:
        stores, self._stores = self._stores, []
        return stores


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_token: int | None = None
    sync_token: int | None = None
    heartbeat_deadline_ms: int = 0
    is_new: bool = True

    @property
    def awaiting_join(self) -> bool:
        return self.join_token is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        return next((m for n, m in self.protocols if n == protocol), b"")

    def keep_alive(self, now_ms: int) -> None:
        self.heartbeat_deadline_ms = now_ms + self.session_timeout_ms


@dataclass
class _StaticReplacement:
    """A static member's new id in a Stable group, answered once it is stored."""

    token: int
    old: Member
    new_id: str
    response: JoinResponse


@dataclass(frozen=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_metadata_bytes: int = 4096  # offset.metadata.max.bytes
    max_size: int = 2147483647  # group.max.size (Kafka's default: no limit)


class Group:
    def __init__(self, group_id: str, outbox: Outbox, config: GroupConfig,
                 new_member_id: Callable[[str], str]) -> None:
        self.group_id = group_id
        self.outbox = outbox
        self.config = config
        self._new_member_id = new_member_id
        self.state = GroupState.EMPTY
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, int] = {}  # MEMBER_ID_REQUIRED ids -> expiry
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        # When the group last became Empty (None: never had members here): offsets of an
        # Empty group expire offsets.retention.minutes after it (KIP-211).
        self.empty_since_ms: int | None = None
        self.rebalance_deadline_ms: int | None = None
        # Kafka's pending sync (KAFKA-12890): members of the new generation that have not
        # sent SyncGroup by the rebalance timeout after the join phase are removed, so a
        # leader that keeps heartbeating but never syncs cannot hold the group (and the
        # followers' parked SyncGroups) in CompletingRebalance for ever.
        self.pending_sync: set[str] = set()
        self.sync_deadline_ms: int | None = None
        # Kafka's InitialDelayedJoin: a rebalance of an Empty group waits
        # group.initial.rebalance.delay.ms, again while members keep arriving, up to
        # the rebalance timeout, so a starting fleet lands in one generation.
        self._initial_delay_left_ms: int | None = None
        self._new_member_added = False
        self.persisted = False  # a record of the group is in the log (a tombstone owed when it goes)
        self._sync_store: int | None = None  # the leader's assignment being written
        self._pending_assignment: dict[str, bytes] = {}
        self._static_stores: dict[int, _StaticReplacement] = {}

    # -------------------------------------------------------------------- views -----
    @property
    def is_empty(self) -> bool:
        return not self.members and not self.pending_members

    def _rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def _all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members consume (their consumer protocol subscriptions, read as
        Kafka's ConsumerProtocol does: a newer version as the latest known); None when a
        member's cannot be read (then every topic counts as subscribed: never delete
        offsets in use)."""
        if not self.members:
            return set()
        if self.protocol_type != "consumer":
            return None
        topics: set[str] = set()
        for m in self.members.values():
            data = m.metadata(self.protocol_name) if self.protocol_name else (m.protocols[0][1] if m.protocols else b"")
            try:
                _, sub = _SUBSCRIPTION.read(bytes(data), exact=False, newer_as_latest=True)
            except ValueError:
                return None
            topics.update(sub["topics"])
        return topics

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Kafka's ClassicGroup.supportsProtocols: an Empty group takes any; otherwise the
        type must be the group's and one protocol every member's. By state, not members:
        a group whose members all left during a rebalance keeps its type until the
        rebalance completes (to Empty)."""
        names = {n for n, _ in protocols}
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and any(
            all(n in m.protocol_names() for m in self.members.values()) for n in names)

    def _common_protocols(self) -> set[str]:
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol among those every member
        supports; the most votes wins (ties: the first member's preference order)."""
        common = self._common_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(n for n in m.protocol_names() if n in common)
            votes[choice] = votes.get(choice, 0) + 1
        order = [n for n in next(iter(self.members.values())).protocol_names() if n in common]
        return max(order, key=lambda n: (votes.get(n, 0), -order.index(n)))

    def _validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's ClassicGroup.validateMember: a group.instance.id given must be known
        and name this member id, then the member must exist. The instance comes first: a
        static member whose id was replaced (its successor joined with the same instance
        id) learns FENCED_INSTANCE_ID and shuts down, where UNKNOWN_MEMBER_ID would make
        it rejoin and fence its successor in turn."""
        if instance_id is not None:
            known = self.static_members.get(instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        return ErrorCode.NONE if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    def _check_generation(self, member_id: str, instance_id: str | None, generation_id: int) -> ErrorCode:
        """The checks SyncGroup, Heartbeat and OffsetCommit share, in Kafka's order."""
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        err = self._validate_member(member_id, instance_id)
        if err:
            return err
        if generation_id != self.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def _current_join_response(self, m: Member) -> JoinResponse:
        members = self._member_list() if m.member_id == self.leader_id else []
        return JoinResponse(ErrorCode.NONE, m.member_id, self.generation_id, self.protocol_type,
                            self.protocol_name, self.leader_id or "", members)

    def _member_list(self) -> list[tuple[str, str | None, bytes]]:
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    # ---------------------------------------------------------------- JoinGroup -----
    def join(self, r: JoinRequest, now_ms: int) -> JoinResponse | Parked:
        if self.state is GroupState.DEAD:
            return JoinResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE, r.member_id)
        if not self.supports(r.protocol_type, r.protocols):
            return JoinResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, r.member_id)
        if not self._accepts(r.member_id):
            m = self.members.get(r.member_id)
            if m is not None:  # over the limit, e.g. lowered since: it leaves the group
                self._remove_member(m, ErrorCode.GROUP_MAX_SIZE_REACHED)
                self._after_removal(now_ms, True)
            self.pending_members.pop(r.member_id, None)
            return JoinResponse(ErrorCode.GROUP_MAX_SIZE_REACHED, "")
        if not r.member_id:
            return self._join_new(r, now_ms)
        return self._join_known(r, now_ms)

    def rebalance_if_over_max_size(self, now_ms: int) -> None:
        """A group loaded with more members than group.max.size (lowered since it was
        written) rebalances; the members rejoining past the limit are left out (Kafka's
        "Freshly-loaded group is over capacity")."""
        if len(self.members) > self.config.max_size and self.state in (
                GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now_ms)

    def _accepts(self, member_id: str) -> bool:
        """group.max.size, as Kafka's acceptJoiningMember: while a rebalance gathers its
        members, an existing member already rejoined, or anyone while fewer than the limit
        have (those rejoining last when the limit was lowered are the ones left out);
        otherwise a member, or anyone while the group is under the limit."""
        if self.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if self.state is GroupState.PREPARING_REBALANCE:
            m = self.members.get(member_id)
            if m is not None and m.awaiting_join:
                return True
            return sum(1 for x in self.members.values() if x.awaiting_join) < self.config.max_size
        return member_id in self.members or len(self.members) < self.config.max_size

    def _join_new(self, r: JoinRequest, now_ms: int) -> JoinResponse | Parked:
        member_id = self._new_member_id(r.client_id)
        if r.group_instance_id is not None:
            old = self.static_members.get(r.group_instance_id)
            if old is not None and old in self.members:
                return self._replace_static_member(self.members[old], member_id, r, now_ms)
            return self._add_member_and_rebalance(r, member_id, now_ms)
        if r.require_known_member_id:
            self.pending_members[member_id] = now_ms + r.session_timeout_ms
            return JoinResponse(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        return self._add_member_and_rebalance(r, member_id, now_ms)

    def _replace_static_member(self, old: Member, member_id: str, r: JoinRequest,
                                now_ms: int) -> JoinResponse | Parked:
        """A static member (group.instance.id) rejoining with a new member id, e.g. after
        a restart (KIP-345, Kafka's updateStaticMemberAndRebalance): the new id takes the
        old one's place and assignment, the old id is fenced. In a Stable group whose
        protocol would not change, that is all: no rebalance, the member gets the
        current generation and syncs its old assignment; the response names the
        leader as it was, so a rejoining leader does not reassign."""
        current_leader = self.leader_id or ""
        if old.join_token is not None:
            self.outbox.complete(old.join_token, JoinResponse(ErrorCode.FENCED_INSTANCE_ID, old.member_id))
        if old.sync_token is not None:
            self.outbox.complete(old.sync_token, SyncResponse(ErrorCode.FENCED_INSTANCE_ID))
        del self.members[old.member_id]
        if old.member_id in self.pending_sync:  # the new id owes the SyncGroup now
            self.pending_sync.discard(old.member_id)
            self.pending_sync.add(member_id)
        m = Member(member_id, r.group_instance_id, r.client_id, r.client_host, r.session_timeout_ms,
                   r.rebalance_timeout_ms, r.protocol_type, list(r.protocols), assignment=old.assignment,
                   is_new=False)
        m.keep_alive(now_ms)
        self.members[member_id] = m
        self.static_members[r.group_instance_id or ""] = member_id
        if self.leader_id == old.member_id:
            self.leader_id = member_id
        if self.state is GroupState.STABLE and self.select_protocol() == self.protocol_name:
            # Answered once the new id is stored: a coordinator taking over from the log
            # must not know only the old id, which would fence the live member.
            token = self.outbox.park()
            store_id = self._store(now_ms)
            self._static_stores[store_id] = _StaticReplacement(token, old, member_id, JoinResponse(
                ErrorCode.NONE, member_id, self.generation_id, self.protocol_type, self.protocol_name,
                current_leader, []))
            return Parked(token)
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now_ms)  # the protocol changes, or assignments are in flight
        m.join_token = self.outbox.park()
        parked = Parked(m.join_token)
        self.maybe_complete_join(now_ms)
        return parked

    def _join_known(self, r: JoinRequest, now_ms: int) -> JoinResponse | Parked:
        if r.member_id in self.pending_members:
            # A MEMBER_ID_REQUIRED id is never static (Kafka throws for one that claims to be).
            if r.group_instance_id is None:
                return self._add_member_and_rebalance(r, r.member_id, now_ms)
            return JoinResponse(ErrorCode.UNKNOWN_MEMBER_ID, r.member_id)
        err = self._validate_member(r.member_id, r.group_instance_id)
        if err:
            return JoinResponse(err, r.member_id)
        m = self.members[r.member_id]
        same = m.protocols == r.protocols and m.protocol_type == r.protocol_type
        if self.state is GroupState.PREPARING_REBALANCE:
            return self._update_member_and_park(m, r, now_ms)
        if self.state is GroupState.COMPLETING_REBALANCE:
            if same:  # the member lost our JoinGroup response: send it again
                return self._current_join_response(m)
            self._prepare_rebalance(now_ms)
            return self._update_member_and_park(m, r, now_ms)
        if self.state is GroupState.STABLE:
            if same and m.member_id != self.leader_id:
                return self._current_join_response(m)
            # The leader rejoins to reassign (e.g. subscribed topics changed): rebalance.
            self._prepare_rebalance(now_ms)
            return self._update_member_and_park(m, r, now_ms)
        return JoinResponse(ErrorCode.UNKNOWN_MEMBER_ID, r.member_id)

    def _update_member_and_park(self, m: Member, r: JoinRequest, now_ms: int) -> Parked:
        m.protocols, m.protocol_type = list(r.protocols), r.protocol_type
        m.session_timeout_ms, m.rebalance_timeout_ms = r.session_timeout_ms, r.rebalance_timeout_ms
        if m.join_token is not None:  # an older JoinGroup of this member still parked
            self.outbox.complete(m.join_token, JoinResponse(ErrorCode.REBALANCE_IN_PROGRESS, m.member_id))
        m.join_token = self.outbox.park()
        token = Parked(m.join_token)
        self.maybe_complete_join(now_ms)
        return token

    def _add_member_and_rebalance(self, r: JoinRequest, member_id: str, now_ms: int) -> Parked:
        self.pending_members.pop(member_id, None)
        m = Member(member_id, r.group_instance_id, r.client_id, r.client_host, r.session_timeout_ms,
                   r.rebalance_timeout_ms, r.protocol_type, list(r.protocols))
        m.join_token = self.outbox.park()
        parked = Parked(m.join_token)
        self.members[member_id] = m
        if r.group_instance_id is not None:
            self.static_members[r.group_instance_id] = member_id
        if self.leader_id is None:
            self.leader_id = member_id
        if len(self.members) == 1:  # the first member sets the type (Kafka's ClassicGroup.add)
            self.protocol_type = r.protocol_type
        if self.state is GroupState.PREPARING_REBALANCE and self._initial_delay_left_ms is not None:
            self._new_member_added = True
        self._prepare_rebalance(now_ms)
        self.maybe_complete_join(now_ms)
        return parked

    def _prepare_rebalance(self, now_ms: int) -> None:
        if self.state is GroupState.PREPARING_REBALANCE:
            return
        if self.state is GroupState.COMPLETING_REBALANCE:
            # Assignments of the aborted generation are void; waiting followers retry.
            for m in self.members.values():
                m.assignment = b""
                if m.sync_token is not None:
                    self._answer_sync(m, SyncResponse(ErrorCode.REBALANCE_IN_PROGRESS), now_ms)
        self.pending_sync.clear()
        self.sync_deadline_ms = None
        self._sync_store = None  # its outcome no longer matters
        self._pending_assignment = {}
        if self.state is GroupState.EMPTY:
            delay = self.config.initial_rebalance_delay_ms
            self._initial_delay_left_ms = max(self._rebalance_timeout_ms() - delay, 0)
            self._new_member_added = False
            self.rebalance_deadline_ms = now_ms + delay
        else:
            self.rebalance_deadline_ms = now_ms + self._rebalance_timeout_ms()
        self.state = GroupState.PREPARING_REBALANCE

    def maybe_complete_join(self, now_ms: int) -> None:
        """Finish the rebalance when everyone rejoined (or, in the initial delay, when
        the delay ran out with no newcomers)."""
        if self.state is not GroupState.PREPARING_REBALANCE:
            return
        if self._initial_delay_left_ms is not None:
            if self.rebalance_deadline_ms is not None and now_ms >= self.rebalance_deadline_ms:
                if self._new_member_added and self._initial_delay_left_ms > 0:
                    step = min(self.config.initial_rebalance_delay_ms, self._initial_delay_left_ms)
                    self._initial_delay_left_ms -= step
                    self._new_member_added = False
                    self.rebalance_deadline_ms = now_ms + step
                else:
                    self._complete_join(now_ms)
            return
        if self._all_joined() or (self.rebalance_deadline_ms is not None and now_ms >= self.rebalance_deadline_ms):
            self._complete_join(now_ms)

    def _complete_join(self, now_ms: int) -> None:
        # Dynamic members that did not rejoin go; static ones stay in the new generation
        # (KIP-345: a bouncing static member keeps its place, it has the rebalance
        # timeout again to sync before the pending-sync expiry removes it).
        for m in [m for m in self.members.values() if not m.awaiting_join and m.group_instance_id is None]:
            self._remove_member(m, ErrorCode.UNKNOWN_MEMBER_ID)
        if self.members and not self._elect_joined_leader():
            # Only static members that did not rejoin (Kafka: "could not complete
            # rebalance because no members rejoined"): wait another rebalance timeout,
            # their sessions expire meanwhile unless they come back.
            self.rebalance_deadline_ms = now_ms + self._rebalance_timeout_ms()
            return
        self._initial_delay_left_ms = None
        self._new_member_added = False
        self.rebalance_deadline_ms = None
        self.generation_id += 1
        if not self.members:
            self.state = GroupState.EMPTY
            self.empty_since_ms = now_ms
            self.protocol_name = None
            self.leader_id = None  # the protocol type stays (Kafka lists it as "consumer")
            self._store(now_ms)
            return
        self.protocol_name = self.select_protocol()
        self.protocol_type = next(iter(self.members.values())).protocol_type
        self.state = GroupState.COMPLETING_REBALANCE
        for m in self.members.values():
            token, m.join_token = m.join_token, None
            m.is_new = False
            m.keep_alive(now_ms)
            if token is not None:
                self.outbox.complete(token, self._current_join_response(m))
        self.pending_sync = set(self.members)
        self.sync_deadline_ms = now_ms + self._rebalance_timeout_ms()

    def _elect_joined_leader(self) -> bool:
        """Kafka's maybeElectNewJoinedLeader: the leader must be a member that rejoined;
        False when none did."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.awaiting_join:
            return True
        joined = next((mid for mid, m in self.members.items() if m.awaiting_join), None)
        if joined is None:
            return False
        self.leader_id = joined
        return True

    # ---------------------------------------------------------------- SyncGroup -----
    def sync(self, member_id: str, instance_id: str | None, generation_id: int,
             protocol_type: str | None, protocol_name: str | None,
             assignments: dict[str, bytes], now_ms: int) -> SyncResponse | Parked:
        err = self._check_generation(member_id, instance_id, generation_id)
        if err:
            return SyncResponse(err)
        m = self.members[member_id]
        # Kafka's isProtocolInconsistent: only when both sides name one (before the first
        # generation completes the group has no protocol name yet).
        if any(ours is not None and theirs is not None and ours != theirs for ours, theirs in
               ((self.protocol_type, protocol_type), (self.protocol_name, protocol_name))):
            return SyncResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if self.state is GroupState.PREPARING_REBALANCE:
            return SyncResponse(ErrorCode.REBALANCE_IN_PROGRESS)
        if self.state not in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            return SyncResponse(ErrorCode.UNKNOWN_MEMBER_ID)
        self.pending_sync.discard(member_id)
        if not self.pending_sync:
            self.sync_deadline_ms = None
        m.keep_alive(now_ms)
        if self.state is GroupState.STABLE:
            return SyncResponse(ErrorCode.NONE, self.protocol_type, self.protocol_name, m.assignment)
        if m.sync_token is not None:
            self.outbox.complete(m.sync_token, SyncResponse(ErrorCode.REBALANCE_IN_PROGRESS))
        m.sync_token = self.outbox.park()
        parked = Parked(m.sync_token)
        if member_id == self.leader_id and self._sync_store is None:
            # Stable once the assignment is in the log (Kafka's storeGroup in SyncGroup).
            self._pending_assignment = {mid: assignments.get(mid, b"") for mid in self.members}
            self._sync_store = self._store(now_ms, self._pending_assignment)
        return parked

    def _assignment_stored(self, error: ErrorCode, now_ms: int) -> None:
        assignment, self._pending_assignment = self._pending_assignment, {}
        self._sync_store = None
        if error:  # Kafka's resetAndPropagateAssignmentError, then a new rebalance
            for m in self.members.values():
                if m.sync_token is not None:
                    self._answer_sync(m, SyncResponse(error), now_ms)
            self._prepare_rebalance(now_ms)
            return
        for m in self.members.values():
            m.assignment = assignment.get(m.member_id, b"")
        self.state = GroupState.STABLE
        for m in self.members.values():
            if m.sync_token is not None:
                self._answer_sync(m, SyncResponse(ErrorCode.NONE, self.protocol_type, self.protocol_name,
                                                  m.assignment), now_ms)

    def _answer_sync(self, m: Member, response: SyncResponse, now_ms: int) -> None:
        """A parked SyncGroup answered while the member stays: its session restarts now
        (Kafka's propagateAssignment), as it could not heartbeat while it waited."""
        assert m.sync_token is not None
        self.outbox.complete(m.sync_token, response)
        m.sync_token = None
        m.keep_alive(now_ms)

    # ---------------------------------------------------------------- Heartbeat -----
    def heartbeat(self, member_id: str, instance_id: str | None, generation_id: int, now_ms: int) -> ErrorCode:
        err = self._check_generation(member_id, instance_id, generation_id)
        if err:
            return err
        m = self.members[member_id]
        m.keep_alive(now_ms)
        if self.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # --------------------------------------------------------------- LeaveGroup -----
    def leave(self, members: list[tuple[str, str | None]], now_ms: int) -> list[ErrorCode]:
        """Per (member_id, group_instance_id): NONE or why it could not leave."""
        out = []
        removed = False
        for member_id, instance_id in members:
            # Kafka's classicGroupLeave: no member id = an admin removing a static member
            # by instance id; a pending (MEMBER_ID_REQUIRED) id simply goes; else the
            # member is validated as for the other requests.
            if not member_id:
                member_id = self.static_members.get(instance_id, "") if instance_id is not None else ""
                err = ErrorCode.NONE if member_id else ErrorCode.UNKNOWN_MEMBER_ID
            elif member_id in self.pending_members:
                del self.pending_members[member_id]
                out.append(ErrorCode.NONE)
                continue
            else:
                err = self._validate_member(member_id, instance_id)
            if not err:
                self._remove_member(self.members[member_id], ErrorCode.UNKNOWN_MEMBER_ID)
                removed = True
            out.append(err)
        self._after_removal(now_ms, removed)
        return out

    def _remove_member(self, m: Member, error: ErrorCode) -> None:
        if m.join_token is not None:
            self.outbox.complete(m.join_token, JoinResponse(error, m.member_id))
        if m.sync_token is not None:
            self.outbox.complete(m.sync_token, SyncResponse(error))
        del self.members[m.member_id]
        self.pending_sync.discard(m.member_id)
        if m.group_instance_id is not None and self.static_members.get(m.group_instance_id) == m.member_id:
            del self.static_members[m.group_instance_id]
        if self.leader_id == m.member_id:
            waiting = [x.member_id for x in self.members.values() if x.awaiting_join]
            self.leader_id = waiting[0] if waiting else next(iter(self.members), None)

    def _after_removal(self, now_ms: int, member_removed: bool) -> None:
        # A pending member id never was part of a generation: dropping it only matters
        # to a rebalance waiting for it.
        if member_removed and self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now_ms)
        self.maybe_complete_join(now_ms)

    # ------------------------------------------------------------ OffsetCommit -----
    def validate_commit(self, member_id: str, instance_id: str | None, generation_id: int,
                        now_ms: int) -> ErrorCode:
        """Kafka's ClassicGroup.validateOffsetCommit."""
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and self.state is GroupState.EMPTY:
            # Outside group management (assign() with a group.id, the admin client): any
            # commit of an Empty group, whatever member or instance id it names.
            return ErrorCode.NONE
        if generation_id < 0 and not member_id and instance_id is None:
            return ErrorCode.UNKNOWN_MEMBER_ID  # not while the group has a generation going
        err = self._check_generation(member_id, instance_id, generation_id)
        if err:
            return err
        m = self.members[member_id]
        if self.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        m.keep_alive(now_ms)  # a commit proves the member alive, as a heartbeat does
        return ErrorCode.NONE

    # ------------------------------------------------------------------ timers -----
    def expire(self, now_ms: int) -> None:
        """Session expiry of members and pending member ids; rebalance and sync timeouts."""
        for mid, deadline in list(self.pending_members.items()):
            if now_ms >= deadline:
                del self.pending_members[mid]
        removed = False
        if self.sync_deadline_ms is not None and now_ms >= self.sync_deadline_ms:
            for mid in sorted(self.pending_sync):  # no SyncGroup by the rebalance timeout
                self._remove_member(self.members[mid], ErrorCode.UNKNOWN_MEMBER_ID)
                removed = True
            self.pending_sync.clear()
            self.sync_deadline_ms = None
        for m in list(self.members.values()):
            # A member whose JoinGroup/SyncGroup is parked is waiting on us, not dead:
            # the rebalance timeout bounds that wait instead.
            if m.join_token is None and m.sync_token is None and now_ms >= m.heartbeat_deadline_ms:
                self._remove_member(m, ErrorCode.UNKNOWN_MEMBER_ID)
                removed = True
        self._after_removal(now_ms, removed)

    def next_deadline(self) -> int | None:
        times = list(self.pending_members.values())
        times += [m.heartbeat_deadline_ms for m in self.members.values()
                  if m.join_token is None and m.sync_token is None]
        if self.state is GroupState.PREPARING_REBALANCE and self.rebalance_deadline_ms is not None:
            times.append(self.rebalance_deadline_ms)
        if self.sync_deadline_ms is not None:
            times.append(self.sync_deadline_ms)
        return min(times, default=None)

    # --------------------------------------------------------------- the log -----
    def _store(self, now_ms: int, assignments: dict[str, bytes] | None = None) -> int:
        """Ask for the group's record to be written (with `assignments` in place of the
        members' current ones); returns the store id `store_done` will name."""
        self.persisted = True
        return self.outbox.store(self.group_id, self.snapshot(now_ms, assignments))

    def snapshot(self, now_ms: int, assignments: dict[str, bytes] | None = None) -> GroupSnapshot:
        since = self.empty_since_ms if self.state is GroupState.EMPTY else now_ms
        return GroupSnapshot(
            self.protocol_type or "", self.generation_id, self.protocol_name, self.leader_id,
            -1 if since is None else since,
            tuple(MemberSnapshot(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                 m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata(self.protocol_name),
                                 m.assignment if assignments is None else assignments.get(m.member_id, b""))
                  for m in self.members.values()))

    def store_done(self, store_id: int, error: ErrorCode, now_ms: int) -> None:
        """The outcome of a write the group asked for (NONE: replicated)."""
        if store_id == self._sync_store and self.state is GroupState.COMPLETING_REBALANCE:
            self._assignment_stored(error, now_ms)
            return
        r = self._static_stores.pop(store_id, None)
        if r is None:
            return  # an Empty group's record, or an outcome overtaken by a rebalance
        if error and self.members.get(r.new_id) is not None and r.old.group_instance_id is not None \
                and self.static_members.get(r.old.group_instance_id) == r.new_id:
            # Kafka puts the old member back: the log still names it.
            new = self.members.pop(r.new_id)
            old = r.old
            old.join_token = old.sync_token = None
            old.keep_alive(now_ms)
            self.members[old.member_id] = old
            self.static_members[r.old.group_instance_id] = old.member_id
            if self.leader_id == new.member_id:
                self.leader_id = old.member_id
            if new.member_id in self.pending_sync:
                self.pending_sync.discard(new.member_id)
                self.pending_sync.add(old.member_id)
        self.outbox.complete(r.token, r.response if not error else JoinResponse(error, ""))

    def restore(self, snap: GroupSnapshot, now_ms: int, state_since_ms: int | None) -> None:
        """Take the group over from its record (Kafka's loadGroup): Stable with the
        stored members, their assignments and sessions starting now, or Empty."""
        self.generation_id = snap.generation_id
        self.protocol_type = snap.protocol_type or None
        self.protocol_name = snap.protocol_name
        self.members.clear()
        self.static_members.clear()
        for ms in snap.members:
            m = Member(ms.member_id, ms.group_instance_id, ms.client_id, ms.client_host, ms.session_timeout_ms,
                       ms.rebalance_timeout_ms, snap.protocol_type, [(snap.protocol_name or "", ms.subscription)],
                       assignment=ms.assignment, is_new=False)
            m.keep_alive(now_ms)
            self.members[m.member_id] = m
            if m.group_instance_id is not None:
                self.static_members[m.group_instance_id] = m.member_id
        if self.members:
            self.state = GroupState.STABLE
            self.leader_id = snap.leader_id if snap.leader_id in self.members else next(iter(self.members))
            self.empty_since_ms = None
        else:
            self.state = GroupState.EMPTY
            self.leader_id = self.protocol_name = None
            self.empty_since_ms = state_since_ms
        self.persisted = True

    # ------------------------------------------------------------------ unload -----
    def shut_down(self, error: ErrorCode) -> None:
        """The coordinator gave the group up: answer every parked request, become Dead."""
        for r in self._static_stores.values():
            self.outbox.complete(r.token, JoinResponse(error, r.new_id))
        self._static_stores.clear()
        for m in list(self.members.values()):
            if m.join_token is not None:
                self.outbox.complete(m.join_token, JoinResponse(error, m.member_id))
                m.join_token = None
            if m.sync_token is not None:
                self.outbox.complete(m.sync_token, SyncResponse(error))
                m.sync_token = None
        self.state = GroupState.DEAD

    # ---------------------------------------------------- protocol migration -----
    def hand_over(self, now_ms: int) -> bool:
        """Its members move to a KIP-848 group (an online upgrade): parked JoinGroup and
        SyncGroup requests learn REBALANCE_IN_PROGRESS and rejoin there; its committed
        offsets stay here, as every group's do. True when its record is in the log: the
        caller writes the tombstone with the new group's records (one batch, as Kafka)."""
        for m in self.members.values():
            if m.join_token is not None:
                self.outbox.complete(m.join_token, JoinResponse(ErrorCode.REBALANCE_IN_PROGRESS, m.member_id))
            if m.sync_token is not None:
                self.outbox.complete(m.sync_token, SyncResponse(ErrorCode.REBALANCE_IN_PROGRESS))
        for r in self._static_stores.values():
            self.outbox.complete(r.token, JoinResponse(ErrorCode.REBALANCE_IN_PROGRESS, r.new_id))
        self._static_stores.clear()
        self.members.clear()
        self.static_members.clear()
        self.pending_members.clear()
        self.pending_sync.clear()
        self.sync_deadline_ms = self.rebalance_deadline_ms = self._initial_delay_left_ms = None
        self._sync_store, self._pending_assignment = None, {}
        self.state, self.leader_id, self.protocol_name = GroupState.EMPTY, None, None
        self.empty_since_ms = now_ms
        persisted, self.persisted = self.persisted, False
        return persisted

    def take_over(self, members: list[Member], generation_id: int, now_ms: int, rebalance: bool = True) -> None:
        """Members of a KIP-848 group whose last consumer-protocol member left (an online
        downgrade): the group starts Stable at the KIP-848 group's epoch with their
        assignments, its record written, then rebalances unless told not to (Kafka's
        convertToClassicGroup: not when a static member's replacement downgraded it)."""
        self.members = {m.member_id: m for m in members}
        self.static_members = {m.group_instance_id: m.member_id for m in members if m.group_instance_id is not None}
        for m in members:
            m.is_new = False
            m.keep_alive(now_ms)
        self.generation_id = generation_id
        self.protocol_type = members[0].protocol_type
        self.leader_id = members[0].member_id
        self.protocol_name = self.select_protocol()
        self.state = GroupState.STABLE
        self.empty_since_ms = None
        self._store(now_ms)
        if rebalance:
            self._prepare_rebalance(now_ms)

    # ----------------------------------------------------------------- describe -----
    def describe(self) -> dict[str, Any]:
        stable = self.state is GroupState.STABLE
        return {
            "group_state": self.state.value,
            "protocol_type": self.protocol_type or "",
            "protocol_data": (self.protocol_name or "") if stable else "",
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata(self.protocol_name) if stable else b"",
                    "member_assignment": m.assignment if stable else b"",
                }
                for m in self.members.values()
            ],
        }
