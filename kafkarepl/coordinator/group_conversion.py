"""Online migration of a consumer group between the classic protocol and KIP-848's
(`group.consumer.migration.policy`, Kafka's GroupMetadataManager): a rolling upgrade of a
classic group's members to `group.protocol=consumer` converts the group when the first of
them joins; a rolling downgrade converts it back when the last one leaves. Members keep
their ids, partitions and epochs (generation = member epoch = group epoch), so nothing is
consumed twice and no member waits for a full rebalance."""

from __future__ import annotations

from kafkarepl.coordinator import consumer_protocol
from kafkarepl.coordinator.consumer_group import (
    MAX_SUBSCRIPTION_BYTES,
    ClassicMetadata,
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerMember,
    MemberState,
    TopicsView,
    classic_protocols_bytes,
)
from kafkarepl.coordinator.group import Group, Member


def upgrade_refusal(classic: Group, config: ConsumerGroupConfig) -> str | None:
    """Why the classic group cannot become a KIP-848 group now (None: it can)."""
    if not config.upgrade_enabled:
        return "the online upgrade is disabled (group.consumer.migration.policy)"
    if classic.protocol_type != consumer_protocol.PROTOCOL_TYPE:
        return "the group does not use the consumer embedded protocol"
    if len(classic.members) > config.max_size:
        return "the group size exceeds the consumer group maximum size"
    if any(classic_protocols_bytes(m.protocols) > MAX_SUBSCRIPTION_BYTES for m in classic.members.values()):
        return "a member's protocols are too large for its record"
    return None


def to_consumer_group(classic: Group, config: ConsumerGroupConfig, topics: TopicsView, now_ms: int) -> ConsumerGroup:
    """The KIP-848 group of the classic group's members (Kafka's ConsumerGroup.fromClassicGroup):
    each at the generation as its member epoch, Stable with the partitions its last
    SyncGroup gave it, which are also its target. ValueError when a member's embedded
    protocol cannot be read. The classic group is left as it is (the caller hands it over)."""
    cg = ConsumerGroup(classic.group_id, config)
    generation = classic.generation_id
    members = []
    for m in classic.members.values():
        data = m.metadata(classic.protocol_name) if classic.protocol_name else (m.protocols[0][1] if m.protocols else b"")
        sub = consumer_protocol.read_subscription(data)
        assigned = {t: ps for t, ps in consumer_protocol.read_assignment(m.assignment).items()
                    if ps and t in topics.by_name}
        cm = ConsumerMember(m.member_id, m.group_instance_id, sub.rack_id, m.client_id, m.client_host,
                            m.rebalance_timeout_ms, subscribed_names=frozenset(sub.topics),
                            epoch=generation, previous_epoch=generation, state=MemberState.STABLE,
                            assigned={topics.by_name[t][0]: ps for t, ps in assigned.items()},
                            session_deadline_ms=now_ms + m.session_timeout_ms,
                            classic=ClassicMetadata(m.session_timeout_ms, tuple(m.protocols)))
        members.append((cm, assigned))
    cg.adopt(members, generation, topics)
    return cg


def downgrade_members(cg: ConsumerGroup, max_size: int, config: ConsumerGroupConfig) -> list[Member] | None:
    """The classic members of a group whose last consumer-protocol member left, as a
    classic group's, for an online downgrade; None when it stays a KIP-848 group (Kafka's
    validateOnlineDowngradeWithFencedMember: allowed, within group.max.size, members
    left, one protocol they all have)."""
    rest = list(cg.members.values())
    classic = [m.classic for m in rest if m.classic is not None]
    if not rest or len(classic) < len(rest) or not config.downgrade_enabled or len(rest) > max_size:
        return None
    if not set.intersection(*({n for n, _ in c.protocols} for c in classic)):
        return None
    names = cg.topic_names()
    out = []
    for m, c in zip(rest, classic, strict=True):
        assigned = {names[tid]: ps for tid, ps in m.assigned.items() if tid in names}
        out.append(Member(m.member_id, m.instance_id, m.client_id, m.client_host, c.session_timeout_ms,
                          m.rebalance_timeout_ms, consumer_protocol.PROTOCOL_TYPE, list(c.protocols),
                          assignment=consumer_protocol.write_assignment(c.version, assigned)))
    return out
