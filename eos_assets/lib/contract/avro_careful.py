"""Avro binary values decoded strictly with their writer's schema, one record at a time.

The reference decoder of values framed by a schema registry: ``compile_schema`` turns a writer
schema (parsed JSON) into a reader once; ``decode`` reads one payload with it. It accepts only
what the Avro specification writes: a varint of at most 10 bytes (5 for an ``int``) and within
its type's range, lengths and block counts that are not negative and stay inside the payload,
union and enum indexes in range, booleans 0 or 1, strings of valid UTF-8 (every one, read or
not), and every byte consumed: bytes left after the record mean another schema wrote it, and
reading on would invent values. Anything else raises ``AvroInvalid`` with the field it was in.

Values come out as Python values: records and maps as dicts, arrays as lists, enums as their
symbol, ``fixed`` and ``bytes`` as bytes; the logical types ``timestamp-millis`` and
``timestamp-micros`` as aware UTC datetimes, ``date`` as a date, ``decimal`` as a Decimal and
``uuid`` as its string. Other logical types keep their underlying value.
"""

import struct
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

# One reader per schema node: (payload, position) -> (value, position after it).
Reader = Callable[[bytes, int], tuple[Any, int]]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_DAY = date(1970, 1, 1)
_INT_RANGE = (-(1 << 31), (1 << 31) - 1)
_LONG_RANGE = (-(1 << 63), (1 << 63) - 1)
_EMPTY_ITEMS = 1 << 20  # most items of no bytes (nulls) one block may hold
_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")


class AvroInvalid(ValueError):
    """A payload that its writer's schema does not read; ``detail`` says where and why."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what  # a template: ``{field}`` is where it happened
        self.path: list[str] = []  # field names, innermost first

    @property
    def detail(self) -> str:
        where = ".".join(reversed(self.path))
        return self.what.format(field=f"field {where}" if where else "the record")


def compile_schema(schema: object) -> Reader:
    """The reader of values written with ``schema`` (an Avro schema as parsed JSON).

    Raises:
        ValueError: ``schema`` is not a valid Avro schema (a name it uses is not defined, a
            type is unknown).
    """
    return _Compiler().reader(schema, "")


def decode(reader: Reader, payload: bytes) -> Any:
    """The value of ``payload`` read with ``reader``, every byte of it.

    Raises:
        AvroInvalid: it does not read, or bytes are left after it.
    """
    value, end = reader(payload, 0)
    if end != len(payload):
        raise AvroInvalid(f"{len(payload) - end} bytes left after the record")
    return value


class _Compiler:
    """Readers of one schema; named types (records, enums, fixed) by full name, so a type
    may refer to itself or to one defined before it."""

    def __init__(self) -> None:
        self.named: dict[str, Reader] = {}

    def reader(self, schema: object, namespace: str) -> Reader:
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return _PRIMITIVE_READERS[schema]
            return self._reference(_full_name(schema, namespace))
        if isinstance(schema, list):
            return self._union([self.reader(branch, namespace) for branch in schema])
        if not isinstance(schema, Mapping):
            raise ValueError(f"{schema!r} is not an Avro schema")
        kind = schema.get("type")
        if kind in ("record", "error"):
            return self._record(schema, namespace)
        if kind == "enum":
            return self._define(schema, namespace, _enum(list(schema["symbols"])))
        if kind == "fixed":
            size = int(schema["size"])
            return self._define(schema, namespace, _logical(schema, _fixed(size)))
        if kind == "array":
            return _array(self.reader(schema["items"], namespace))
        if kind == "map":
            return _map(self.reader(schema["values"], namespace))
        return _logical(schema, self.reader(kind, namespace))

    def _reference(self, name: str) -> Reader:
        if name not in self.named:
            raise ValueError(f"the Avro type {name} is used before it is defined")
        named = self.named
        return lambda data, pos: named[name](data, pos)  # late: a record may hold itself

    def _define(self, schema: Mapping[str, Any], namespace: str, reader: Reader) -> Reader:
        self.named[_full_name(schema["name"], schema.get("namespace", namespace))] = reader
        return reader

    def _record(self, schema: Mapping[str, Any], namespace: str) -> Reader:
        name = _full_name(schema["name"], schema.get("namespace", namespace))
        inner = name.rpartition(".")[0]
        fields: list[tuple[str, Reader]] = []

        def read(data: bytes, pos: int) -> tuple[Any, int]:
            record: dict[str, Any] = {}
            for field, reader in fields:
                try:
                    record[field], pos = reader(data, pos)
                except AvroInvalid as invalid:
                    invalid.path.append(field)
                    raise
            return record, pos

        self.named[name] = read  # before its fields: they may refer to it
        fields.extend((f["name"], self.reader(f["type"], inner)) for f in schema["fields"])
        return read

    @staticmethod
    def _union(branches: list[Reader]) -> Reader:
        def read(data: bytes, pos: int) -> tuple[Any, int]:
            index, pos = _varint(data, pos, _LONG_RANGE, 10)
            if not 0 <= index < len(branches):
                raise AvroInvalid(
                    f"union index {index} of {{field}} is out of range ({len(branches)} branches)"
                )
            return branches[index](data, pos)

        return read


def _full_name(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _varint(data: bytes, pos: int, bounds: tuple[int, int], most: int) -> tuple[int, int]:
    """A zigzag varint of at most ``most`` bytes, within ``bounds``."""
    shift, raw = 0, 0
    for count in range(most):
        if pos + count >= len(data):
            raise AvroInvalid("the payload ends inside {field}")
        byte = data[pos + count]
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            value = (raw >> 1) ^ -(raw & 1)
            if not bounds[0] <= value <= bounds[1]:
                raise AvroInvalid(f"{{field}} holds {value}, out of its type's range")
            return value, pos + count + 1
        shift += 7
    raise AvroInvalid(f"{{field}} has a varint longer than {most} bytes")


def _int(data: bytes, pos: int) -> tuple[int, int]:
    return _varint(data, pos, _INT_RANGE, 5)


def _long(data: bytes, pos: int) -> tuple[int, int]:
    return _varint(data, pos, _LONG_RANGE, 10)


def _take(data: bytes, pos: int, size: int) -> tuple[bytes, int]:
    if size < 0:
        raise AvroInvalid(f"{{field}} has a negative length {size}")
    if pos + size > len(data):
        raise AvroInvalid("the payload ends inside {field}")
    return data[pos : pos + size], pos + size


def _bytes(data: bytes, pos: int) -> tuple[bytes, int]:
    size, pos = _long(data, pos)
    return _take(data, pos, size)


def _string(data: bytes, pos: int) -> tuple[str, int]:
    raw, pos = _bytes(data, pos)
    try:
        return raw.decode("utf-8"), pos
    except UnicodeDecodeError:
        raise AvroInvalid("{field} is not UTF-8") from None


def _boolean(data: bytes, pos: int) -> tuple[bool, int]:
    raw, pos = _take(data, pos, 1)
    if raw[0] > 1:
        raise AvroInvalid(f"{{field}} is a boolean byte {raw[0]}, not 0 or 1")
    return raw[0] == 1, pos


def _unpacker(layout: str) -> Reader:
    size = struct.calcsize(layout)

    def read(data: bytes, pos: int) -> tuple[float, int]:
        raw, pos = _take(data, pos, size)
        return struct.unpack(layout, raw)[0], pos

    return read


_PRIMITIVE_READERS: dict[str, Reader] = {
    "null": lambda data, pos: (None, pos),
    "boolean": _boolean,
    "int": _int,
    "long": _long,
    "float": _unpacker("<f"),
    "double": _unpacker("<d"),
    "bytes": _bytes,
    "string": _string,
}


def _fixed(size: int) -> Reader:
    return lambda data, pos: _take(data, pos, size)


def _enum(symbols: list[str]) -> Reader:
    def read(data: bytes, pos: int) -> tuple[str, int]:
        index, pos = _int(data, pos)
        if not 0 <= index < len(symbols):
            raise AvroInvalid(
                f"enum index {index} of {{field}} is out of range ({len(symbols)} symbols)"
            )
        return symbols[index], pos

    return read


def _blocks(data: bytes, pos: int, item: Callable[[int], int]) -> int:
    """Read the blocks of an array or a map, each item with ``item(pos) -> pos``."""
    while True:
        count, pos = _long(data, pos)
        if count == 0:
            return pos
        if count < 0:  # a block with its size in bytes after the count
            count = -count
            size, pos = _long(data, pos)
            if size < 0:
                raise AvroInvalid(f"{{field}} has a negative block size {size}")
        for _ in range(count):
            after = item(pos)
            # Items of no bytes (nulls) cannot run past the end: bound their count instead.
            if after == pos and count > _EMPTY_ITEMS:
                raise AvroInvalid(f"{{field}} has a block of {count} items of no bytes")
            pos = after


def _array(items: Reader) -> Reader:
    def read(data: bytes, pos: int) -> tuple[list[Any], int]:
        values: list[Any] = []

        def item(at: int) -> int:
            value, at = items(data, at)
            values.append(value)
            return at

        return values, _blocks(data, pos, item)

    return read


def _map(values: Reader) -> Reader:
    def read(data: bytes, pos: int) -> tuple[dict[str, Any], int]:
        found: dict[str, Any] = {}

        def item(at: int) -> int:
            key, at = _string(data, at)
            found[key], at = values(data, at)
            return at

        return found, _blocks(data, pos, item)

    return read


def _logical(schema: Mapping[str, Any], base: Reader) -> Reader:
    """``base`` with the value turned into the logical type ``schema`` names, if known."""
    kind = schema.get("logicalType")
    if kind == "timestamp-millis":
        return _mapped(base, lambda v: _EPOCH + timedelta(milliseconds=v))
    if kind == "timestamp-micros":
        return _mapped(base, lambda v: _EPOCH + timedelta(microseconds=v))
    if kind == "date":
        return _mapped(base, lambda v: _EPOCH_DAY + timedelta(days=v))
    if kind == "uuid":
        return base
    if kind == "decimal":
        scale = int(schema.get("scale", 0))
        return _mapped(
            base, lambda v: Decimal(int.from_bytes(v, "big", signed=True)).scaleb(-scale)
        )
    return base


def _mapped(base: Reader, convert: Callable[[Any], Any]) -> Reader:
    def read(data: bytes, pos: int) -> tuple[Any, int]:
        value, pos = base(data, pos)
        try:
            return convert(value), pos
        except (OverflowError, ValueError):
            raise AvroInvalid(
                f"{{field}} holds {value!r}, out of its logical type's range"
            ) from None

    return read
