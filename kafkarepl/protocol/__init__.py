"""Kafka wire protocol: APIs declared once as data (messages.py), compiled codecs.

Public API (docs/interfaces.md): ``API``, ``ApiKey``, ``ApiSpec``, ``Request``,
``FileRange``, ``decode_request``, ``encode_response``, ``encode_request``,
``decode_response``; framing in ``FrameReader``.
"""

from .api import (
    API,
    MalformedResponseError,
    Request,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    peek_correlation_id,
    request_header_version,
    response_header_version,
    supported_api_versions,
)
from .codec import ZERO_UUID, EncodeError, FileRange
from .framing import FrameReader, FrameTooLargeError
from .schema import ApiKey, ApiSpec

__all__ = [
    "ZERO_UUID",
    "API",
    "ApiKey",
    "ApiSpec",
    "EncodeError",
    "FileRange",
    "FrameReader",
    "FrameTooLargeError",
    "MalformedResponseError",
    "Request",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "peek_correlation_id",
    "request_header_version",
    "response_header_version",
    "supported_api_versions",
]
