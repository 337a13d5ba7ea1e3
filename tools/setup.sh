#!/usr/bin/env bash
# Installs everything kafkarepl needs on a fresh Debian/Ubuntu machine, idempotently:
# ZooKeeper (Debian package; Java 17 must be present or is installed), kcat, a virtualenv
# in .venv with the package built in place (C core compiled) and its test extras.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
[ -f /usr/share/java/zookeeper.jar ] || need_apt+=(zookeeper)
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
command -v nft >/dev/null 2>&1 || need_apt+=(nftables)
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v valgrind >/dev/null 2>&1 || need_apt+=(valgrind)
command -v strace >/dev/null 2>&1 || need_apt+=(strace)  # tests watch which thread fsyncs
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing Debian packages: ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
# EXTRAS: the quickstart leaves out spark (pyspark is a ~300 MB download it does not use)
EXTRAS=${EXTRAS:-test,fast,spark}
echo "setup: installing kafkarepl (builds the C core) with extras: $EXTRAS"
.venv/bin/python -m pip install -q -e ".[$EXTRAS]"
.venv/bin/python -c "import kafkarepl._core as c; print('setup: C core ok, crc32c backend:', c.crc32c_backend())"
