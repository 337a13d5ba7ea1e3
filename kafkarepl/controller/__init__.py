"""ZooKeeper-backed controller: election, broker liveness, placement, leader election,
topic create/delete/add-partitions, reassignment, controlled shutdown, rebalance."""
