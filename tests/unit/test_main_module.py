"""`python -m kafkarepl` is the `kafkarepl` command; `import kafkarepl` stays light."""

from __future__ import annotations

import subprocess
import sys


def test_python_dash_m_kafkarepl_lists_the_subcommands():
    out = subprocess.run([sys.executable, "-m", "kafkarepl", "--help"], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    for sub in ("broker", "cluster", "node", "topics"):
        assert sub in out
    r = subprocess.run([sys.executable, "-m", "kafkarepl", "node", "configs", "--config", "/nonexistent"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "kafkarepl node:" in r.stderr


def test_import_kafkarepl_does_not_load_the_embedding_api_until_used():
    code = ("import sys, kafkarepl; assert 'kafkarepl.embedded' not in sys.modules; "
            "kafkarepl.LocalCluster; assert 'kafkarepl.embedded' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
