"""A faithful JSON encoding for payloads: a value comes back exactly, or it is refused.

Dead letters leave the process as JSON (JSONL lines, a CSV column) and come back
for replay, so their payloads must survive the trip. :func:`encode_value` turns a
payload into a tree of plain JSON values and :func:`decode_value` reads such a tree
back. One rule: a value has a documented JSON form, below, or it is refused with an
error that names where it sits (``payload["items"][3]``) and what it is. Nothing is
ever written as its ``repr``.

Each type, as written and as read back:

- ``None``, ``bool``, ``str``, ``int`` (every digit), finite ``float`` (its
  shortest repr): themselves, and they come back equal and of the same type.
- ``float`` nan, inf and -inf: ``{"$float": "nan"}`` (``"inf"``, ``"-inf"``), read
  back as the float (a NaN's sign and payload bits are not kept).
- ``bytes`` and ``bytearray``: ``{"$bytes": "<base64>"}``, read back as ``bytes``.
- ``list`` and ``tuple``: an array, read back as a ``list``.
- ``dict`` with ``str`` keys: an object with the keys in order, read back as a ``dict``.
- dataclass instances and named tuples: an object of their fields, read back as a
  ``dict`` (rebuild with e.g. ``replay(payload=lambda d: Task(**d))``).
- ``Enum`` members: their value, encoded by these rules; read back as the value.
- ``Decimal``: its exact text (``"10.10"``, never a float); read back as ``str``.
- ``UUID``: its canonical text; read back as ``str``.
- ``datetime``, ``date``, ``time``: ISO 8601 text; read back as ``str``
  (``fromisoformat`` restores them; an aware ``datetime`` keeps its UTC offset, not
  the name of its zone).

Subclasses of ``str``, ``int``, ``float``, ``bytes``, ``Decimal``, ``UUID``,
``list``, ``tuple`` and ``dict`` are written as their base class's value and come
back as the base class.

Refused with :class:`TypeError`, unless an ``encode`` hook converts them: sets
(a set would come back as a list), dicts with a key that is not a ``str`` (as JSON
text, ``{1: ...}`` and ``{"1": ...}`` would collide), and objects of any other
type -- subclasses of ``datetime``, ``date`` and ``time`` included (a
``pandas.Timestamp`` holds nanoseconds that ISO text from ``datetime`` drops).
Refused with :class:`ValueError`: an ``int`` longer than Python converts to text
(``sys.get_int_max_str_digits()``, unless ``encode`` converts it), a container that
contains itself, containers nested more than :data:`MAX_DEPTH` deep, and two
``str``-subclass keys of one dict that are equal as text.

The tags: a JSON object with exactly one key, starting with ``$``, is a tag.
A payload's own dict of that shape is written wrapped, ``{"$dict": {"$ref": 1}}``,
so that it is never read back as a tag. Non-finite floats are tagged because the
``NaN`` that :func:`json.dumps` writes is not JSON, and other tools reject it.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as dt
import decimal
import enum
import json
import math
import uuid
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_DEPTH", "decode_value", "encode_value"]

#: Containers nested deeper than this are refused, both ways: far deeper than any
#: record needs, and far from the recursion limits of this module and of :mod:`json`.
MAX_DEPTH = 100

# A linked path, rendered only for errors: None for the root, else (parent, step), where
# a step is a list index (int), a dict key (str) or a field name (a 1-tuple).
_Path = tuple[Any, int | str | tuple[str]] | None
_EXACT_TEXT = (dt.datetime, dt.date, dt.time)
_FLOAT_TAGS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
# Ints up to this many bits always fit in the default limit of 4,300 digits.
_SAFE_INT_BITS = 14_000


def encode_value(
    value: Any, *, encode: Callable[[Any], Any] | None = None, name: str = "value"
) -> Any:
    """A tree of plain JSON values that :func:`decode_value` turns back into ``value``.

    Args:
        value: the payload (see the module docstring for what each type becomes).
        encode: called with each value that has no JSON form of its own (a set, a
            dict with a non-str key, an object of another type, an over-long int);
            it returns a replacement, which is encoded by the same rules, e.g.
            ``encode=sorted`` for sets. A replacement that again needs ``encode`` is
            refused. An exception it raises propagates, with a note naming the value.
        name: how error messages name ``value`` itself, e.g. ``"payload"``.

    Returns:
        ``None``, ``bool``, ``int``, finite ``float``, ``str``, ``list`` and ``dict``
        with ``str`` keys only, ready for :func:`json.dumps` with ``allow_nan=False``.

    Raises:
        TypeError: a value has no JSON form and ``encode`` did not give it one; the
            message names its path (``payload["a"][3]``) and its type.
        ValueError: a container contains itself, nesting is deeper than
            :data:`MAX_DEPTH`, an int is too long to write, or two keys collide.

    Example::

        >>> encode_value({"blob": b"\\x00", "ratio": float("nan")})
        {'blob': {'$bytes': 'AA=='}, 'ratio': {'$float': 'nan'}}
    """
    return _Encoder(encode, name).convert(value, None, 0, hooked=False)


def decode_value(value: Any, *, name: str = "value") -> Any:
    """Read back a tree written by :func:`encode_value` (as :func:`json.loads` returns it).

    Args:
        value: ``None``, ``bool``, ``int``, ``float``, ``str``, and lists and dicts
            of them.
        name: how error messages name ``value`` itself.

    Returns:
        The value with its tags resolved: ``bytes`` for ``{"$bytes": ...}``, floats
        for ``{"$float": ...}``, the literal dict for ``{"$dict": {...}}``.

    Raises:
        ValueError: an unknown or malformed tag, or nesting deeper than
            :data:`MAX_DEPTH`; the message names the path.
        TypeError: ``value`` holds something :func:`json.loads` never returns.
    """
    return _decode(value, name, None, 0)


# -- encoding ------------------------------------------------------------------------------


class _Encoder:
    __slots__ = ("active", "encode", "name")

    def __init__(self, encode: Callable[[Any], Any] | None, name: str) -> None:
        self.encode = encode
        self.name = name
        self.active: set[int] = set()  # ids of the containers on the current path

    def convert(self, value: Any, path: _Path, depth: int, *, hooked: bool) -> Any:
        kind = type(value)
        if kind is str or kind is bool or value is None:
            return value
        if kind is int:
            return self._int(value, path, depth, hooked)
        if kind is float:
            return _float(value)
        if isinstance(value, enum.Enum):
            return self.convert(value.value, path, depth, hooked=hooked)
        if isinstance(value, str):
            return str.__str__(value)
        if isinstance(value, int):
            return self._int(int.__int__(value), path, depth, hooked)
        if isinstance(value, float):
            return _float(float.__float__(value))
        if isinstance(value, bytes | bytearray):
            return {"$bytes": base64.b64encode(value).decode("ascii")}
        if isinstance(value, decimal.Decimal):
            return decimal.Decimal.__str__(value)
        if isinstance(value, uuid.UUID):
            return uuid.UUID.__str__(value)
        if kind in _EXACT_TEXT:
            return value.isoformat()
        if isinstance(value, dict):
            return self._container(value, path, depth, hooked, self._dict)
        if isinstance(value, tuple) and isinstance(getattr(kind, "_fields", None), tuple):
            return self._container(value, path, depth, hooked, self._named_tuple)
        if isinstance(value, list | tuple):
            return self._container(value, path, depth, hooked, self._list)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._container(value, path, depth, hooked, self._dataclass)
        if isinstance(value, set | frozenset):
            problem = f"is a {_type_name(value)}, which would come back as a list"
        else:
            problem = f"is an object of type {_type_name(value)}, which has no JSON form"
        return self._refuse(value, path, depth, hooked, TypeError, problem)

    def _int(self, value: int, path: _Path, depth: int, hooked: bool) -> Any:
        if value.bit_length() > _SAFE_INT_BITS:
            try:
                int.__repr__(value)
            except ValueError:
                problem = (
                    f"is an int of {value.bit_length():,} bits, more digits than Python "
                    "converts to text"
                )
                return self._refuse(value, path, depth, hooked, ValueError, problem)
        return value

    def _container(
        self, value: Any, path: _Path, depth: int, hooked: bool, convert: Callable[..., Any]
    ) -> Any:
        if depth >= MAX_DEPTH:
            raise ValueError(f"{self._where(path)} is nested more than {MAX_DEPTH} levels deep")
        key = id(value)
        if key in self.active:
            raise ValueError(f"{self._where(path)} contains itself (a reference cycle)")
        self.active.add(key)
        try:
            return convert(value, path, depth, hooked)
        finally:
            self.active.discard(key)

    def _dict(self, value: dict[Any, Any], path: _Path, depth: int, hooked: bool) -> Any:
        for key in dict.keys(value):
            if not isinstance(key, str):
                problem = (
                    f"has a key {short_repr(key)} ({_type_name(key)}): JSON keys are text, "
                    "where 1 and '1' would collide"
                )
                return self._refuse(value, path, depth, hooked, TypeError, problem)
        out: dict[str, Any] = {}
        for key, item in dict.items(value):
            text = str.__str__(key)
            if text in out:
                raise ValueError(f"{self._where(path)} has two keys that read {short_repr(text)}")
            out[text] = self.convert(item, (path, text), depth + 1, hooked=False)
        return _escaped(out)

    def _list(self, value: list[Any] | tuple[Any, ...], path: _Path, depth: int, _: bool) -> Any:
        iterate = list.__iter__ if isinstance(value, list) else tuple.__iter__
        return [
            self.convert(item, (path, index), depth + 1, hooked=False)
            for index, item in enumerate(iterate(value))
        ]

    def _named_tuple(self, value: tuple[Any, ...], path: _Path, depth: int, _: bool) -> Any:
        pairs = zip(type(value)._fields, tuple.__iter__(value), strict=True)  # type: ignore[attr-defined]
        return self._fields(pairs, path, depth)

    def _dataclass(self, value: Any, path: _Path, depth: int, _: bool) -> Any:
        pairs = ((f.name, getattr(value, f.name)) for f in dataclasses.fields(value))
        return self._fields(pairs, path, depth)

    def _fields(self, pairs: Any, path: _Path, depth: int) -> dict[str, Any]:
        out = {
            name: self.convert(item, (path, (name,)), depth + 1, hooked=False)
            for name, item in pairs
        }
        return _escaped(out)

    def _refuse(
        self,
        value: Any,
        path: _Path,
        depth: int,
        hooked: bool,
        error: type[Exception],
        problem: str,
    ) -> Any:
        where = self._where(path)
        if self.encode is None:
            raise error(f"{where} {problem}; pass encode= to convert it")
        if hooked:
            raise error(f"{where} {problem}, even after encode= converted it")
        try:
            replacement = self.encode(value)
        except Exception as failure:
            failure.add_note(f"raised by encode= for {where} ({_type_name(value)})")
            raise
        return self.convert(replacement, path, depth, hooked=True)

    def _where(self, path: _Path) -> str:
        return _render(self.name, path)


def _float(value: float) -> Any:
    if math.isfinite(value):
        return value
    return {"$float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}


def _escaped(out: dict[str, Any]) -> dict[str, Any]:
    """``out``, wrapped when a reader would mistake it for a tag."""
    if len(out) == 1 and next(iter(out)).startswith("$"):
        return {"$dict": out}
    return out


# -- decoding ------------------------------------------------------------------------------


def _decode(value: Any, name: str, path: _Path, depth: int) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if kind is list:
        _check_depth(name, path, depth)
        return [_decode(item, name, (path, i), depth + 1) for i, item in enumerate(value)]
    if kind is dict:
        _check_depth(name, path, depth)
        if len(value) == 1:
            tag, inner = next(iter(value.items()))
            if tag.startswith("$"):
                return _decode_tag(tag, inner, name, path, depth)
        return _decode_fields(value, name, path, depth)
    raise TypeError(f"{_render(name, path)} is a {_type_name(value)}, which JSON does not produce")


def _decode_fields(value: dict[str, Any], name: str, path: _Path, depth: int) -> dict[str, Any]:
    return {key: _decode(item, name, (path, key), depth + 1) for key, item in value.items()}


def _decode_tag(tag: str, inner: Any, name: str, path: _Path, depth: int) -> Any:
    where = _render(name, path)
    if tag == "$bytes":
        if isinstance(inner, str):
            try:
                return base64.b64decode(inner.encode("ascii"), validate=True)
            except (UnicodeEncodeError, binascii.Error):
                pass
        raise ValueError(f'{where} is a {{"$bytes": ...}} tag without base64 text')
    if tag == "$float":
        if isinstance(inner, str) and inner in _FLOAT_TAGS:
            return _FLOAT_TAGS[inner]
        raise ValueError(f'{where} is a {{"$float": ...}} tag without "nan", "inf" or "-inf"')
    if tag == "$dict":
        if isinstance(inner, dict):
            return _decode_fields(inner, name, path, depth)
        raise ValueError(f'{where} is a {{"$dict": ...}} tag without an object')
    raise ValueError(f"{where} is an unknown tag {short_repr(tag)}")


def _check_depth(name: str, path: _Path, depth: int) -> None:
    if depth >= MAX_DEPTH:
        raise ValueError(f"{_render(name, path)} is nested more than {MAX_DEPTH} levels deep")


# -- naming things in errors ---------------------------------------------------------------


def _render(name: str, path: _Path) -> str:
    segments = []
    while path is not None:
        path, step = path
        if isinstance(step, int):
            segments.append(f"[{step}]")
        elif isinstance(step, str):
            segments.append(f"[{short_repr(step)}]")
        else:
            segments.append(f".{step[0]}")
    text = name + "".join(reversed(segments))
    return text if len(text) <= 160 else f"{text[:100]}...{text[-50:]}"


def short_repr(value: Any, limit: int = 40) -> str:
    """A short rendering that never raises: JSON text for a str, else ``repr``."""
    try:
        text = json.dumps(value) if isinstance(value, str) else repr(value)
    except Exception:
        text = f"<{_type_name(value)} object>"
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _type_name(value: Any) -> str:
    kind = type(value)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"
