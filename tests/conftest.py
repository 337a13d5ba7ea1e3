"""Shared pytest set-up: fixtures for real ZooKeeper and real broker processes."""

import os

# Every broker the suite starts checks each response for fields its handler left out
# (kafkarepl/protocol/audit.py); the cluster fixture fails a test whose brokers logged one.
os.environ.setdefault("KAFKAREPL_AUDIT_RESPONSES", "1")

pytest_plugins = ["tests.fixtures.zookeeper", "tests.fixtures.cluster"]
