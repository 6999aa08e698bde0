"""`loads`: JSON decoding with the C scanner that `json.loads` itself uses (`_json`), without
importing `json`, whose import pulls in `re` and `enum`: together the slowest part of the
status line's start. Anything but plain UTF-8 (a byte-order mark, UTF-16 or UTF-32), or an
interpreter without `_json`, goes to `json.loads`. Errors are `ValueError`s, as from `json`.
"""

from __future__ import annotations

try:
    from _json import make_scanner as _make_scanner
except ImportError:  # pragma: no cover (other interpreters)
    _make_scanner = None

_WHITESPACE = " \t\n\r"
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Context:
    """What the C scanner reads from a `json.JSONDecoder`, with its defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__
    memo: dict = {}


_scan = _make_scanner(_Context()) if _make_scanner is not None else None


def loads(data: bytes | bytearray | str):
    """The same value `json.loads(data)` gives, or a ValueError where it raises one."""
    if isinstance(data, bytes | bytearray):
        if data[:3] == b"\xef\xbb\xbf" or b"\x00" in data[:4]:
            import json

            return json.loads(data)
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            import json

            return json.loads(data)  # its own error, as callers expect from json
    elif isinstance(data, str):
        text = data
    else:
        raise TypeError(f"the JSON object must be str, bytes or bytearray, not {type(data)}")
    if _scan is None:  # pragma: no cover
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = _scan(text, start)
    except StopIteration as stop:
        raise ValueError(f"Expecting value: char {stop.value}") from None
    except Exception:
        # The scanner builds json.decoder.JSONDecodeError for a bad document, which fails
        # (SystemError) while json.decoder is not imported: let json say what is wrong.
        import json

        return json.loads(text)
    if text[end:].strip(_WHITESPACE):
        raise ValueError(f"Extra data: char {end}")
    return value
