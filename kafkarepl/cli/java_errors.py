"""How Kafka's Java tools name a broker's error: the client exception's class, and for
the commonest ones the message Kafka's Errors enum gives it (tools print
`ExecutionException.getMessage()`, "<class>: <message>")."""

from __future__ import annotations

from kafkarepl.errors import ErrorCode

_PACKAGE = "org.apache.kafka.common.errors."
# Codes whose exception class is not the CamelCase of the code's name.
_CLASSES = {
    ErrorCode.KAFKA_STORAGE_ERROR: "KafkaStorageException",
    ErrorCode.REQUEST_TIMED_OUT: "TimeoutException",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "InvalidTopicException",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "TopicAuthorizationException",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "ClusterAuthorizationException",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "GroupAuthorizationException",
    ErrorCode.SASL_AUTHENTICATION_FAILED: "SaslAuthenticationException",
}
_MESSAGES = {
    ErrorCode.OFFSET_OUT_OF_RANGE: "The requested offset is not within the range of offsets maintained by the server.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.LEADER_NOT_AVAILABLE: "There is no leader for this topic-partition as we are in the middle of a "
                                    "leadership election.",
    ErrorCode.NOT_LEADER_OR_FOLLOWER: "For requests intended only for the leader, this error indicates that the "
                                      "broker is not the current leader. For requests intended for any replica, "
                                      "this error indicates that the broker is not a replica of the topic "
                                      "partition.",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.POLICY_VIOLATION: "Request parameters do not satisfy the configured policy.",
    ErrorCode.KAFKA_STORAGE_ERROR: "Disk error when trying to access log file on the disk.",
}


def java_exception_class(code: int) -> str | None:
    """The Java client's exception class for `code` (None for NONE)."""
    if code == 0:
        return None
    try:
        ec = ErrorCode(code)
    except ValueError:
        return _PACKAGE + "UnknownServerException"
    camel = "".join(w.capitalize() for w in ec.name.split("_"))
    return _PACKAGE + _CLASSES.get(ec, f"{camel}Exception")


def java_exception_message(code: int) -> str:
    """`<class>: <message>` as a Java tool prints a failed future's exception."""
    cls = java_exception_class(code) or ""
    try:
        msg = _MESSAGES.get(ErrorCode(code))
    except ValueError:
        msg = None
    return f"{cls}: {msg}" if msg else cls
