"""The faithful JSON encoding: every value comes back as documented, or is refused by path."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import uuid
from collections import Counter, OrderedDict, namedtuple
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

import pytest

from pipeline.deadletters.jsoncodec import MAX_DEPTH, decode_value, encode_value


def round_trip(value, **options):
    text = json.dumps(encode_value(value, **options), allow_nan=False)
    return decode_value(json.loads(text))


class Colour(enum.Enum):
    RED = "red"
    PAIR = (1, 2)


class Level(enum.IntEnum):
    HIGH = 3


Point = namedtuple("Point", "x y")


@dataclasses.dataclass(frozen=True, slots=True)
class Task:
    trace_id: uuid.UUID
    amount: Decimal
    tags: tuple[str, ...]


EXACT = [
    None,
    True,
    False,
    0,
    -(10**300),
    1.5,
    -0.0,
    5e-324,
    1.7976931348623157e308,
    "",
    "naïve € \u2028 \x00 \ud800",
    [1, [2, [3]]],
    {"a": {"b": [None]}, "": 1},
    {"$bytes": "AA=="},
    {"$dict": {"$float": "nan"}},
    {"$": 1},
    b"",
    bytes(range(256)),
]


@pytest.mark.parametrize("value", EXACT, ids=repr)
def test_json_types_and_bytes_come_back_equal_and_of_the_same_type(value):
    back = round_trip(value)
    assert back == value
    assert type(back) is type(value)
    if isinstance(value, float):
        assert math.copysign(1.0, back) == math.copysign(1.0, value)


def test_dict_order_is_kept():
    value = {"z": 1, "a": 2, "m": 3}
    assert list(round_trip(value)) == ["z", "a", "m"]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_are_tagged_as_strict_json_and_come_back(value):
    encoded = encode_value([value])
    json.dumps(encoded, allow_nan=False)  # strict JSON: no NaN token
    [back] = round_trip([value])
    assert type(back) is float
    assert (math.isnan(back) and math.isnan(value)) or back == value


CONVERTED = [
    (bytearray(b"\x01\x02"), b"\x01\x02"),
    ((1, (2, 3)), [1, [2, 3]]),
    (Decimal("10.10"), "10.10"),
    (Decimal("-0.000"), "-0.000"),
    (Decimal("NaN"), "NaN"),
    (uuid.UUID(int=7), "00000000-0000-0000-0000-000000000007"),
    (datetime(2026, 1, 5, 9, 30, tzinfo=UTC), "2026-01-05T09:30:00+00:00"),
    (date(2026, 1, 5), "2026-01-05"),
    (time(9, 30, 0, 1), "09:30:00.000001"),
    (Colour.RED, "red"),
    (Colour.PAIR, [1, 2]),
    (Level.HIGH, 3),
    (Point(1, b"y"), {"x": 1, "y": b"y"}),
    (Counter("aab"), {"a": 2, "b": 1}),
    (OrderedDict(b=1, a=2), {"b": 1, "a": 2}),
    (
        Task(uuid.UUID(int=1), Decimal("1.00"), ("a",)),
        {"trace_id": str(uuid.UUID(int=1)), "amount": "1.00", "tags": ["a"]},
    ),
]


@pytest.mark.parametrize(("value", "expected"), CONVERTED, ids=repr)
def test_documented_conversions(value, expected):
    back = round_trip(value)
    assert back == expected
    assert type(back) is type(expected)


def test_subclasses_are_written_as_their_base_value_whatever_they_override():
    class Text(str):
        def __str__(self):
            return "lie"

        def __eq__(self, other):
            raise AssertionError("__eq__ must not be called")

        __hash__ = str.__hash__

    class Number(int):
        def __int__(self):
            return 99

        def __repr__(self):
            return "99"

    class Real(float):
        def __repr__(self):
            return "nan"

    class Items(list):
        def __iter__(self):
            return iter(["lie"])

    class Mapping(dict):
        def items(self):
            return [("lie", 1)]

    value = Mapping(key=Items([Text("truth"), Number(7), Real(0.25)]))
    back = round_trip(value)
    assert back == {"key": ["truth", 7, 0.25]}
    assert [type(x) for x in back["key"]] == [str, int, float]
    assert type(back) is dict


def test_a_set_is_refused_with_its_path_and_type():
    with pytest.raises(TypeError, match=r'payload\["a"\]\[3\] is a set, .*pass encode='):
        encode_value({"a": [0, 1, 2, {1, 2}]}, name="payload")
    assert round_trip({"a": frozenset({3, 1, 2})}, encode=sorted) == {"a": [1, 2, 3]}


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (object(), "object"),
        (timedelta(seconds=1), "datetime.timedelta"),
        (complex(1, 2), "complex"),
        (memoryview(b"x"), "memoryview"),
        (Task, "type"),
    ],
)
def test_unknown_objects_are_refused_never_written_as_their_repr(value, kind):
    with pytest.raises(TypeError, match=rf"value\[0\]\.x is an object of type {kind}, "):
        encode_value([Point(value, 1)])


def test_subclasses_of_datetime_are_refused_as_they_may_hold_more_than_iso_text():
    class Stamp(datetime):
        nanosecond = 7

    with pytest.raises(TypeError, match=r"value is an object of type .*Stamp"):
        encode_value(Stamp(2026, 1, 1))


def test_dict_keys_that_are_not_text_are_refused_and_the_hook_sees_the_whole_dict():
    collide = {1: "int", "1": "str"}
    with pytest.raises(TypeError, match=r"value\[0\] has a key 1 \(int\): .*collide"):
        encode_value([collide])
    for key in (None, True, 2.5, (1, 2)):
        with pytest.raises(TypeError, match=r"has a key"):
            encode_value({key: 0})
    seen = []

    def pairs(value):
        seen.append(value)
        return [[repr(k), v] for k, v in value.items()]

    assert round_trip([collide], encode=pairs) == [[["1", "int"], ["'1'", "str"]]]
    assert seen == [collide]


def test_str_subclass_keys_that_read_the_same_are_refused():
    class Key(str):
        def __eq__(self, other):
            return False

        def __hash__(self):
            return id(self)

    value = {Key("a"): 1, Key("a"): 2}
    assert len(value) == 2
    with pytest.raises(ValueError, match=r'value has two keys that read "a"'):
        encode_value(value)


def test_the_hook_is_applied_again_below_but_not_twice_in_one_place():
    class Box:
        def __init__(self, inner):
            self.inner = inner

    assert round_trip(Box(Box(b"\x00")), encode=vars) == {"inner": {"inner": b"\x00"}}
    with pytest.raises(
        TypeError, match=r"value\[0\] is an object of type .*Box.*even after encode="
    ):
        encode_value([Box(1)], encode=lambda box: box)


def test_an_exception_from_the_hook_propagates_with_a_note_naming_the_value():
    def fail(value):
        raise RuntimeError("no")

    with pytest.raises(RuntimeError, match="no") as caught:
        encode_value({"a": object()}, encode=fail, name="payload")
    assert any('payload["a"] (object)' in note for note in caught.value.__notes__)


def test_a_container_that_contains_itself_is_refused():
    loop = [1]
    loop.append({"back": loop})
    with pytest.raises(ValueError, match=r'value\[1\]\["back"\] contains itself'):
        encode_value(loop)
    shared = [1]
    assert round_trip([shared, shared]) == [[1], [1]]  # shared, not cyclic: fine


def test_nesting_is_bounded_both_ways():
    deep = "leaf"
    for _ in range(MAX_DEPTH):
        deep = [deep]
    assert round_trip(deep) == deep
    with pytest.raises(ValueError, match=rf"nested more than {MAX_DEPTH} levels deep"):
        encode_value([deep])
    with pytest.raises(ValueError, match=rf"nested more than {MAX_DEPTH} levels deep"):
        decode_value([deep])
    escaped = {"$x": 1}
    for _ in range(MAX_DEPTH - 1):
        escaped = {"$x": escaped}
    assert round_trip(escaped) == escaped  # the {"$dict": ...} wrappers do not count


def test_an_int_too_long_for_text_is_refused_unless_converted():
    huge = 10**5000
    with pytest.raises(ValueError, match=r"value\[0\] is an int of .* bits"):
        encode_value([huge])
    assert round_trip([huge], encode=hex) == [hex(huge)]


@pytest.mark.parametrize(
    ("tree", "message"),
    [
        ({"$bytes": "not base64!"}, r'value is a \{"\$bytes": ...\} tag without base64'),
        ({"$bytes": 3}, r"without base64"),
        ({"$bytes": "é"}, r"without base64"),
        ({"$float": "NaN"}, r'without "nan"'),
        ({"$dict": [1]}, r"without an object"),
        ([{"a": {"$set": [1]}}], r'value\[0\]\["a"\] is an unknown tag "\$set"'),
    ],
)
def test_malformed_tags_are_refused_by_path(tree, message):
    with pytest.raises(ValueError, match=message):
        decode_value(tree)


def test_decode_refuses_what_json_never_returns():
    with pytest.raises(TypeError, match=r"value\[0\] is a tuple"):
        decode_value([(1, 2)])
