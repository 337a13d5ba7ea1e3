"""Shared pytest set-up: fixtures for real ZooKeeper and real broker processes."""

pytest_plugins = ["tests.fixtures.zookeeper", "tests.fixtures.cluster"]
