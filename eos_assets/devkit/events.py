"""Deterministic order events: a plausible lifecycle plus the duplicates, late events and
malformed records a real stream carries, planned transaction by transaction.

Everything comes from one ``random.Random(seed)``, event ids included, so the same seed,
start time and mix give the same records byte for byte.
"""

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from math import log
from typing import Any, NamedTuple, Protocol, TypeVar

from eos_assets.lib.contract.contract import Malformed

KINDS: tuple[str, ...] = ("valid", "duplicate", "late", "malformed")
UNKNOWN_EVENT_TYPE, INVALID_AMOUNT = "unknown_event_type", "invalid_amount"
# Every code an orders record can be malformed with: the generic ones and its payload fields'
# (event_type has declared values, amount is a required double). The order is the one the
# seeds have always drawn from, so a seed gives the same records as before.
CODES: tuple[str, ...] = (
    Malformed.NULL_VALUE,
    Malformed.INVALID_UTF8,
    Malformed.INVALID_JSON,
    Malformed.NOT_AN_OBJECT,
    Malformed.MISSING_EVENT_ID,
    UNKNOWN_EVENT_TYPE,
    Malformed.INVALID_EVENT_TIME,
    INVALID_AMOUNT,
)
CURRENCIES: tuple[str, ...] = ("EUR", "USD", "GBP", "CHF")
# A currency per tenth of the draws: 50/30/10/10 %.
_CURRENCY_OF_TENTH = (*["EUR"] * 5, *["USD"] * 3, "GBP", "CHF")

_MEAN_GAP_S = 0.1  # event time advances ~10 events per second of event time
_TARGET_OPEN = 100  # orders awaiting payment; keeps lifetimes around 20 s of event time
_PAID_KEPT = 1000  # paid orders that may still be refunded
# The order events' types, as the orders declaration lists them (``streams/orders/defs.yaml``).
EVENT_TYPES: tuple[str, ...] = (
    "order_created",
    "order_paid",
    "order_cancelled",
    "order_refunded",
)
_POOL_KEPT = 10_000  # committed events that a later duplicate may repeat


class Record(NamedTuple):
    """One Kafka record to send, with what it is meant to be.

    A named tuple, not a dataclass: it is built once per record sent, and a tuple is built
    several times faster than a frozen dataclass.
    """

    key: str  # every record has one: the producer tells the reports of its records by it
    value: bytes | None
    kind: str
    event_id: str | None
    event_type: str | None
    malformed: str | None = None


@dataclass(frozen=True)
class Mix:
    """Fractions of records (and of transactions, for ``abort_ratio``) of each sort."""

    duplicate_ratio: float = 0.0
    late_ratio: float = 0.0
    malformed_ratio: float = 0.0
    abort_ratio: float = 0.0
    late_by: timedelta = timedelta(hours=2)


@dataclass(frozen=True)
class TransactionPlan:
    """The records of one transaction and whether it is to be aborted."""

    index: int
    records: list[Record]
    abort: bool


def plan_transactions(
    seed: int, start_time: datetime, count: int, transaction_size: int, mix: Mix
) -> Iterator[TransactionPlan]:
    """Yield transactions holding ``count`` records in all, aborted ones included.

    The caller commits or aborts each plan before asking for the next one. An aborted
    transaction's lifecycle steps are taken back, so the committed stream stays plausible
    and no aborted event id ever appears committed. Duplicates repeat an event committed
    in an earlier transaction (same event id, same bytes), as a producer retrying at the
    application level does.
    """
    rng = random.Random(seed)
    yield from plan_with(rng, _Orders(rng, start_time), _next_record, count, transaction_size, mix)


G = TypeVar("G", bound="Generator")


class Generator(Protocol):
    """What a stream's event generator keeps between records: it can save and restore it."""

    def save(self) -> Any: ...

    def restore(self, saved: Any) -> None: ...


def plan_with(
    rng: random.Random,
    state: G,
    next_record: Callable[[random.Random, G, str, Mix], Record],
    count: int,
    transaction_size: int,
    mix: Mix,
) -> Iterator[TransactionPlan]:
    """Transactions of records drawn by ``mix``, aborted ones taken back from ``state``.

    Each record is malformed, a duplicate, late or valid as ``mix`` draws it; a duplicate
    repeats a committed valid or late record, the others are ``next_record``'s record of that
    kind ("malformed", "late" or "valid").
    """
    pool: list[Record] = []
    sent = index = 0
    while sent < count:
        abort = rng.random() < mix.abort_ratio
        saved = state.save()
        size = min(transaction_size, count - sent)
        records = _draw(rng, state, next_record, pool, mix, size)
        yield TransactionPlan(index, records, abort)
        if abort:
            state.restore(saved)
        else:
            _keep(pool, records)
        sent += size
        index += 1


def _draw(
    rng: random.Random,
    state: G,
    next_record: Callable[[random.Random, G, str, Mix], Record],
    pool: list[Record],
    mix: Mix,
    size: int,
) -> list[Record]:
    """``size`` records, each malformed, a duplicate of a ``pool`` record, late or valid.

    One loop with its names bound locally: it runs once per record sent, and a call per
    record, or an attribute looked up per record, is a large part of the producer's time.
    """
    draw, choice, _new = rng.random, rng.choice, tuple.__new__
    malformed, duplicate = mix.malformed_ratio, mix.duplicate_ratio
    late_below = duplicate + mix.late_ratio
    records: list[Record] = []
    add = records.append
    for _ in range(size):
        r = draw()
        if r < malformed:
            add(next_record(rng, state, "malformed", mix))
            continue
        r -= malformed
        if r < duplicate and pool:
            key, value, _, event_id, event_type, bad = choice(pool)
            add(_new(Record, (key, value, "duplicate", event_id, event_type, bad)))
        else:
            late = duplicate <= r < late_below
            add(next_record(rng, state, "late" if late else "valid", mix))
    return records


def _keep(pool: list[Record], records: list[Record]) -> None:
    """Keep the latest ``_POOL_KEPT`` committed valid and late records, those a later
    duplicate may repeat: ``records`` is a committed transaction's."""
    pool.extend([record for record in records if record[2] in _REPEATABLE])  # by its kind
    del pool[:-_POOL_KEPT]


_REPEATABLE = frozenset(("valid", "late"))


def record(key: str, payload: dict, kind: str, id_field: str) -> Record:
    """The record of ``payload``, named in the manifest by its id and its ``event_type``, if any."""
    return Record(key, encode(payload), kind, payload[id_field], payload.get("event_type"))


def malformed_record(
    key: str, value: bytes | None, code: str, carried: dict | None, id_field: str
) -> Record:
    """A record malformed with ``code``. ``carried``: the payload its value still carries (None
    when the value is not a JSON object any more); the manifest names its id (an empty id is
    none) and its ``event_type``, if any."""
    return Record(
        key=key,
        value=value,
        kind="malformed",
        event_id=(carried.get(id_field) or None) if carried is not None else None,
        event_type=carried.get("event_type") if carried is not None else None,
        malformed=code,
    )


def drop_id(rng: random.Random, payload: dict, id_field: str) -> None:
    """Take the id out of ``payload``: absent or empty, half the time each."""
    if rng.random() < 0.5:
        del payload[id_field]
    else:
        payload[id_field] = ""


# What ``json.dumps(payload, separators=(",", ":"))`` builds, without a new encoder per call.
_COMPACT = json.JSONEncoder(separators=(",", ":"))


def encode(payload: object) -> bytes:
    """A record value: ``payload`` as compact JSON."""
    return _COMPACT.encode(payload).encode()


def format_event_time(moment: datetime) -> str:
    """Format as the contract does: UTC, milliseconds, ``Z`` (2026-11-21T10:00:00.123Z)."""
    if moment.tzinfo is not UTC:
        moment = moment.astimezone(UTC)
    return moment.isoformat(timespec="milliseconds")[:-6] + "Z"


def uuid4_text(bits: int) -> str:
    """``str(uuid.UUID(int=bits, version=4))`` of 128 random ``bits``, built directly: the
    version nibble (hex digit 12) becomes 4, the variant bits (the top two of hex digit 16)
    become 10."""
    h = (bits & _KEEP | _SET).to_bytes(16).hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# The bits uuid4_text keeps (all but the version nibble and the top two variant bits), and
# those it sets: version 4, variant 10.
_KEEP = ~((0xF << 76) | (0xC << 60)) & ((1 << 128) - 1)
_SET = (0x4 << 76) | (0x8 << 60)


class _Order(NamedTuple):
    order_id: str
    customer_id: str
    amount: float
    currency: str
    # Its four fields as a valid event's value writes them (``_next_record``): an order has
    # two or three events, and its text is made once.
    text: str


class _Orders:
    """Open and paid orders plus the event-time clock."""

    def __init__(self, rng: random.Random, start_time: datetime) -> None:
        self.rng = rng
        # The clock in microseconds since the epoch: added to and formatted faster than a
        # datetime (``stamp``).
        self.us = (start_time - _EPOCH) // _MICROSECOND
        self.minute = -1  # the minute whose text ``prefix`` holds
        self.prefix = ""
        self.last_id = rng.randrange(1, 10**9)  # runs with other seeds use other order ids
        self.open: list[_Order] = []
        self.paid: list[_Order] = []

    @property
    def now(self) -> datetime:
        """The clock (UTC)."""
        return _EPOCH + timedelta(microseconds=self.us)

    def stamp(self, us: int) -> str:
        """``format_event_time`` of the time ``us`` microseconds after the epoch."""
        seconds, micro = divmod(us, 1_000_000)
        minute, second = divmod(seconds, 60)
        return f"{self.minute_text(minute)}{_SIXTY[second]}.{_MILLIS[micro // 1000]}Z"

    def minute_text(self, minute: int) -> str:
        """The text of the time ``minute`` minutes after the epoch up to its seconds
        (2026-11-21T10:00:). About 600 events share a minute of event time: its text is made
        once."""
        if minute != self.minute:
            self.minute = minute
            whole = _EPOCH + timedelta(minutes=minute)
            self.prefix = whole.isoformat(timespec="seconds")[:-8]  # without "00+00:00"
        return self.prefix

    def save(self) -> tuple[list[_Order], list[_Order]]:
        return list(self.open), list(self.paid)

    def restore(self, saved: tuple[list[_Order], list[_Order]]) -> None:
        self.open, self.paid = list(saved[0]), list(saved[1])

    def new_order(self) -> _Order:
        """An order of a customer among 5,000, an amount of whole cents from 5 to 500, a
        currency of ``CURRENCIES`` (``_CURRENCY_OF_TENTH``). The texts of customers, cents and
        currencies are made once, in tables."""
        draw = self.rng.random
        self.last_id += 1
        order_id = f"o-{self.last_id}"
        customer_id = _CUSTOMERS[int(draw() * 5000)]
        total = 500 + int(draw() * 49_501)  # in cents
        whole, cents = divmod(total, 100)
        currency = _CURRENCY_OF_TENTH[int(draw() * 10.0)]
        # Its fields as a valid event's value writes them; the amount as JSON writes a float,
        # its repr: the shortest decimal that reads back as the same double.
        text = (
            f'"order_id":"{order_id}","customer_id":"{customer_id}",'
            f'"amount":{whole}{_CENTS[cents]},"currency":"{currency}"'
        )
        amount = total / 100
        return _NEW(_Order, (order_id, customer_id, amount, currency, text))


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLIS = tuple(f"{ms:03d}" for ms in range(1000))  # a stamp's milliseconds, as text
_SIXTY = tuple(f"{s:02d}" for s in range(60))  # a stamp's seconds, as text
_CUSTOMERS = tuple(f"c-{n}" for n in range(1, 5001))
# The decimals of a whole number of cents as a float's repr writes them: .0, .05, .1, .25.
_CENTS = tuple("." + (f"{c:02d}".rstrip("0") or "0") for c in range(100))
_MICROSECOND = timedelta(microseconds=1)
_MEAN_GAP_US = _MEAN_GAP_S * 1e6


def _payload(rng: random.Random, order: _Order, event_type: str, at: datetime) -> dict:
    return {
        "event_id": uuid4_text(rng.getrandbits(128)),
        "event_type": event_type,
        "order_id": order.order_id,
        "customer_id": order.customer_id,
        "amount": order.amount,
        "currency": order.currency,
        "event_time": format_event_time(at),
        "schema_version": 1,
    }


def _next_record(rng: random.Random, orders: _Orders, kind: str, mix: Mix) -> Record:
    """The next event of the lifecycle: the clock advances an exponential gap (mean
    ``_MEAN_GAP_S``, whole microseconds), then an order is created, paid or cancelled, or a
    paid one refunded.

    One function, not a call per step: it runs once per record sent, and each Python call is
    a noticeable part of the producer's time.
    """
    if kind == "malformed":
        return _malformed(rng, orders)
    draw = rng.random
    us = orders.us = orders.us + int(-log(1.0 - draw()) * _MEAN_GAP_US)
    r = draw()
    waiting, paid = orders.open, orders.paid
    if r < 0.05 and paid:
        order, event_type = paid.pop(int(draw() * len(paid))), "order_refunded"
    elif not waiting or r < (0.6 if len(waiting) < _TARGET_OPEN else 0.4):
        order, event_type = orders.new_order(), "order_created"
        waiting.append(order)
    else:
        order = waiting.pop(int(draw() * len(waiting)))
        if draw() < 0.85:
            event_type = "order_paid"
            paid.append(order)
            if len(paid) > _PAID_KEPT:
                del paid[0]
        else:
            event_type = "order_cancelled"
    if kind == "late":
        us -= mix.late_by // _MICROSECOND
    seconds, micro = divmod(us, 1_000_000)
    minute, second = divmod(seconds, 60)
    prefix = orders.prefix if minute == orders.minute else orders.minute_text(minute)
    h = (rng.getrandbits(128) & _KEEP | _SET).to_bytes(16).hex()
    event_id = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"  # uuid4_text, inline
    # What ``encode(_payload(...))`` writes, formatted directly: every field but the amount is
    # a plain ASCII string (ids, declared values, a formatted time), the amount a float that
    # JSON writes as its repr (``_Order.text``).
    value = (
        f'{{"event_id":"{event_id}","event_type":"{event_type}",{order.text},'
        f'"event_time":"{prefix}{_SIXTY[second]}.{_MILLIS[micro // 1000]}Z","schema_version":1}}'
    )
    # tuple.__new__: the named tuple's own __new__ is a Python frame per record.
    return _NEW(Record, (order.order_id, value.encode(), kind, event_id, event_type, None))


_NEW = tuple.__new__


def _malformed(rng: random.Random, orders: _Orders) -> Record:
    """A record with exactly one defect, of a code drawn from every contract code."""
    code = rng.choice(CODES)
    order = orders.new_order()  # outside the lifecycle: a broken event changes no order
    payload = _payload(rng, order, rng.choice(EVENT_TYPES), orders.now)
    good = encode(payload)
    value: bytes | None
    if code == Malformed.NULL_VALUE:
        value = None
    elif code == Malformed.INVALID_UTF8:
        value = good.replace(b'"c-', b'"\xff\xfec-', 1)
    elif code == Malformed.INVALID_JSON:
        value = good[: len(good) // 2]
    elif code == Malformed.NOT_AN_OBJECT:
        value = encode([payload])
    else:
        if code == Malformed.MISSING_EVENT_ID:
            drop_id(rng, payload, "event_id")
        elif code == UNKNOWN_EVENT_TYPE:
            payload["event_type"] = rng.choice(("order_teleported", "OrderCreated"))
        elif code == Malformed.INVALID_EVENT_TIME:
            payload["event_time"] = rng.choice(("2026-13-45T25:61:00Z", "not a time"))
        else:
            payload["amount"] = str(payload["amount"])  # "12.5": a number in a string
        value = encode(payload)
    # The manifest names the event id and type only where the value still carries them.
    as_object = value == encode(payload) if value is not None else False
    return malformed_record(order.order_id, value, code, payload if as_object else None, "event_id")
