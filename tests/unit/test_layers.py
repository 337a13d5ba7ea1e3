"""The package layering that docs/interfaces.md promises, checked from the source."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "kafkarepl"


def _imports(path: Path) -> set[str]:
    """Every kafkarepl module a file imports (also under TYPE_CHECKING and in functions)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kafkarepl"):
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("kafkarepl"))
    return out


def _modules(package: str) -> dict[str, set[str]]:
    mods = {}
    for path in sorted((ROOT / package).glob("*.py")):
        name = f"kafkarepl.{package}.{path.stem}" if path.stem != "__init__" else f"kafkarepl.{package}"
        mods[name] = _imports(path)
    return mods


def test_server_has_no_import_cycle() -> None:
    mods = _modules("server")
    graph = {m: {d for d in deps if d in mods and d != m} for m, deps in mods.items()}
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in graph[m]:
            if state.get(d) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*path[path.index(d):], d]))
            if d not in state:
                visit(d, [*path, d])
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m, [m])


def test_no_service_reaches_through_a_broker_object() -> None:
    for path in (ROOT / "server").glob("*.py"):
        if path.name == "broker.py":
            continue
        assert "kafkarepl.server.broker" not in _imports(path), f"{path.name} imports the composition root"


def test_replication_core_imports_no_io_layer() -> None:
    forbidden = ("kafkarepl.server", "kafkarepl.storage", "kafkarepl.controller", "kafkarepl.client", "kafkarepl.zk")
    for mod, deps in _modules("replication").items():
        bad = [d for d in deps if d.startswith(forbidden)]
        assert not bad, f"{mod} imports {bad}"
        src = (ROOT / "replication" / (mod.rsplit(".", 1)[-1] + ".py"))
        if src.exists():
            text = src.read_text()
            assert "import asyncio" not in text and "import kazoo" not in text, mod
