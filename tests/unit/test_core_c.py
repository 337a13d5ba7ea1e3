"""Runs the standalone C driver (tests/c/test_core.c) on csrc/: plain, under valgrind,
and with AddressSanitizer + UBSan. The driver feeds every parser truncated, bit-flipped
and random inputs in exactly-sized heap blocks, so any out-of-bounds read is reported."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

C_TESTS = Path(__file__).resolve().parents[1] / "c"
IN_CI = os.environ.get("CI") == "true"


def make(out: Path, target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "-s", "-C", str(C_TESTS), f"OUT={out}", target],
                          capture_output=True, text=True, timeout=300)


def require(tool: str) -> None:
    if shutil.which(tool) is None:
        if IN_CI:
            pytest.fail(f"{tool} is required in CI")
        pytest.skip(f"{tool} not installed")


def test_c_driver(tmp_path):
    require("make")
    result = make(tmp_path, "check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert " 0 failures" in result.stdout


def test_c_driver_under_valgrind(tmp_path):
    require("make")
    require("valgrind")
    result = make(tmp_path, "valgrind")
    assert result.returncode == 0, result.stdout + result.stderr
    assert " 0 failures" in result.stdout


def test_c_driver_with_sanitizers(tmp_path):
    require("make")
    probe = subprocess.run(["cc", "-fsanitize=address,undefined", "-x", "c", "-", "-o",
                            str(tmp_path / "probe")], input="int main(void){return 0;}",
                           capture_output=True, text=True)
    if probe.returncode != 0:
        if IN_CI:
            pytest.fail("the C compiler cannot build with -fsanitize=address,undefined")
        pytest.skip("no sanitizer runtime")
    result = make(tmp_path, "asan")
    assert result.returncode == 0, result.stdout + result.stderr
    assert " 0 failures" in result.stdout
