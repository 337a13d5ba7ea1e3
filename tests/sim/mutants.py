"""Deliberately broken variants of the core, to prove the simulator can fail."""

from __future__ import annotations

from kafkarepl.replication import FetcherState, FetchRequest, FollowerFetcher


class HwTruncatingFetcher(FollowerFetcher):
    """Seed 003's follower: on becoming follower (or when lost), truncate to the HW and
    fetch without leader epochs. KIP-101 shows this loses committed data."""

    def next_request(self, now_ms: int):  # type: ignore[override]
        if self.in_flight is not None or now_ms < self.backoff_until_ms or not self.active:
            return None
        p = self.partition
        if self.state is FetcherState.TRUNCATING:
            p.log.truncate_to(p.high_watermark)
            self.state = FetcherState.FETCHING
        log = p.log
        req = FetchRequest(log.log_end_offset, -1, self.leader_epoch, log.log_start_offset)
        self.in_flight = req
        return req
