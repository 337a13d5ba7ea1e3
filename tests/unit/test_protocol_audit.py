"""The response audit finds fields a handler left out, and only those."""

from kafkarepl.protocol import API, ApiKey
from kafkarepl.protocol.audit import missing_fields


def test_fields_without_a_default_left_out_are_reported_with_their_path() -> None:
    spec = API[ApiKey.PRODUCE].response
    part = {"index": 0, "error_code": 0, "base_offset": 5}
    body = {"responses": [{"name": "t", "partition_responses": [part]}], "throttle_time_ms": 0}
    # v8 added record_errors (no default); log_append_time_ms etc. have schema defaults.
    assert missing_fields(spec, 8, body) == ["responses[].partition_responses[].record_errors"]
    assert missing_fields(spec, 7, body) == []
    part["record_errors"] = []
    assert missing_fields(spec, 8, body) == []
    del body["throttle_time_ms"]
    assert missing_fields(spec, 8, body) == ["throttle_time_ms"]


def test_tagged_fields_may_be_left_out() -> None:
    spec = API[ApiKey.API_VERSIONS].response
    body = {"error_code": 0, "api_keys": [{"api_key": 0, "min_version": 0, "max_version": 9}],
            "throttle_time_ms": 0}
    assert missing_fields(spec, 3, body) == []  # supported_features etc. are tagged in v3
