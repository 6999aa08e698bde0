"""OTLP/JSON log requests read straight from the parsed document (orjson), without
protobuf's `json_format` (pure Python, about a millisecond per record). The values read
are the ones the protobuf path reads (`common._any_value` of the same AnyValue): an int64
is an int whether sent as a string or a number, a double a float, bytes their hex. Field
names are accepted in lowerCamelCase (the OTLP/JSON spelling) and in the proto's
snake_case, as `json_format` accepts both. Identity attributes are redacted in the
document itself, which is then stored as JSON. No Django.
"""

from __future__ import annotations

import base64
import binascii
import math

from traces.formats.otlp import OtlpDecodeError
from traces.formats.telemetry.common import IDENTITY_DROP, IDENTITY_SET, Rejected


class BadJson(ValueError):
    """A part of the document is not what OTLP/JSON puts there."""


def _field(node: dict, camel: str, snake: str, default=None):
    value = node.get(camel)
    return node.get(snake, default) if value is None else value


def _int64(raw, what: str) -> int:
    if isinstance(raw, bool):
        raise BadJson(f"{what} must be an integer, got {raw!r}")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str):
        try:
            return int(raw)
        except ValueError:
            pass
    raise BadJson(f"{what} must be an integer, got {raw!r}")


def _double(raw) -> float | str:
    if isinstance(raw, str):
        special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
        if raw in special:
            return str(special[raw])
        try:
            raw = float(raw)
        except ValueError:
            raise BadJson(f"doubleValue must be a number, got {raw!r}") from None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise BadJson(f"doubleValue must be a number, got {raw!r}")
    number = float(raw)
    return number if math.isfinite(number) else str(number)


def json_value(value):
    """An AnyValue object of OTLP/JSON, read as `common._any_value` reads the message."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BadJson(f"an AnyValue must be an object, got {value!r}")
    for camel, snake in (("stringValue", "string_value"), ("boolValue", "bool_value"),
                         ("intValue", "int_value"), ("doubleValue", "double_value"),
                         ("arrayValue", "array_value"), ("kvlistValue", "kvlist_value"),
                         ("bytesValue", "bytes_value")):  # fmt: skip
        raw = _field(value, camel, snake)
        if raw is None:
            continue
        if camel == "stringValue":
            if not isinstance(raw, str):
                raise BadJson(f"stringValue must be a string, got {raw!r}")
            return raw
        if camel == "boolValue":
            if not isinstance(raw, bool):
                raise BadJson(f"boolValue must be true or false, got {raw!r}")
            return raw
        if camel == "intValue":
            return _int64(raw, "intValue")
        if camel == "doubleValue":
            return _double(raw)
        if camel == "arrayValue":
            return [
                json_value(v) for v in _list(raw.get("values") if isinstance(raw, dict) else raw)
            ]
        if camel == "kvlistValue":
            items = _list(raw.get("values") if isinstance(raw, dict) else raw)
            return dict(json_pair(item) for item in items)
        try:
            return base64.b64decode(raw, validate=False).hex()
        except (binascii.Error, TypeError, ValueError):
            raise BadJson(f"bytesValue must be base64, got {raw!r}") from None
    return None


def _list(value) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadJson(f"expected a list, got {type(value).__name__}")
    return value


def json_pair(item) -> tuple[str, object]:
    if not isinstance(item, dict):
        raise BadJson(f"an attribute must be an object, got {item!r}")
    key = item.get("key", "")
    if not isinstance(key, str):
        raise BadJson(f"an attribute key must be a string, got {key!r}")
    return key, json_value(item.get("value"))


class JsonRecord:
    """The fields of one logRecord the event reader uses, as the lean record has them."""

    __slots__ = ("attributes", "body", "event_name", "observed_time_unix_nano", "time_unix_nano")

    def __init__(self, node):
        if not isinstance(node, dict):
            raise BadJson(f"a logRecord must be an object, got {type(node).__name__}")
        self.attributes = _list(node.get("attributes"))
        self.event_name = _field(node, "eventName", "event_name", "")
        if not isinstance(self.event_name, str):
            raise BadJson(f"eventName must be a string, got {self.event_name!r}")
        body = node.get("body")
        self.body = (
            body.get("stringValue", body.get("string_value")) if isinstance(body, dict) else None
        )
        if not isinstance(self.body, str):
            self.body = None
        self.time_unix_nano = _int64(
            _field(node, "timeUnixNano", "time_unix_nano", 0), "timeUnixNano"
        )
        self.observed_time_unix_nano = _int64(
            _field(node, "observedTimeUnixNano", "observed_time_unix_nano", 0),
            "observedTimeUnixNano",
        )


class JsonLogs:
    """A parsed OTLP/JSON logs document; `serialized()` is what is stored after redaction."""

    def __init__(self, document):
        if not isinstance(document, dict):
            raise OtlpDecodeError("body must be a JSON object")
        self.document = document
        try:
            self.resource_logs = _list(_field(document, "resourceLogs", "resource_logs"))
        except BadJson as exc:
            raise OtlpDecodeError(f"resourceLogs: {exc}") from None


class JsonReader:
    """Attribute reading and redaction on OTLP/JSON attribute lists (the `_Reader` of the
    JSON path)."""

    def __init__(self, mode: str, hashed):
        self.mode = mode
        self.hashed = hashed  # value -> its keyed hash
        self.redacted = False

    def attributes(self, items: list) -> dict:
        try:
            attrs = dict(json_pair(item) for item in items)
        except BadJson as exc:
            raise Rejected(f"an attribute is not OTLP/JSON ({exc})") from None
        if self.mode != "keep" and not IDENTITY_SET.isdisjoint(attrs):
            self.redact(items)
            for key in IDENTITY_SET.intersection(attrs):
                if self.mode == IDENTITY_DROP:
                    del attrs[key]
                else:
                    attrs[key] = self.hashed(attrs[key])
        return attrs

    def redact(self, items: list) -> None:
        for index in range(len(items) - 1, -1, -1):
            item = items[index]
            if not isinstance(item, dict) or item.get("key") not in IDENTITY_SET:
                continue
            self.redacted = True
            if self.mode == IDENTITY_DROP:
                del items[index]
            else:
                item["value"] = {"stringValue": self.hashed(json_value(item.get("value")))}
