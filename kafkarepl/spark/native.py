"""The native data plane: kafkarepl's own protocol client plus the C record codec, used by
executors instead of librdkafka when every `kafka.*` setting is one it understands.

`dataPlane` chooses: `auto` (default) takes the native plane when it can and librdkafka
otherwise, `native` insists (an unsupported setting is an error naming it), `librdkafka`
keeps confluent-kafka. Pure Python, no Spark: the driver decides, the executors follow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .options import OptionError

if TYPE_CHECKING:  # asyncio and ssl load on the executors only (the planners need neither)
    import asyncio

DATA_PLANES = ("auto", "native", "librdkafka")

_COMMON = {
    "bootstrap.servers", "client.id", "security.protocol", "ssl.ca.location",
    "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
    "ssl.endpoint.identification.algorithm", "sasl.mechanism", "sasl.mechanisms",
    "sasl.username", "sasl.password", "sasl.jaas.config", "socket.timeout.ms", "request.timeout.ms",
    "socket.connection.setup.timeout.ms",
}
# librdkafka consumer tuning that has no meaning for the native reader is accepted as is.
SOURCE_SETTINGS = _COMMON | {
    "fetch.max.bytes", "max.partition.fetch.bytes", "fetch.wait.max.ms", "isolation.level",
    "fetch.queue.backoff.ms", "queued.min.messages", "queued.max.messages.kbytes", "check.crcs",
}
SINK_SETTINGS = _COMMON | {
    "acks", "request.required.acks", "enable.idempotence", "message.timeout.ms",
    "delivery.timeout.ms", "compression.type", "compression.codec", "partitioner",
    "batch.size", "linger.ms", "queue.buffering.max.ms", "retry.backoff.ms", "retries",
    "max.in.flight.requests.per.connection", "max.in.flight",
}
_VALUES = {
    "security.protocol": {"plaintext", "ssl", "sasl_plaintext", "sasl_ssl"},
    "sasl.mechanism": {"plain", "scram-sha-256", "scram-sha-512"},
    "sasl.mechanisms": {"plain", "scram-sha-256", "scram-sha-512"},
    "isolation.level": {"read_uncommitted"},
    "acks": {"all", "-1", "1"},
    "request.required.acks": {"all", "-1", "1"},
    "enable.idempotence": {"true", "false"},
    "compression.type": {"none", "gzip", "snappy", "lz4", "zstd"},
    "compression.codec": {"none", "gzip", "snappy", "lz4", "zstd"},
    "partitioner": {"consistent_random", "consistent", "murmur2_random", "murmur2", "random"},
    "check.crcs": {"true", "false"},
}


def unsupported(kafka: Mapping[str, str], sink: bool) -> list[str]:
    """The kafka.* settings (or values) the native plane cannot honour."""
    known = SINK_SETTINGS if sink else SOURCE_SETTINGS
    bad = []
    for k, v in kafka.items():
        allowed = _VALUES.get(k)
        if k not in known or (allowed is not None and str(v).strip().lower() not in allowed):
            bad.append(f"{k}={v}")
    return sorted(bad)


def choose(data_plane: str, kafka: Mapping[str, str], sink: bool) -> str:
    """'native' or 'librdkafka' for this query (on the driver)."""
    if data_plane == "librdkafka":
        return "librdkafka"
    bad = unsupported(kafka, sink)
    if not bad:
        return "native"
    if data_plane == "native":
        raise OptionError("dataPlane", "native cannot honour kafka setting(s) " + ", ".join(bad)
                          + " (use dataPlane=auto or librdkafka)")
    return "librdkafka"


@dataclass(frozen=True)
class NativeConfig:
    bootstrap: str
    client_id: str
    request_timeout_s: float
    connect_timeout_s: float
    settings: dict[str, str]

    @classmethod
    def of(cls, kafka: Mapping[str, str], default_client_id: str) -> NativeConfig:
        s = {k: str(v) for k, v in kafka.items()}
        timeout_ms = int(s.get("request.timeout.ms") or s.get("socket.timeout.ms") or 30000)
        return cls(s["bootstrap.servers"], s.get("client.id", default_client_id), timeout_ms / 1000.0,
                   int(s.get("socket.connection.setup.timeout.ms", 30000)) / 1000.0, s)

    def get(self, name: str, default: str) -> str:
        return self.settings.get(name, default).strip()

    def security(self) -> Any:
        """ClientSecurity for the client from librdkafka's names (None: plaintext)."""
        import ssl

        from kafkarepl.client.client_config import sasl_security
        from kafkarepl.client.security import ClientSecurity

        protocol = self.get("security.protocol", "plaintext").lower()
        if protocol == "plaintext":
            return None
        ctx = None
        if protocol in ("ssl", "sasl_ssl"):
            ctx = ssl.create_default_context(cafile=self.settings.get("ssl.ca.location") or None)
            ctx.check_hostname = self.get("ssl.endpoint.identification.algorithm", "https").lower() != "none"
            if self.settings.get("ssl.certificate.location"):
                ctx.load_cert_chain(self.settings["ssl.certificate.location"], self.settings.get("ssl.key.location"),
                                    password=self.settings.get("ssl.key.password") or None)
        if not protocol.startswith("sasl"):
            return ClientSecurity(ctx)
        mech = self.settings.get("sasl.mechanism") or self.settings.get("sasl.mechanisms") or "PLAIN"
        # sasl.jaas.config: Spark's Kafka connector's form (a delegation token: tokenauth="true")
        return sasl_security(ctx, mech, self.get("sasl.jaas.config", ""), self.get("sasl.username", ""),
                             self.get("sasl.password", ""))

    def client(self) -> Any:
        from kafkarepl.client import ClusterClient

        return ClusterClient(self.bootstrap, self.client_id, request_timeout=self.request_timeout_s,
                             connect_timeout=self.connect_timeout_s, security=self.security())


def new_loop() -> asyncio.AbstractEventLoop:
    import asyncio

    try:
        import uvloop  # the `fast` extra, as the brokers use it

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()
