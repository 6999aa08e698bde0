"""A lean reading of OTLP log requests: the log records' attributes as raw bytes.

`ExportLogsServiceRequest` decoded with the generated classes makes two Python objects
per attribute (the KeyValue and its AnyValue) before a value is read, which was most of
the time spent reading a batch. Here the same wire bytes are parsed with a schema of our
own that declares only the fields the event reader uses and keeps each attribute
(`KeyValue`) as its encoded bytes; the attribute bytes are decoded in Python, once per
distinct attribute in a request (values repeat from record to record: model, version,
session, identity). Fields the schema does not declare are kept as unknown fields, so
`SerializeToString()` gives back an equivalent request (their order may differ), which
is what a redacted request is stored as.

Attribute bytes that are not the plain shape (key, then one scalar value) are decoded
with the generated classes, so every value reads as `common._any_value` reads it. No
Django.
"""

from __future__ import annotations

import math
import struct

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from traces.formats.telemetry.common import _any_value


def _schema():
    field = descriptor_pb2.FieldDescriptorProto
    one, many = field.LABEL_OPTIONAL, field.LABEL_REPEATED
    message, raw = field.TYPE_MESSAGE, field.TYPE_BYTES
    file = descriptor_pb2.FileDescriptorProto(
        name="context_governance/otlp_logs_lean.proto", package="cg.lean", syntax="proto3"
    )
    messages = {
        # name: [(field, number, type, label, message type)], numbers as in opentelemetry-proto
        "LogsRequest": [("resource_logs", 1, message, many, "ResourceLogs")],
        "ResourceLogs": [("resource", 1, message, one, "Resource"),
                         ("scope_logs", 2, message, many, "ScopeLogs")],
        "Resource": [("attributes", 1, raw, many, None)],
        "Scope": [("attributes", 3, raw, many, None)],
        "ScopeLogs": [("scope", 1, message, one, "Scope"),
                      ("log_records", 2, message, many, "LogRecord")],
        "LogRecord": [("time_unix_nano", 1, field.TYPE_FIXED64, one, None),
                      ("body", 5, raw, one, None), ("attributes", 6, raw, many, None),
                      ("observed_time_unix_nano", 11, field.TYPE_FIXED64, one, None),
                      ("event_name", 12, field.TYPE_STRING, one, None)],
    }  # fmt: skip
    for name, fields in messages.items():
        described = file.message_type.add(name=name)
        for field_name, number, kind, label, type_name in fields:
            item = described.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                item.type_name = f".cg.lean.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("cg.lean.LogsRequest"))


LeanLogsRequest = _schema()

_DOUBLE = struct.Struct("<d")
_SIGN = 1 << 63


class BadAttribute(ValueError):
    """Attribute bytes that are not a KeyValue."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    result, shift = byte & 0x7F, 7
    while True:
        pos += 1
        byte = buf[pos]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos + 1
        shift += 7


def _scalar(buf: bytes, start: int, end: int):
    """The value of AnyValue bytes buf[start:end] holding exactly one string, int, double
    or bool field; anything else through the generated class."""
    if start < end:
        tag = buf[start]
        if tag == 0x0A:  # string_value
            size, pos = _varint(buf, start + 1)
            if pos + size == end:
                return buf[pos:end].decode()
        elif tag == 0x18:  # int_value (int64, two's complement)
            number, pos = _varint(buf, start + 1)
            if pos == end:
                return number - (1 << 64) if number >= _SIGN else number
        elif tag == 0x21 and start + 9 == end:  # double_value
            number = _DOUBLE.unpack_from(buf, start + 1)[0]
            return number if math.isfinite(number) else str(number)
        elif tag == 0x10:  # bool_value
            number, pos = _varint(buf, start + 1)
            if pos == end:
                return bool(number)
    return _any_value(AnyValue.FromString(buf[start:end]))


def key_value(blob: bytes) -> tuple[str, object]:
    """(key, value) of one encoded KeyValue; BadAttribute when it is not one."""
    try:
        if blob and blob[0] == 0x0A:
            size, pos = _varint(blob, 1)
            key_end = pos + size
            if key_end == len(blob):
                return blob[pos:key_end].decode(), None
            if blob[key_end] == 0x12:
                value_size, value_start = _varint(blob, key_end + 1)
                if value_start + value_size == len(blob):
                    return blob[pos:key_end].decode(), _scalar(blob, value_start, len(blob))
        item = KeyValue.FromString(blob)
        return item.key, _any_value(item.value)
    except (IndexError, ValueError, DecodeError, struct.error) as exc:
        raise BadAttribute(f"not an OTLP KeyValue ({exc})") from None


def _length(size: int) -> bytes:
    out = bytearray()
    while size >= 0x80:
        out.append((size & 0x7F) | 0x80)
        size >>= 7
    out.append(size)
    return bytes(out)


def string_key_value(key: str, text: str) -> bytes:
    """The encoded KeyValue {key, AnyValue{string_value: text}}."""
    key_bytes, text_bytes = key.encode(), text.encode()
    value = b"\x0a" + _length(len(text_bytes)) + text_bytes
    return b"\x0a" + _length(len(key_bytes)) + key_bytes + b"\x12" + _length(len(value)) + value


def body_string(blob: bytes) -> str | None:
    """The LogRecord body's string value, or None when the body is not a string."""
    if not blob or blob[0] != 0x0A:
        return None
    try:
        value = _scalar(blob, 0, len(blob))
    except (IndexError, ValueError, DecodeError, struct.error):
        return None
    return value if isinstance(value, str) else None


def lean_logs(request) -> LeanLogsRequest:
    """A lean request from bytes or from a generated ExportLogsServiceRequest."""
    lean = LeanLogsRequest()
    lean.ParseFromString(request if isinstance(request, bytes) else request.SerializeToString())
    return lean
