"""Which requests an authenticated principal may make (Kafka's KafkaApis authorization
checks), applied around the request layer when an authorizer is configured
(authorizer.class.name).

`gate(req)` runs before the handler: it answers requests denied as a whole (a cluster
action, a group, a transactional id) with Kafka's *_AUTHORIZATION_FAILED code, and takes
the topics (groups, transactional ids) a principal may not use out of the request.
`merge(req, response)` then puts them back into the response with the matching
*_AUTHORIZATION_FAILED code, and drops from listings (Metadata of all topics, ListGroups,
ListTransactions) what the principal may not describe.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import ZERO_UUID, ApiKey, Request
from kafkarepl.server.authorized_ops import AclOperation as Op
from kafkarepl.server.authorized_ops import ResourceType as R
from kafkarepl.server.authorizer import Authorizer

CLUSTER = "kafka-cluster"
_session: contextvars.ContextVar[tuple[str, str]] = contextvars.ContextVar(
    "kafkarepl_session", default=("User:ANONYMOUS", "*"))

CLUSTER_ACTIONS = {ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN,
                   ApiKey.ALTER_PARTITION, ApiKey.WRITE_TXN_MARKERS}
CLUSTER_ALTER = {ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS, ApiKey.ELECT_LEADERS,
                 ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.ALTER_REPLICA_LOG_DIRS}
CLUSTER_DESCRIBE = {ApiKey.DESCRIBE_ACLS, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
                    ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.DESCRIBE_LOG_DIRS}
GROUP_READ = {ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP,
              ApiKey.CONSUMER_GROUP_HEARTBEAT}
TXN_WRITE = {ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN, ApiKey.TXN_OFFSET_COMMIT}


def set_session(principal: str, host: str) -> None:
    """The current request's authenticated principal and client address (a context
    variable: each request's handler task has its own)."""
    _session.set((principal, host))



def _listed(parts_key: str, index_key: str) -> Callable[[dict[str, Any]], list[int]]:
    """Partitions given as a list of structs with an index field."""
    return lambda t: [p[index_key] for p in t.get(parts_key) or []]


def _indexes(parts_key: str) -> Callable[[dict[str, Any]], list[int]]:
    """Partitions given as a list of indexes."""
    return lambda t: list(t.get(parts_key) or [])

@dataclass
class Removed:
    """Topics taken out of a request, to answer as TOPIC_AUTHORIZATION_FAILED."""

    topics: dict[str, list[int]] = field(default_factory=dict)  # topic -> partitions
    filter_listing: bool = False  # Metadata of all topics: drop what may not be described
    names: list[str] = field(default_factory=list)  # groups / transactional ids taken out
    not_attempted: dict[str, list[int]] = field(default_factory=dict)  # AddPartitionsToTxn's others
    denied: list[Any] = field(default_factory=list)  # entries of a per-entry API refused as a whole
    # Topics named by id (Metadata v12, DeleteTopics v6): id -> the name to answer with
    # (None where the principal may not describe the topic, as Kafka hides it then)
    topic_ids: dict[uuid.UUID, str | None] = field(default_factory=dict)
    # OffsetFetch v8+, per group left in the request (in its order): whether it asked for
    # all topics (then only the describable are shown), and the topics taken out of it
    groups: list[tuple[bool, dict[str, list[int]]]] = field(default_factory=list)


class RequestAuthorizer:
    def __init__(self, authorizer: Authorizer | None,
                 topic_name_of: Callable[[uuid.UUID], str | None] = lambda _id: None) -> None:
        """topic_name_of: the name of a topic id (the metadata cache): a topic named by
        id is authorized by its name, as Kafka resolves ids before its checks."""
        self.authorizer = authorizer
        self.topic_name_of = topic_name_of

    @staticmethod
    def _names_by_id(t: dict[str, Any]) -> bool:
        """A topic entry that names its topic by id (its name is then not looked at)."""
        tid = t.get("topic_id")
        return tid is not None and tid != ZERO_UUID

    @property
    def enabled(self) -> bool:
        return self.authorizer is not None

    def allowed(self, op: Op, rtype: R, name: str) -> bool:
        if self.authorizer is None:
            return True
        principal, host = _session.get()
        return self.authorizer.authorize(principal, host, op, rtype, name)

    def topic_describer(self) -> Callable[[str], bool] | None:
        """Whether the current request's principal may DESCRIBE a topic, as a function
        bound to that principal (usable after the request); None without an authorizer."""
        authorizer = self.authorizer
        if authorizer is None:
            return None
        principal, host = _session.get()
        return lambda topic: authorizer.authorize(principal, host, Op.DESCRIBE, R.TOPIC, topic)

    def _allowed_some(self, op: Op, rtype: R) -> bool:
        """`op` allowed on some resource of the type (Kafka's authorizeByResourceType)."""
        if self.authorizer is None:
            return True
        principal, host = _session.get()
        return self.authorizer.authorize_by_resource_type(principal, host, op, rtype)

    def _require(self, op: Op, rtype: R, name: str, code: ErrorCode) -> None:
        if not self.allowed(op, rtype, name):
            raise KafkaError(f"{_session.get()[0]} may not {op.name} {rtype.name} {name}", code)

    def gate(self, req: Request) -> Removed | None:
        if self.authorizer is None:
            return None
        k, b = req.api_key, req.body
        if k in (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_CLIENT_QUOTAS, ApiKey.ALTER_REPLICA_LOG_DIRS):
            # Answered entry by entry (no top-level error code), as Kafka does; for
            # AlterReplicaLogDirs (CLUSTER_ALTER) each partition of each dir.
            op = Op.ALTER_CONFIGS if k == ApiKey.ALTER_CLIENT_QUOTAS else Op.ALTER
            removed = Removed()
            if not self.allowed(op, R.CLUSTER, CLUSTER):
                keys = {ApiKey.ALTER_USER_SCRAM_CREDENTIALS: ("deletions", "upsertions"),
                        ApiKey.ALTER_REPLICA_LOG_DIRS: ("dirs",)}.get(k, ("entries",))
                for key in keys:
                    removed.denied += b.get(key) or []
                    b[key] = []
            return removed
        if k == ApiKey.DESCRIBE_CLIENT_QUOTAS:
            self._require(Op.DESCRIBE_CONFIGS, R.CLUSTER, CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        elif k in CLUSTER_ACTIONS:
            self._require(Op.CLUSTER_ACTION, R.CLUSTER, CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        elif k in CLUSTER_ALTER:
            self._require(Op.ALTER, R.CLUSTER, CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        elif k in CLUSTER_DESCRIBE:
            self._require(Op.DESCRIBE, R.CLUSTER, CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        elif k in GROUP_READ:
            self._require(Op.READ, R.GROUP, b.get("group_id") or "", ErrorCode.GROUP_AUTHORIZATION_FAILED)
            if k == ApiKey.CONSUMER_GROUP_HEARTBEAT:  # as Kafka: every topic named must be describable
                denied = [t for t in b.get("subscribed_topic_names") or [] if not self.allowed(Op.DESCRIBE, R.TOPIC, t)]
                if denied:
                    raise KafkaError(f"{_session.get()[0]} may not DESCRIBE TOPIC {', '.join(denied[:10])}",
                                     ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif k == ApiKey.ADD_PARTITIONS_TO_TXN and req.api_version >= 4:
            # The batched form is broker to broker (KIP-890 verification), as Kafka.
            self._require(Op.CLUSTER_ACTION, R.CLUSTER, CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        elif k in TXN_WRITE:
            tid = b.get("transactional_id") or b.get("v3_and_below_transactional_id") or ""
            self._require(Op.WRITE, R.TRANSACTIONAL_ID, tid, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            if k in (ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.TXN_OFFSET_COMMIT):
                self._require(Op.READ, R.GROUP, b.get("group_id") or "", ErrorCode.GROUP_AUTHORIZATION_FAILED)
            if k == ApiKey.TXN_OFFSET_COMMIT:
                return self._take(b, "topics", Op.READ, parts=_listed("partitions", "partition_index"))
            if k == ApiKey.ADD_PARTITIONS_TO_TXN:
                # As Kafka: one topic refused and nothing is added (the others: not attempted).
                removed = self._take(b, "v3_and_below_topics", Op.WRITE, parts=_indexes("partitions"))
                if removed.topics:
                    removed.not_attempted = {t["name"]: list(t["partitions"]) for t in b["v3_and_below_topics"]}
                    b["v3_and_below_topics"] = []
                return removed
        elif k == ApiKey.OFFSET_FETCH and req.api_version >= 8:
            # Kafka's: each group its own GROUP_AUTHORIZATION_FAILED, each topic its own
            # TOPIC_AUTHORIZATION_FAILED; of "all topics", only the describable shown
            removed = Removed()
            keep = []
            for g in b.get("groups") or []:
                if not self.allowed(Op.DESCRIBE, R.GROUP, g["group_id"]):
                    removed.names.append(g["group_id"])
                    continue
                every = g.get("topics") is None
                taken = {} if every else self._take(g, "topics", Op.DESCRIBE, parts=_indexes("partition_indexes")).topics
                removed.groups.append((every, taken))
                keep.append(g)
            b["groups"] = keep
            return removed
        elif k == ApiKey.OFFSET_FETCH:
            self._require(Op.DESCRIBE, R.GROUP, b.get("group_id") or "", ErrorCode.GROUP_AUTHORIZATION_FAILED)
            if b.get("topics") is not None:
                return self._take(b, "topics", Op.DESCRIBE, parts=_indexes("partition_indexes"))
            return Removed(filter_listing=True)
        elif k == ApiKey.OFFSET_DELETE:
            self._require(Op.DELETE, R.GROUP, b.get("group_id") or "", ErrorCode.GROUP_AUTHORIZATION_FAILED)
        elif k == ApiKey.DESCRIBE_GROUPS:
            return self._take_names(b, "groups", Op.DESCRIBE, R.GROUP)
        elif k == ApiKey.CONSUMER_GROUP_DESCRIBE:
            return self._take_names(b, "group_ids", Op.DESCRIBE, R.GROUP)
        elif k == ApiKey.DELETE_GROUPS:
            return self._take_names(b, "groups_names", Op.DELETE, R.GROUP)
        elif k == ApiKey.LIST_GROUPS:
            # Kafka: every group with DESCRIBE on the cluster, else the describable ones.
            return None if self.allowed(Op.DESCRIBE, R.CLUSTER, CLUSTER) else Removed(filter_listing=True)
        elif k == ApiKey.DESCRIBE_TRANSACTIONS:
            return self._take_names(b, "transactional_ids", Op.DESCRIBE, R.TRANSACTIONAL_ID)
        elif k == ApiKey.LIST_TRANSACTIONS:
            return Removed(filter_listing=True)
        elif k == ApiKey.DELETE_RECORDS:
            return self._take(b, "topics", Op.DELETE, parts=_listed("partitions", "partition_index"))
        elif k == ApiKey.CREATE_PARTITIONS:
            return self._take(b, "topics", Op.ALTER)
        elif k == ApiKey.DESCRIBE_PRODUCERS:
            return self._take(b, "topics", Op.READ, parts=_indexes("partition_indexes"))
        elif k == ApiKey.INIT_PRODUCER_ID:
            tid = b.get("transactional_id")
            if tid is not None:
                self._require(Op.WRITE, R.TRANSACTIONAL_ID, tid, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            elif not self.allowed(Op.IDEMPOTENT_WRITE, R.CLUSTER, CLUSTER) and not self._allowed_some(Op.WRITE, R.TOPIC):
                # KIP-679 (Kafka 3.0+): an idempotent producer needs IDEMPOTENT_WRITE on the
                # cluster or WRITE on some topic; Java producers are idempotent by default.
                raise KafkaError(f"{_session.get()[0]} may not produce idempotently",
                                 ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        elif k == ApiKey.FIND_COORDINATOR:
            rtype = R.TRANSACTIONAL_ID if b.get("key_type", 0) == 1 else R.GROUP
            code = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if rtype is R.TRANSACTIONAL_ID
                    else ErrorCode.GROUP_AUTHORIZATION_FAILED)
            for key in (b.get("coordinator_keys") or []) if req.api_version >= 4 else [b.get("key") or ""]:
                self._require(Op.DESCRIBE, rtype, key, code)
        elif k == ApiKey.OFFSET_COMMIT:
            self._require(Op.READ, R.GROUP, b.get("group_id") or "", ErrorCode.GROUP_AUTHORIZATION_FAILED)
            return self._take(b, "topics", Op.READ, parts=_listed("partitions", "partition_index"))
        elif k == ApiKey.PRODUCE:
            tid = b.get("transactional_id")
            if tid is not None:
                self._require(Op.WRITE, R.TRANSACTIONAL_ID, tid, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            return self._take(b, "topic_data", Op.WRITE, parts=_listed("partition_data", "index"))
        elif k == ApiKey.FETCH:
            if (b.get("replica_id") or -1) >= 0:
                self._require(Op.CLUSTER_ACTION, R.CLUSTER, CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                return None
            return self._take(b, "topics", Op.READ, "topic", parts=_listed("partitions", "partition"))
        elif k == ApiKey.LIST_OFFSETS:
            return self._take(b, "topics", Op.DESCRIBE, parts=_listed("partitions", "partition_index"))
        elif k == ApiKey.METADATA:
            topics = b.get("topics")
            if topics is None or (req.api_version == 0 and not topics):
                return Removed(filter_listing=True)
            removed = Removed()
            keep = []
            for t in topics:
                if req.api_version >= 12 and self._names_by_id(t):  # unknown ids: the handler's answer
                    name = self.topic_name_of(t["topic_id"])
                    if name is not None and not self.allowed(Op.DESCRIBE, R.TOPIC, name):
                        removed.topic_ids[t["topic_id"]] = None  # ids are not secret, names are
                        continue
                elif t.get("name") is not None and not self.allowed(Op.DESCRIBE, R.TOPIC, t["name"]):
                    removed.topics[t["name"]] = []
                    continue
                keep.append(t)
            b["topics"] = keep
            if not keep and (removed.topics or removed.topic_ids):
                b["allow_auto_topic_creation"] = False
            return removed
        elif k == ApiKey.CREATE_TOPICS:
            if self.allowed(Op.CREATE, R.CLUSTER, CLUSTER):
                return None
            return self._take(b, "topics", Op.CREATE)
        elif k == ApiKey.DELETE_TOPICS:
            removed = Removed()
            topics = b.get("topics") or []
            names = b.get("topic_names") or [t.get("name") for t in topics if not self._names_by_id(t)]
            for n in names:
                if n is not None and not self.allowed(Op.DELETE, R.TOPIC, n):
                    removed.topics[n] = []
            for t in topics:
                name = self.topic_name_of(t["topic_id"]) if self._names_by_id(t) else None
                if name is not None and not self.allowed(Op.DELETE, R.TOPIC, name):
                    removed.topic_ids[t["topic_id"]] = name if self.allowed(Op.DESCRIBE, R.TOPIC, name) else None
            if "topic_names" in b and b["topic_names"] is not None:
                b["topic_names"] = [n for n in b["topic_names"] if n not in removed.topics]
            if topics:
                b["topics"] = [t for t in topics if (t.get("topic_id") not in removed.topic_ids
                                                     if self._names_by_id(t) else t.get("name") not in removed.topics)]
            return removed
        elif k in (ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
            op = Op.DESCRIBE_CONFIGS if k == ApiKey.DESCRIBE_CONFIGS else Op.ALTER_CONFIGS
            for r in b.get("resources") or []:
                if r["resource_type"] == 2:
                    self._require(op, R.TOPIC, r["resource_name"], ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                else:
                    self._require(op, R.CLUSTER, CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return None

    def _take(self, b: dict[str, Any], key: str, op: Op, name_key: str = "name",
              parts: Callable[[dict[str, Any]], list[int]] = lambda _t: []) -> Removed:
        """Topics of b[key] the principal may not `op`, taken out (with `parts(topic)`,
        their partitions, to answer)."""
        removed = Removed()
        keep = []
        for t in b.get(key) or []:
            name = t.get(name_key)
            if name is not None and not self.allowed(op, R.TOPIC, name):
                removed.topics[name] = parts(t)
            else:
                keep.append(t)
        b[key] = keep
        return removed

    def _take_names(self, b: dict[str, Any], key: str, op: Op, rtype: R) -> Removed:
        """Groups or transactional ids the principal may not use, taken out of the request."""
        removed = Removed()
        names = b.get(key) or []
        removed.names = [n for n in names if not self.allowed(op, rtype, n)]
        b[key] = [n for n in names if n not in removed.names]
        return removed

    def merge(self, req: Request, removed: Removed, resp: dict[str, Any] | None) -> dict[str, Any] | None:
        """Put the removed topics back into the response with TOPIC_AUTHORIZATION_FAILED."""
        if resp is None:
            return None
        code = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        k = req.api_key
        if k == ApiKey.METADATA:
            if removed.filter_listing:
                resp["topics"] = [t for t in resp["topics"] if self.allowed(Op.DESCRIBE, R.TOPIC, t["name"] or "")]
            for name in removed.topics:
                resp["topics"].append({"error_code": code, "name": name, "topic_id": ZERO_UUID,
                                       "is_internal": False, "partitions": [],
                                       "topic_authorized_operations": -2147483648})
            for tid in removed.topic_ids:
                resp["topics"].append({"error_code": code, "name": None, "topic_id": tid,
                                       "is_internal": False, "partitions": [],
                                       "topic_authorized_operations": -2147483648})
        elif k == ApiKey.PRODUCE:
            for name, parts in removed.topics.items():
                resp["responses"].append({"name": name, "partition_responses": [
                    {"index": p, "error_code": code, "base_offset": -1, "record_errors": []} for p in parts]})
        elif k == ApiKey.FETCH:
            for name, parts in removed.topics.items():
                resp["responses"].append({"topic": name, "partitions": [
                    {"partition_index": p, "error_code": code, "high_watermark": -1, "records": b""} for p in parts]})
        elif k == ApiKey.LIST_OFFSETS:
            for name, parts in removed.topics.items():
                resp["topics"].append({"name": name, "partitions": [
                    {"partition_index": p, "error_code": code, "old_style_offsets": [], "timestamp": -1,
                     "offset": -1, "leader_epoch": -1} for p in parts]})
        elif k == ApiKey.OFFSET_COMMIT:
            for name, parts in removed.topics.items():
                resp["topics"].append({"name": name, "partitions": [
                    {"partition_index": p, "error_code": code} for p in parts]})
        elif k == ApiKey.CREATE_TOPICS:
            for name in removed.topics:
                resp["topics"].append({"name": name, "error_code": code, "error_message": "Authorization failed.",
                                       "num_partitions": -1, "replication_factor": -1, "configs": None})
        elif k == ApiKey.DELETE_TOPICS:
            for name in removed.topics:
                resp["responses"].append({"name": name, "error_code": code})
            for tid, shown in removed.topic_ids.items():
                resp["responses"].append({"name": shown, "topic_id": tid, "error_code": code})
        elif k == ApiKey.DELETE_RECORDS:
            for name, parts in removed.topics.items():
                resp["topics"].append({"name": name, "partitions": [
                    {"partition_index": p, "low_watermark": -1, "error_code": code} for p in parts]})
        elif k == ApiKey.CREATE_PARTITIONS:
            for name in removed.topics:
                resp["results"].append({"name": name, "error_code": code, "error_message": "Authorization failed."})
        elif k == ApiKey.DESCRIBE_PRODUCERS:
            for name, parts in removed.topics.items():
                resp["topics"].append({"name": name, "partitions": [
                    {"partition_index": p, "error_code": code, "error_message": None, "active_producers": []}
                    for p in parts]})
        elif k == ApiKey.OFFSET_FETCH and req.api_version >= 8:
            for g, (every, taken) in zip(resp["groups"], removed.groups, strict=True):
                if every:
                    g["topics"] = [t for t in g["topics"] if self.allowed(Op.DESCRIBE, R.TOPIC, t["name"])]
                for name, parts in taken.items():
                    g["topics"].append({"name": name, "partitions": [
                        {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
                         "metadata": None, "error_code": code} for p in parts]})
            resp["groups"] += [{"group_id": gid, "topics": [], "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED)}
                               for gid in removed.names]
        elif k in (ApiKey.TXN_OFFSET_COMMIT, ApiKey.OFFSET_FETCH):
            if removed.filter_listing:  # OffsetFetch of all topics: only the describable shown
                resp["topics"] = [t for t in resp["topics"] if self.allowed(Op.DESCRIBE, R.TOPIC, t["name"])]
            for name, parts in removed.topics.items():
                if k == ApiKey.OFFSET_FETCH:
                    rows = [{"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
                             "metadata": None, "error_code": code} for p in parts]
                else:
                    rows = [{"partition_index": p, "error_code": code} for p in parts]
                resp["topics"].append({"name": name, "partitions": rows})
        elif k == ApiKey.ADD_PARTITIONS_TO_TXN and removed.not_attempted:  # else: the handler's answer
            not_attempted = int(ErrorCode.OPERATION_NOT_ATTEMPTED)
            results = []
            for name, parts in removed.not_attempted.items():
                c = code if name in removed.topics else not_attempted
                results.append({"name": name, "results_by_partition": [
                    {"partition_index": p, "partition_error_code": c} for p in parts]})
            resp["results_by_topic_v3_and_below"] = results
        elif k == ApiKey.DESCRIBE_GROUPS:
            for g in removed.names:
                resp["groups"].append({"error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED), "group_id": g,
                                       "group_state": "", "protocol_type": "", "protocol_data": "", "members": [],
                                       "authorized_operations": -2147483648})
        elif k == ApiKey.CONSUMER_GROUP_DESCRIBE:
            # as Kafka (KAFKA-18813): a group whose members hold or are to get a topic the
            # principal may not describe is not shown
            for i, g in enumerate(resp["groups"]):
                named = {tp["topic_name"] for m in g["members"] for a in ("assignment", "target_assignment")
                         for tp in m[a]["topic_partitions"]}
                if any(not self.allowed(Op.DESCRIBE, R.TOPIC, t) for t in named):
                    resp["groups"][i] = {
                        **g, "error_code": code, "members": [], "group_state": "", "group_epoch": -1,
                        "assignment_epoch": -1, "assignor_name": "",
                        "error_message": "The group has described topic(s) that the client is not authorized to "
                                         "describe."}
            for g in removed.names:
                resp["groups"].append({"error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED), "error_message": None,
                                       "group_id": g, "group_state": "", "group_epoch": -1, "assignment_epoch": -1,
                                       "assignor_name": "", "members": [], "authorized_operations": -2147483648})
        elif k == ApiKey.DELETE_GROUPS:
            for g in removed.names:
                resp["results"].append({"group_id": g, "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED)})
        elif k == ApiKey.ALTER_USER_SCRAM_CREDENTIALS:
            denied = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            for user in dict.fromkeys(e["name"] for e in removed.denied):
                resp["results"].append({"user": user, "error_code": denied, "error_message": None})
        elif k == ApiKey.ALTER_CLIENT_QUOTAS:
            denied = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            for e in removed.denied:
                resp["entries"].append({"error_code": denied, "error_message": None, "entity": e["entity"]})
        elif k == ApiKey.ALTER_REPLICA_LOG_DIRS:
            denied = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            for d in removed.denied:
                for t in d["topics"]:
                    resp["results"].append({"topic_name": t["name"], "partitions": [
                        {"partition_index": p, "error_code": denied} for p in t["partitions"]]})
        elif k == ApiKey.LIST_GROUPS:
            resp["groups"] = [g for g in resp["groups"] if self.allowed(Op.DESCRIBE, R.GROUP, g["group_id"])]
        elif k == ApiKey.DESCRIBE_TRANSACTIONS:
            for t in removed.names:
                resp["transaction_states"].append({
                    "error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), "transactional_id": t,
                    "transaction_state": "", "transaction_timeout_ms": 0, "transaction_start_time_ms": -1,
                    "producer_id": -1, "producer_epoch": -1, "topics": []})
        elif k == ApiKey.LIST_TRANSACTIONS:
            resp["transaction_states"] = [t for t in resp["transaction_states"]
                                          if self.allowed(Op.DESCRIBE, R.TRANSACTIONAL_ID, t["transactional_id"])]
        return resp
