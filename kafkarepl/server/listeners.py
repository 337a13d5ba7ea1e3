"""Listeners (Kafka's `listeners`): each a bound socket with its own security, and the
name clients connected through, which decides the endpoints they are told about
(Metadata, FindCoordinator, DescribeCluster answer every broker's endpoint on the
client's own listener, as Kafka)."""

from __future__ import annotations

import contextvars
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Listener:
    name: str
    host: str
    port: int  # 0: any free port, the bound one after start
    ssl_context: ssl.SSLContext | None = None  # an SSL or SASL_SSL listener
    sasl_factory: Callable[[], Any] | None = None  # a SASL listener: an authenticator per connection
    # SSL: certificate subject DN -> principal name (ssl.principal.mapping.rules), None: refused
    principal_name: Callable[[str], str | None] | None = None


_current: contextvars.ContextVar[str | None] = contextvars.ContextVar("kafkarepl_listener", default=None)


def set_current_listener(name: str) -> None:
    """The listener of the request being handled (set in the request's own context)."""
    _current.set(name)


def current_listener() -> str | None:
    return _current.get()


def endpoint_for(endpoints: dict[str, tuple[str, int]], default: tuple[str, int]) -> tuple[str, int] | None:
    """A broker's endpoint on the current request's listener; None if it has none there
    (Kafka leaves such brokers out). Outside a request: `default`."""
    name = _current.get()
    if name is None or not endpoints:
        return default
    return endpoints.get(name)
