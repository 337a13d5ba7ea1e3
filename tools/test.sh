#!/usr/bin/env bash
# The test command: sets everything up on a fresh machine, then runs the whole suite
# (unit, simulation, integration with real ZooKeeper, brokers and clients).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
.venv/bin/python -m ruff check kafkarepl tests bench tools
.venv/bin/python -m mypy  # files and settings: [tool.mypy] in pyproject.toml
exec .venv/bin/python -m pytest -q -p no:cacheprovider --timeout=600 tests "$@"
