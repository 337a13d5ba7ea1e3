"""The controller's settings: their defaults and how a setting's value is read.

Shared by the controller and the services it wires, so that each reads a setting the
same way (a string "true" from a properties file, or a bool).
"""

from __future__ import annotations

from typing import Any

DEFAULTS: dict[str, Any] = {
    "unclean.leader.election.enable": False,
    "auto.leader.rebalance.enable": True,
    "leader.imbalance.check.interval.seconds": 300,
    "leader.imbalance.per.broker.percentage": 10,
    "delete.topic.enable": True,
}


def as_bool(v: Any) -> bool:
    if isinstance(v, str):
        return v.strip().lower() == "true"
    return bool(v)
