"""How a client connection secures itself: TLS (an ssl.SSLContext) and SASL
(PLAIN or SCRAM-SHA-256/512 with a username and password), as a broker's own
connections to other brokers use them on a secured inter-broker listener."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import ssl
from dataclasses import dataclass
from typing import Any

from kafkarepl.errors import ErrorCode, KafkaError

_HASH = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


@dataclass
class ClientSecurity:
    # replaced when a broker's inter-broker listener gets new stores at run time
    # (server/listener_keystores.py): every connection made after reads the new one
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None  # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    sasl_username: str = ""
    sasl_password: str = ""
    # SCRAM with a delegation token (KIP-48): the username is the token id, the password
    # its HMAC in base64, and the client-first message carries the extension tokenauth=true
    token_auth: bool = False


async def sasl_login(send: Any, sec: ClientSecurity) -> int:
    """SaslHandshake v1 + SaslAuthenticate over `send(api_key, version, body)`; returns
    the session lifetime in ms the broker granted (0: no limit; KIP-368), raises
    KafkaError on failure."""
    from kafkarepl.protocol import ApiKey

    mech = sec.sasl_mechanism or ""
    r = await send(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mech})
    if r["error_code"]:
        raise KafkaError(f"SASL mechanism {mech}: {ErrorCode(r['error_code']).name}", ErrorCode(r["error_code"]))
    lifetime = [0]

    async def step(data: bytes) -> bytes:
        resp = await send(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": data})
        if resp["error_code"]:
            raise KafkaError(resp.get("error_message") or "SASL authentication failed",
                             ErrorCode(resp["error_code"]))
        lifetime[0] = resp.get("session_lifetime_ms") or 0
        return bytes(resp["auth_bytes"] or b"")

    if mech == "PLAIN":
        await step(f"\x00{sec.sasl_username}\x00{sec.sasl_password}".encode())
        return lifetime[0]
    h = _HASH[mech]
    cnonce = base64.b64encode(os.urandom(18)).decode()
    user = sec.sasl_username.replace("=", "=3D").replace(",", "=2C")
    first_bare = f"n={user},r={cnonce}" + (",tokenauth=true" if sec.token_auth else "")
    server_first = (await step(f"n,,{first_bare}".encode())).decode()
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    if not attrs["r"].startswith(cnonce):
        raise KafkaError("SCRAM: server nonce does not extend ours", ErrorCode.SASL_AUTHENTICATION_FAILED)
    salted = hashlib.pbkdf2_hmac(h, sec.sasl_password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", h).digest()
    stored_key = hashlib.new(h, client_key).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, h).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    server_final = (await step(f"{without_proof},p={proof}".encode())).decode()
    server_key = hmac.new(salted, b"Server Key", h).digest()
    expected = base64.b64encode(hmac.new(server_key, auth_message, h).digest()).decode()
    if server_final != f"v={expected}":
        raise KafkaError("SCRAM: the server's signature does not verify", ErrorCode.SASL_AUTHENTICATION_FAILED)
    return lifetime[0]
