"""`kafkarepl cluster up --security`: a local cluster with TLS and SCRAM, as Kafka's
documented secure set-up. A CA and a certificate per broker (kafkarepl.tls_certs), every
listener SASL_SSL with SCRAM-SHA-512 (SCRAM-SHA-256 too), brokers logging in to each other
as the `admin` super user whose salted credentials are written to ZooKeeper before any
broker starts (as `kafka-configs.sh --zookeeper ... --entity-type users` does), and ACLs on
with only `admin` allowed everything, and delegation tokens on. Clients get two property files:
`client.properties` (Kafka's Java tools, `kafkarepl ... --command-config`) and
`librdkafka.properties` (`kcat -F`, confluent-kafka)."""

from __future__ import annotations

import asyncio
import logging
import secrets
from pathlib import Path

ADMIN = "admin"
MECHANISM = "SCRAM-SHA-512"


def prepare(directory: Path, zookeeper: str, broker_ids: list[int]) -> tuple[dict[int, dict[str, str]], Path, Path]:
    """Certificates, the admin's SCRAM credentials in ZooKeeper and the client files;
    returns each broker's security properties and the two client files."""
    try:
        from kafkarepl.tls_certs import make_ca, make_cert
    except ImportError as exc:  # the test extra has it
        raise SystemExit(f"kafkarepl cluster up --security needs the cryptography package ({exc})") from None
    directory.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(18)
    ca, ca_key, ca_cert = make_ca(directory, days=365)
    asyncio.run(_store_admin_credentials(zookeeper, password))
    jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{ADMIN}" '
            f'password="{password}";')
    client = directory / "client.properties"
    client.write_text("security.protocol=SASL_SSL\n"
                      f"sasl.mechanism={MECHANISM}\n"
                      f"sasl.jaas.config={jaas}\n"
                      "ssl.truststore.type=PEM\n"
                      f"ssl.truststore.location={ca}\n")
    rdkafka = directory / "librdkafka.properties"
    rdkafka.write_text("security.protocol=SASL_SSL\n"
                       f"sasl.mechanism={MECHANISM}\n"
                       f"sasl.username={ADMIN}\n"
                       f"sasl.password={password}\n"
                       f"ssl.ca.location={ca}\n")
    shared = {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config": jaas,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca),
        "ssl.keystore.type": "PEM",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": f"User:{ADMIN}",
        "delegation.token.secret.key": secrets.token_urlsafe(32),  # delegation tokens on (KIP-48)
    }
    per_broker = {b: {**shared, "ssl.keystore.location": str(make_cert(directory, f"broker-{b}", ca_key, ca_cert,
                                                                        days=365))}
                  for b in broker_ids}
    for f in directory.iterdir():  # private keys and the admin's password
        f.chmod(0o600)
    return per_broker, client, rdkafka


async def _store_admin_credentials(zookeeper: str, password: str) -> None:
    from kafkarepl.server.sasl import ScramCredential
    from kafkarepl.zk.client import AsyncZk
    from kafkarepl.zk.store import KafkaZkStore

    logging.getLogger("kazoo.client").setLevel(logging.ERROR)  # ZooKeeper is starting: retries are expected
    zk = AsyncZk(zookeeper)
    await zk.start(timeout=15)
    try:
        store = KafkaZkStore(zk)
        await store.ensure_layout()
        await store.set_user_config(ADMIN, {m: ScramCredential.from_password(m, password).encode()
                                            for m in ("SCRAM-SHA-512", "SCRAM-SHA-256")})
    finally:
        await zk.stop()
