"""SaslSession: a connection's login and KIP-368 re-authentications under Kafka's rules,
with the real SaslAuthenticator (PLAIN) and the loop's time given by the test."""

from __future__ import annotations

from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey
from kafkarepl.server.sasl import SaslAuthenticator
from kafkarepl.server.sasl_session import SaslSession

USERS = {"alice": "a-pw", "bob": "b-pw"}
HS, AUTH = ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE


def session(reauth_ms: int) -> SaslSession:
    return SaslSession(lambda: SaslAuthenticator(["PLAIN"], USERS, lambda m, u: None, reauth_ms))


def token(user: str, pw: str) -> dict:
    return {"auth_bytes": f"\x00{user}\x00{pw}".encode()}


def logged_in(reauth_ms: int, now: float = 100.0) -> SaslSession:
    s = session(reauth_ms)
    assert s.login(HS, 1, {"mechanism": "PLAIN"}, now).body["error_code"] == 0
    step = s.login(AUTH, 2, token("alice", "a-pw"), now)
    assert step.body["error_code"] == 0 and not step.failed and s.complete and s.principal == "User:alice"
    return s


def test_login_then_no_relogin_when_the_session_never_expires() -> None:
    s = logged_in(0)
    assert s.expires is None and not s.expired(1e9)
    step = s.relogin(HS, {"mechanism": "PLAIN"}, 200.0)
    assert step.body["error_code"] == ErrorCode.ILLEGAL_SASL_STATE and not step.failed
    step = s.relogin(AUTH, token("alice", "a-pw"), 200.0)
    assert step.body["error_code"] == ErrorCode.ILLEGAL_SASL_STATE and not step.failed
    assert s.complete and s.principal == "User:alice"


def test_relogin_within_the_session_and_at_most_once_a_second() -> None:
    s = logged_in(10_000, now=100.0)
    assert s.expires == 110.0 and not s.expired(109.9) and s.expired(110.0)
    assert s.relogin(HS, {"mechanism": "PLAIN"}, 105.0).body["error_code"] == 0
    step = s.relogin(AUTH, token("alice", "a-pw"), 105.0)
    assert step.reauthenticated and step.body["error_code"] == 0 and s.expires == 115.0
    step = s.relogin(HS, {"mechanism": "PLAIN"}, 105.9)  # under a second since the last start
    assert step.body["error_code"] == ErrorCode.ILLEGAL_SASL_STATE and not step.failed
    assert s.relogin(HS, {"mechanism": "PLAIN"}, 106.0).body["error_code"] == 0


def test_relogin_must_keep_mechanism_and_principal() -> None:
    s = logged_in(10_000)
    step = s.relogin(HS, {"mechanism": "SCRAM-SHA-256"}, 101.0)
    assert step.body["error_code"] == ErrorCode.ILLEGAL_SASL_STATE and step.failed
    s = logged_in(10_000)
    s.relogin(HS, {"mechanism": "PLAIN"}, 101.0)
    step = s.relogin(AUTH, token("bob", "b-pw"), 101.0)
    assert step.body["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED and step.failed
    assert not step.reauthenticated and s.principal == "User:alice"


def test_failed_login_and_handshake_v0_close_the_connection() -> None:
    s = session(0)
    s.login(HS, 1, {"mechanism": "PLAIN"}, 1.0)
    step = s.login(AUTH, 2, token("alice", "wrong"), 1.0)
    assert step.failed and step.body["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED and not s.complete
    step = session(0).login(HS, 0, {"mechanism": "PLAIN"}, 1.0)
    assert step.failed and step.body["error_code"] == ErrorCode.UNSUPPORTED_VERSION


def test_only_a_handshake_opens_a_login() -> None:
    s = session(0)
    assert not s.readable_before_login(AUTH)  # Kafka: an invalid request, closed unanswered
    assert not s.readable_before_login(ApiKey.METADATA)
    assert s.readable_before_login(HS)
    assert s.login(HS, 1, {"mechanism": "PLAIN"}, 1.0).body["error_code"] == 0
    assert s.readable_before_login(AUTH) and not s.readable_before_login(ApiKey.PRODUCE)
