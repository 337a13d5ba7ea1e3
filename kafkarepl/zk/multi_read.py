"""ZooKeeper's multiRead (3.6+, opcode 22) for kazoo, which lacks it: many getData and
getChildren in one request and one response, so the controller reads 10,000 partition
states in a few round trips instead of 10,000 requests (each one costs the loop thread a
GIL hand-over with kazoo's connection thread).

Wire format (ZooKeeper's MultiOperationRecord / MultiResponse): per op a MultiHeader
(type, done=false, err=-1) and the op's request record, then MultiHeader(-1, true, -1);
the response has per op a MultiHeader(type, false, err) and the op's response record
(GetDataResponse, GetChildrenResponse, or ErrorResponse with type -1), then the end header.
A read that fails (e.g. no node) fails alone: its result is the error, not the request's.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

from kazoo.exceptions import EXCEPTIONS
from kazoo.protocol.serialization import (
    GetChildren,
    GetData,
    MultiHeader,
    int_struct,
    multiheader_struct,
    read_buffer,
    read_string,
    stat_struct,
)
from kazoo.protocol.states import ZnodeStat

GET_DATA = GetData.type  # 4
GET_CHILDREN = GetChildren.type  # 8
ERROR = -1


class MultiRead(namedtuple("MultiRead", "operations")):
    """operations: GetData / GetChildren request tuples (no watchers). The response is a
    list: (data, ZnodeStat) per getData, [names] per getChildren, or the exception."""

    type = 22

    def serialize(self) -> bytes:
        b = bytearray()
        for op in self.operations:
            b.extend(MultiHeader(op.type, False, -1).serialize())
            b.extend(op.serialize())
        b.extend(multiheader_struct.pack(-1, True, -1))
        return bytes(b)

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> list[Any]:
        results: list[Any] = []
        while True:
            (kind, done, err), offset = multiheader_struct.unpack_from(buf, offset), (
                offset + multiheader_struct.size
            )
            if done:
                return results
            if kind == GET_DATA:
                data, offset = read_buffer(buf, offset)
                results.append((data, ZnodeStat._make(stat_struct.unpack_from(buf, offset))))
                offset += stat_struct.size
            elif kind == GET_CHILDREN:
                count = int_struct.unpack_from(buf, offset)[0]
                offset += int_struct.size
                names = []
                for _ in range(max(count, 0)):
                    name, offset = read_string(buf, offset)
                    names.append(name)
                results.append(names)
            elif kind == ERROR:
                code = int_struct.unpack_from(buf, offset)[0]
                offset += int_struct.size
                results.append(EXCEPTIONS[code]())
            else:
                raise ValueError(f"multiRead: unexpected result type {kind} (err {err})")


def get_data_op(path: str) -> GetData:
    return GetData(path, None)


def get_children_op(path: str) -> GetChildren:
    return GetChildren(path, None)
