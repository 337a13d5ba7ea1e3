"""The group coordinator of one broker, sans-I/O: the groups of the `__consumer_offsets`
partitions this broker leads, their committed offsets, and the timers of all of them.

The broker drives it (kafkarepl/server/group_coordinator.py): partition leadership
(begin_loading -> load(records) -> finish_loading; unload on losing it), the group
APIs, `poll(now_ms)` at `next_deadline()`, and `drain()` for parked JoinGroup/SyncGroup
responses completed by any of those calls. Offsets are committed in two steps:
`validate_commit` before the broker writes them to the log, `apply_commit` once the
write is replicated (acks=all), so the cache never holds an offset the log could lose.
Group records (membership) the groups ask for come out of `drain_stores()`; the
broker writes them in that order and reports each outcome with `store_done`. KIP-848
groups' records come out of `drain_writes()`, written in that order too; a heartbeat is
answered once its group's records are replicated, a failed write is reported with
`write_failed`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, overload

from kafkarepl.coordinator import consumer_group_records
from kafkarepl.coordinator.consumer_group import (
    LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerGroupConfig,
    HeartbeatRequest,
    HeartbeatResponse,
    TopicsView,
)
from kafkarepl.coordinator.group import (
    Group,
    GroupConfig,
    GroupState,
    JoinRequest,
    JoinResponse,
    Outbox,
    Parked,
    StoreRequest,
    SyncResponse,
)
from kafkarepl.coordinator.group_conversion import (
    downgrade_members,
    to_consumer_group,
    upgrade_refusal,
)
from kafkarepl.coordinator.group_records import (
    GroupSnapshot,
    decode_group_key,
    decode_group_value,
    encode_group_key,
)
from kafkarepl.coordinator.offsets import OffsetAndMetadata, decode_key, decode_value, partition_for
from kafkarepl.errors import ErrorCode

TopicPartition = tuple[str, int]
log = logging.getLogger(__name__)


def random_member_id(client_id: str) -> str:
    return f"{client_id}-{uuid.uuid4()}"


class GroupCoordinator:
    def __init__(self, config: GroupConfig, num_partitions: int,
                 new_member_id: Callable[[str], str] = random_member_id,
                 consumer_config: ConsumerGroupConfig | None = None) -> None:
        self.config = config
        self.consumer_config = consumer_config or ConsumerGroupConfig()
        self.num_partitions = num_partitions
        self.outbox = Outbox()
        self.groups: dict[str, Group] = {}  # classic groups, and every group's committed offsets
        self.consumer_groups: dict[str, ConsumerGroup] = {}  # KIP-848's (ConsumerGroupHeartbeat)
        self._new_member_id = new_member_id
        self._owned: dict[int, bool] = {}  # __consumer_offsets partition -> loaded
        self._writes: list[tuple[str, list[consumer_group_records.Record]]] = []  # KIP-848 groups' records
        # Tombstones of whole groups (a KIP-848 group dropped, a classic group's record
        # handed over) in writes not yet known to have landed: written again if one fails.
        self._unconfirmed: dict[str, list[consumer_group_records.Record]] = {}
        # Deleted classic groups: their tombstones' store ids, and the groups whose
        # tombstone failed (their last record may still be in the log: a KIP-848 group
        # taking the id deletes it)
        self._tombstone_stores: dict[int, str] = {}
        self._stale_classic: set[str] = set()

    # ---------------------------------------------------------------- ownership -----
    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def coordinator_error(self, group_id: str) -> ErrorCode:
        loaded = self._owned.get(self.partition_for(group_id))
        if loaded is None:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE if loaded else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    def owned_partitions(self) -> list[int]:
        return sorted(self._owned)

    def owns(self, partition: int) -> bool:
        return partition in self._owned

    def is_loading(self, partition: int) -> bool:
        return self._owned.get(partition) is False

    def begin_loading(self, partition: int) -> None:
        self.unload(partition)
        self._owned[partition] = False

    def load(self, partition: int, records: Iterable[tuple[bytes | None, bytes | None]],
             now_ms: int = 0, wall_ms: int = 0, topics: TopicsView | None = None) -> int:
        """Replay (key, value) records of the partition's log, oldest first: committed
        offsets, each classic group's last membership record and KIP-848 groups' records
        (members' sessions start at now_ms; wall_ms is the clock of the records'
        timestamps; `topics` names the topic ids of their assignments). Records of other
        kinds are skipped. Returns how many records were applied."""
        applied = 0
        snapshots: dict[str, GroupSnapshot | None] = {}
        loaded: dict[str, consumer_group_records.LoadedConsumerGroup] = {}
        for key, value in records:
            if key is None:
                continue
            try:
                k = decode_key(key)
                if k is None:
                    gid = decode_group_key(key)
                    if gid is not None:
                        snapshots[gid] = decode_group_value(value)
                        applied += 1
                    elif consumer_group_records.replay(loaded, key, value):
                        applied += 1
                    continue
                v = decode_value(value)
            except (ValueError, UnicodeDecodeError):
                continue  # not ours to understand; Kafka skips unknown record kinds too
            group = self._group(k.group_id, create=True)
            if v is None:
                group.offsets.pop((k.topic, k.partition), None)
            else:
                group.offsets[(k.topic, k.partition)] = v
            applied += 1
        for gid, snap in snapshots.items():
            if snap is None:
                continue  # a tombstone: no membership (its offsets, if any, make it Empty)
            ts = snap.state_timestamp_ms
            since = None if ts < 0 else now_ms - max(0, wall_ms - ts)
            group = self._group(gid, create=True)
            group.restore(snap, now_ms, since)
            group.rebalance_if_over_max_size(now_ms)
        for gid, state in loaded.items():
            if state.group_epoch is not None:  # else deleted (its member records are leftovers)
                cg = self.consumer_groups[gid] = ConsumerGroup(gid, self.consumer_config)
                cg.restore(state, topics, now_ms)
        for gid in [g for g in {*self.groups, *self.consumer_groups} if self.partition_for(g) == partition]:
            self._gc(gid)
        return applied

    def finish_loading(self, partition: int) -> None:
        if partition in self._owned:
            self._owned[partition] = True

    def unload(self, partition: int) -> None:
        """Leadership of the partition is gone: its groups go, parked requests learn
        NOT_COORDINATOR and look the coordinator up again."""
        self._owned.pop(partition, None)
        for gid in [g for g in self.groups if self.partition_for(g) == partition]:
            self.groups.pop(gid).shut_down(ErrorCode.NOT_COORDINATOR)
        for gid in [g for g in self.consumer_groups if self.partition_for(g) == partition]:
            del self.consumer_groups[gid]
        for gid in [g for g in self._unconfirmed if self.partition_for(g) == partition]:
            del self._unconfirmed[gid]
        self._stale_classic = {g for g in self._stale_classic if self.partition_for(g) != partition}

    @overload
    def _group(self, group_id: str, create: Literal[True]) -> Group: ...
    @overload
    def _group(self, group_id: str, create: bool = False) -> Group | None: ...
    def _group(self, group_id: str, create: bool = False) -> Group | None:
        g = self.groups.get(group_id)
        if g is None and create:
            g = Group(group_id, self.outbox, self.config, self._new_member_id)
            self.groups[group_id] = g
        return g

    def _gc(self, group_id: str) -> None:
        """An Empty group with no members and no offsets is forgotten (Kafka: Dead)."""
        cg = self.consumer_groups.get(group_id)
        if cg is not None and cg.is_empty and not (group_id in self.groups and self.groups[group_id].offsets):
            self._drop_consumer_group(group_id)
        g = self.groups.get(group_id)
        if g is not None and g.state is GroupState.EMPTY and g.is_empty and not g.offsets:
            g.state = GroupState.DEAD
            del self.groups[group_id]
            if g.persisted:  # Kafka's cleanupGroupMetadata: the group's record goes too
                self._tombstone_stores[self.outbox.store(group_id, None)] = group_id

    # ------------------------------------------------------------------ groups -----
    def join(self, group_id: str, r: JoinRequest, now_ms: int,
             topics: TopicsView | None = None) -> JoinResponse | Parked:
        err = self.coordinator_error(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if err:
            return JoinResponse(err, r.member_id)
        if not self.config.min_session_timeout_ms <= r.session_timeout_ms <= self.config.max_session_timeout_ms:
            return JoinResponse(ErrorCode.INVALID_SESSION_TIMEOUT, r.member_id)
        cg = self._active_consumer_group(group_id)
        if cg is not None:  # a classic member of a group mid-migration
            held_by = cg.members.get(cg.static.get(r.group_instance_id, "")) if r.group_instance_id else None
            replacing = held_by is not None and held_by.classic is None  # a consumer-protocol member
            joined = cg.classic_join(r, topics or cg.topics_view(), now_ms)
            self._collect(group_id, cg)
            if replacing and joined.error is ErrorCode.NONE:
                # it took a consumer-protocol static member's place, maybe the last one's:
                # the group is classic again at once, without a rebalance (as Kafka)
                self._maybe_downgrade(group_id, cg, cg.group_epoch, now_ms, rebalance=False)
            return joined
        self._drop_consumer_group(group_id)  # an empty one becomes a classic group, as Kafka
        group = self._group(group_id, create=not r.member_id)
        if group is None:
            return JoinResponse(ErrorCode.UNKNOWN_MEMBER_ID, r.member_id)
        out = group.join(r, now_ms)
        self._gc(group_id)
        return out

    def sync(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
             protocol_type: str | None, protocol_name: str | None,
             assignments: dict[str, bytes], now_ms: int) -> SyncResponse | Parked:
        err = self.coordinator_error(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if err:
            return SyncResponse(err)
        cg = self._active_consumer_group(group_id)
        if cg is not None:
            return cg.classic_sync(member_id, instance_id, generation_id, protocol_type, protocol_name, now_ms)
        group = self._group(group_id)
        if group is None:
            return SyncResponse(ErrorCode.UNKNOWN_MEMBER_ID)
        return group.sync(member_id, instance_id, generation_id, protocol_type, protocol_name, assignments, now_ms)

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
                  now_ms: int) -> ErrorCode:
        err = self.coordinator_error(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if err:
            return err
        cg = self._active_consumer_group(group_id)
        if cg is not None:
            return cg.classic_heartbeat(member_id, instance_id, generation_id, now_ms)
        group = self._group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return group.heartbeat(member_id, instance_id, generation_id, now_ms)

    def leave(self, group_id: str, members: list[tuple[str, str | None]],
              now_ms: int, topics: TopicsView | None = None) -> tuple[ErrorCode, list[ErrorCode]]:
        err = self.coordinator_error(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if err:
            return err, []
        cg = self._active_consumer_group(group_id)
        if cg is not None:
            codes = cg.classic_leave(members, topics or cg.topics_view())
            self._collect(group_id, cg)
            self._gc(group_id)
            return ErrorCode.NONE, codes
        group = self._group(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID for _ in members]
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        codes = group.leave(members, now_ms)
        self._gc(group_id)
        return ErrorCode.NONE, codes

    def _active_consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The group's KIP-848 group if it has members (then it answers for the group)."""
        cg = self.consumer_groups.get(group_id)
        return cg if cg is not None and not cg.is_empty else None

    def _consumer_group_active(self, group_id: str) -> bool:
        return self._active_consumer_group(group_id) is not None

    def consumer_heartbeat(self, group_id: str, r: HeartbeatRequest, topics: TopicsView,
                           now_ms: int) -> HeartbeatResponse:
        """ConsumerGroupHeartbeat (KIP-848). A classic group with members converts to a
        KIP-848 group if group.consumer.migration.policy allows it (an online upgrade)."""
        err = self.coordinator_error(group_id) if group_id else ErrorCode.INVALID_REQUEST
        if err:
            return HeartbeatResponse(err, "GroupId can't be empty." if not group_id else None)
        refused = ConsumerGroup.refusal(r, self.consumer_config)
        if refused is not None:  # before anything changes: an invalid request converts no group
            return refused
        handed_over: list[consumer_group_records.Record] = []
        classic = self.groups.get(group_id)
        if (classic is not None and not (classic.state is GroupState.EMPTY and classic.is_empty)
                and not self._consumer_group_active(group_id)):
            why = upgrade_refusal(classic, self.consumer_config) if r.member_epoch == 0 else "it is not one"
            if why is None:
                try:
                    converted = to_consumer_group(classic, self.consumer_config, topics, now_ms)
                except ValueError:
                    why = "the embedded consumer protocol is malformed"
            if why is not None:
                return HeartbeatResponse(ErrorCode.GROUP_ID_NOT_FOUND,
                                         f"Cannot use group {group_id} as a consumer group: {why}.")
            out = converted.heartbeat(r, topics, now_ms)
            if out.error:  # the joining member refused (the group full, its instance id held):
                return out  # no conversion either, as Kafka's failed heartbeat undoes it
            log.info("group %s: converted from the classic protocol to the consumer protocol (%d members)",
                     group_id, len(converted.members))
            if classic.hand_over(now_ms):  # its record goes in the same batch as the new group's
                handed_over = self._classic_record_tombstone(group_id)
            self.consumer_groups[group_id] = converted
            self._collect(group_id, converted, handed_over)
            return out
        elif ((classic is not None and classic.persisted or group_id in self._stale_classic)
              and r.member_epoch == 0 and not self._consumer_group_active(group_id)):
            # an empty classic group gives its id to a KIP-848 group: its record goes in the
            # same batch (as Kafka deletes it). Left, a stale one (its Empty record's or its
            # tombstone's write failed) would bring its old members back at the next load,
            # and they would keep the KIP-848 group's members out until their sessions ended
            if classic is not None:
                classic.persisted = False
            self._stale_classic.discard(group_id)
            handed_over = self._classic_record_tombstone(group_id)
        cg = self.consumer_groups.get(group_id)
        if cg is None:
            if r.member_epoch != 0:  # unknown here (a new coordinator): the member joins again
                return HeartbeatResponse(ErrorCode.UNKNOWN_MEMBER_ID,
                                         f"Member {r.member_id} is not a member of group {group_id}.")
            cg = self.consumer_groups[group_id] = ConsumerGroup(group_id, self.consumer_config)
        epoch = cg.group_epoch
        out = cg.heartbeat(r, topics, now_ms)
        self._collect(group_id, cg, handed_over)
        if r.member_epoch == LEAVE_EPOCH:
            self._maybe_downgrade(group_id, cg, epoch, now_ms)
        self._gc(group_id)
        return out

    def _classic_record_tombstone(self, group_id: str) -> list[consumer_group_records.Record]:
        """The classic group record's tombstone, written with a KIP-848 group's records
        (and again if that write fails)."""
        gone: list[consumer_group_records.Record] = [(encode_group_key(group_id), None)]
        self._unconfirmed.setdefault(group_id, []).extend(gone)
        return gone

    def _maybe_downgrade(self, group_id: str, cg: ConsumerGroup, epoch: int, now_ms: int,
                         rebalance: bool = True) -> None:
        """The last consumer-protocol member left a group of classic members: it becomes a
        classic group again (Kafka's online downgrade) at the group epoch before it left
        (`epoch`: the generation its members are at), the KIP-848 group's records go.
        Then a rebalance, unless a classic static member took the last one's place (it
        carries on with its partitions, as the others do)."""
        if cg.is_empty or not cg.all_classic():
            return
        members = downgrade_members(cg, self.config.max_size, self.consumer_config)
        if members is None:
            return
        log.info("group %s: converted from the consumer protocol to the classic protocol (%d members)",
                 group_id, len(members))
        self._drop_consumer_group(group_id)
        self._group(group_id, create=True).take_over(members, epoch, now_ms, rebalance)

    def _collect(self, group_id: str, cg: ConsumerGroup, first: Sequence[consumer_group_records.Record] = ()) -> None:
        pending = [*first, *cg.pending_records()]
        if pending:
            self._writes.append((group_id, pending))

    def _drop_consumer_group(self, group_id: str) -> None:
        """The consumer group goes (empty): its records go from the log too."""
        cg = self.consumer_groups.pop(group_id, None)
        if cg is not None and (gone := cg.tombstones()):
            self._writes.append((group_id, gone))
            self._unconfirmed.setdefault(group_id, []).extend(gone)

    def consumer_group_tombstones(self, group_id: str) -> list[tuple[bytes | None, bytes | None]]:
        """DeleteGroups: the KIP-848 group's records to delete with its offsets."""
        cg = self.consumer_groups.get(group_id)
        gone: list[tuple[bytes | None, bytes | None]] = [*cg.tombstones()] if cg is not None else []
        return gone

    def drain_writes(self) -> list[tuple[str, list[consumer_group_records.Record]]]:
        """KIP-848 groups' records to write, in order: (group id, records)."""
        writes, self._writes = self._writes, []
        return writes

    def write_failed(self, group_id: str) -> None:
        """A write of the group's records failed: its next ones rewrite all of it. Whole
        groups' tombstones it may have carried are written again at once (nothing else
        would): then, in the same batch, all of the group that lives on under the id."""
        cg = self.consumer_groups.get(group_id)
        if cg is not None:
            cg.write_failed()
        again = self._unconfirmed.get(group_id)
        if again:
            classic = self.groups.get(group_id)
            if classic is not None and classic.persisted:  # a classic group again, its record newer
                key = encode_group_key(group_id)
                again = [r for r in again if r[0] != key]
            self._writes.append((group_id, [*again, *(cg.pending_records() if cg is not None else ())]))

    def write_done(self, group_id: str) -> None:
        """The group's last write landed, and with it every one before it (appends to a
        partition complete in order): nothing of it is left to write again, unless the
        core holds records for it not yet handed to the writer."""
        if any(gid == group_id for gid, _ in self._writes):
            return
        self._unconfirmed.pop(group_id, None)
        cg = self.consumer_groups.get(group_id)
        if cg is not None:
            cg.write_done()

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        return self.consumer_groups.get(group_id)

    # ----------------------------------------------------------------- offsets -----
    def validate_commit(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
                        now_ms: int, api_version: int = 9) -> ErrorCode:
        """Whether the member may commit for the group (NONE: yes; each offset is then
        checked by offset_error). api_version: OffsetCommit's (a KIP-848 member needs v9+)."""
        err = self.coordinator_error(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if err:
            return err
        cg = self.consumer_groups.get(group_id)
        if cg is not None:
            return cg.commit_error(member_id, generation_id, api_version)
        group = self._group(group_id)
        if group is None:
            return ErrorCode.ILLEGAL_GENERATION if generation_id >= 0 else ErrorCode.NONE
        return group.validate_commit(member_id, instance_id, generation_id, now_ms)

    def offset_error(self, o: OffsetAndMetadata) -> ErrorCode:
        """One offset of a commit the group may make: NONE (write it) or why not."""
        if len((o.metadata or "").encode()) > self.config.max_metadata_bytes:
            return ErrorCode.OFFSET_METADATA_TOO_LARGE
        return ErrorCode.NONE

    def apply_commit(self, group_id: str, offsets: dict[TopicPartition, OffsetAndMetadata]) -> ErrorCode:
        """The commit's records are replicated: make the offsets visible."""
        if self.coordinator_error(group_id) is not ErrorCode.NONE:
            return ErrorCode.NOT_COORDINATOR  # lost the partition while writing
        group = self._group(group_id, create=True)
        group.offsets.update(offsets)
        return ErrorCode.NONE

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None,
                      member_id: str | None = None, member_epoch: int = -1,
                      ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        """Committed offsets (None = none committed) of the requested partitions, or of
        every partition with an offset when topics is None. A KIP-848 group's member
        (OffsetFetch v9) must be at its epoch."""
        err = self.coordinator_error(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if err:
            return err, {}
        cg = self.consumer_groups.get(group_id)
        if cg is not None and (err := cg.fetch_error(member_id, member_epoch)):
            return err, {}
        group = self._group(group_id)
        stored = group.offsets if group is not None else {}
        if topics is None:
            return ErrorCode.NONE, dict(sorted(stored.items()))
        return ErrorCode.NONE, {(t, p): stored.get((t, p)) for t, parts in topics for p in parts}

    # ---------------------------------------------------------------- describe -----
    def describe(self, group_id: str) -> tuple[ErrorCode, dict[str, Any]]:
        err = self.coordinator_error(group_id)
        if not err and self._consumer_group_active(group_id):  # as Kafka: ConsumerGroupDescribe's
            return ErrorCode.GROUP_ID_NOT_FOUND, {"group_state": GroupState.DEAD.value, "protocol_type": "",
                                                  "protocol_data": "", "members": []}
        group = self._group(group_id) if not err else None
        if group is None:
            return err, {"group_state": GroupState.DEAD.value, "protocol_type": "", "protocol_data": "", "members": []}
        return ErrorCode.NONE, group.describe()

    def prepare_delete(self, group_id: str) -> tuple[ErrorCode, list[TopicPartition]]:
        """DeleteGroups, first step: whether group_id may be deleted, and the committed
        offsets whose tombstones must be written before finish_delete()."""
        err = self.coordinator_error(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if err:
            return err, []
        cg = self._active_consumer_group(group_id)
        if cg is not None:
            return ErrorCode.NON_EMPTY_GROUP, []
        g = self.groups.get(group_id)
        if g is None or g.state is GroupState.DEAD:
            if cg is not None:
                return ErrorCode.NONE, []
            return ErrorCode.GROUP_ID_NOT_FOUND, []
        # Kafka's validateDeleteGroup: by state. Pending (MEMBER_ID_REQUIRED) ids do not
        # count: a client repeating JoinGroup without a member id must not keep a group
        # from being deleted; such an id rejoining later finds no group (UNKNOWN_MEMBER_ID).
        if g.state is not GroupState.EMPTY:
            return ErrorCode.NON_EMPTY_GROUP, []
        return ErrorCode.NONE, sorted(g.offsets)

    def finish_delete(self, group_id: str) -> ErrorCode:
        """The tombstones are replicated: forget the group (if it stayed empty)."""
        if self._consumer_group_active(group_id):
            # someone joined meanwhile: the group's records just deleted are written again
            self.consumer_groups[group_id].write_failed()
            return ErrorCode.NON_EMPTY_GROUP
        cg = self.consumer_groups.pop(group_id, None)
        g = self.groups.get(group_id)
        if g is None:
            return ErrorCode.NONE if cg is not None else ErrorCode.GROUP_ID_NOT_FOUND
        if g.state is not GroupState.EMPTY:
            return ErrorCode.NON_EMPTY_GROUP  # someone joined meanwhile
        g.offsets.clear()
        g.state = GroupState.DEAD
        g.persisted = False  # the caller wrote the group's tombstone with its offsets'
        del self.groups[group_id]
        return ErrorCode.NONE

    def prepare_offset_delete(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode], list[TopicPartition]]:
        """OffsetDelete, first step: per partition NONE or GROUP_SUBSCRIBED_TO_TOPIC (a
        member consumes it), as Kafka; and the partitions with a committed offset to
        delete (write their tombstones, then apply_offset_delete)."""
        err = self.coordinator_error(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if err:
            return err, {}, []
        g = self.groups.get(group_id)
        if g is None or g.state is GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}, []
        cg = self.consumer_groups.get(group_id)
        subscribed = cg.subscribed_topics() if cg is not None and not cg.is_empty else g.subscribed_topics()
        codes = {
            tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if subscribed is None or tp[0] in subscribed else ErrorCode.NONE
            for tp in partitions
        }
        return ErrorCode.NONE, codes, [tp for tp, code in codes.items() if not code and tp in g.offsets]

    def apply_offset_delete(self, group_id: str, partitions: list[TopicPartition]) -> None:
        g = self.groups.get(group_id)
        if g is not None:
            for tp in partitions:
                g.offsets.pop(tp, None)
            self._gc(group_id)

    def list_groups(self, states: Iterable[str] = ()) -> tuple[ErrorCode, list[tuple[str, str, str, str]]]:
        """(group_id, protocol_type, state, group type) of the loaded groups; a partition
        still loading makes the list incomplete, which Kafka reports as LOAD_IN_PROGRESS."""
        if any(loaded is False for loaded in self._owned.values()):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        wanted = {s.lower() for s in states}
        listed = {gid: (g.protocol_type or "", g.state.value, "classic") for gid, g in self.groups.items()}
        listed.update({gid: ("consumer", cg.state, "consumer") for gid, cg in self.consumer_groups.items()
                       if not cg.is_empty or gid not in self.groups or not self.groups[gid].protocol_type})
        return ErrorCode.NONE, [(gid, *v) for gid, v in sorted(listed.items())
                                if not wanted or v[1].lower() in wanted]

    # --------------------------------------------------------- offset retention -----
    def expire_offsets(self, now_ms: int, wall_ms: int,
                       retention_ms: int) -> dict[int, list[tuple[str, TopicPartition]]]:
        """offsets.retention.minutes, as Kafka since 2.1 (KIP-211): the offsets of an
        Empty group expire retention_ms after it became Empty (or after their commit,
        when it never had members here); a consumer group with members loses those of
        topics it no longer subscribes to, retention_ms after their commit. They leave
        the cache now; the caller writes their tombstones, returned per
        `__consumer_offsets` partition as (group id, partition). An Empty group left
        without offsets is forgotten (Dead). now_ms: the group timers' (monotonic) clock;
        wall_ms: the clock of commit timestamps."""
        out: dict[int, list[tuple[str, TopicPartition]]] = {}
        for gid, g in list(self.groups.items()):
            if not self._owned.get(self.partition_for(gid)):
                continue
            cg = self.consumer_groups.get(gid)
            if cg is not None and not cg.is_empty:
                in_use = cg.subscribed_topics()
                expired = [tp for tp, o in g.offsets.items()
                           if tp[0] not in in_use and wall_ms - o.commit_timestamp_ms >= retention_ms]
            elif g.state is GroupState.EMPTY and g.is_empty:
                since = g.empty_since_ms
                expired = [tp for tp, o in g.offsets.items()
                           if (now_ms - since if since is not None else wall_ms - o.commit_timestamp_ms)
                           >= retention_ms]
            elif g.protocol_type == "consumer" and g.state is GroupState.STABLE:
                subscribed = g.subscribed_topics()
                if subscribed is None:
                    continue
                expired = [tp for tp, o in g.offsets.items()
                           if tp[0] not in subscribed and wall_ms - o.commit_timestamp_ms >= retention_ms]
            else:
                continue
            for tp in expired:
                del g.offsets[tp]
            if expired:
                out.setdefault(self.partition_for(gid), []).extend((gid, tp) for tp in sorted(expired))
            self._gc(gid)
        return out

    # ------------------------------------------------------------------ timers -----
    def poll(self, now_ms: int) -> None:
        for gid in list(self.groups):
            self.groups[gid].expire(now_ms)
            self._gc(gid)
        for gid in list(self.consumer_groups):
            cg = self.consumer_groups[gid]
            epoch = cg.group_epoch
            if cg.expire(now_ms):
                self._collect(gid, cg)
                self._maybe_downgrade(gid, cg, epoch, now_ms)
            self._gc(gid)

    def next_deadline(self) -> int | None:
        deadlines = [g.next_deadline() for g in self.groups.values()]
        deadlines += [cg.next_deadline() for cg in self.consumer_groups.values()]
        return min((d for d in deadlines if d is not None), default=None)

    def drain(self) -> list[tuple[int, JoinResponse | SyncResponse]]:
        return self.outbox.drain()

    def drain_stores(self) -> list[StoreRequest]:
        return self.outbox.drain_stores()

    def store_done(self, group_id: str, store_id: int, error: ErrorCode, now_ms: int) -> None:
        """A group record asked for by drain_stores() is replicated (NONE) or failed."""
        if self._tombstone_stores.pop(store_id, None) is not None and error:
            self._stale_classic.add(group_id)
        g = self.groups.get(group_id)
        if g is not None:
            g.store_done(store_id, error, now_ms)
            self._gc(group_id)
