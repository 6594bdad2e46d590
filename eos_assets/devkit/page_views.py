"""Deterministic page views (``examples/page_views/defs.yaml``): visitor sessions, plus the
duplicates, late, out-of-order and malformed records a real stream carries, planned
transaction by transaction as ``events.plan_transactions`` plans orders.

Sessions arrive at random and each views 1..``MAX_PAGES`` pages, a few seconds to minutes
apart; a view's ``duration_ms`` is the time to the session's next view (the last view's is
unknown half the time, so absent). Some visitors sign in during the session, so ``user_id``
appears part way. Views are delivered in time order except that some are held back by up to
``disorder``: no record's ``ts`` lies more than ``disorder`` before one delivered earlier
(late records and duplicates aside). Records are keyed by ``session_id``.

Everything comes from one ``random.Random(seed)``, ids included, so the same seed, start time,
mix and ``disorder`` give the same records byte for byte.
"""

import dataclasses
import heapq
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from eos_assets.devkit.events import (
    Mix,
    Record,
    TransactionPlan,
    drop_id,
    encode,
    format_event_time,
    malformed_record,
    plan_with,
    record,
    uuid4_text,
)
from eos_assets.lib.contract.contract import Malformed

INVALID_PAGE = "invalid_page"
# The defects a page-view record can have: broken JSON, no id, an ISO-8601 ``ts`` where the
# declaration wants epoch milliseconds, and no ``page`` (a required field).
CODES: tuple[str, ...] = (
    Malformed.INVALID_JSON,
    Malformed.MISSING_EVENT_ID,
    Malformed.INVALID_EVENT_TIME,
    INVALID_PAGE,
)
PAGES: tuple[str, ...] = (
    "/",
    "/search",
    "/products",
    "/products/shoes",
    "/products/bags",
    "/cart",
    "/checkout",
    "/account",
    "/help",
    "/blog",
)
LANDING_PAGES: tuple[str, ...] = ("/", "/products", "/blog", "/search", "/products/shoes")
_LANDING_WEIGHTS = (40, 60, 75, 90, 100)  # cumulative: 40/20/15/15/10 %
REFERRERS: tuple[str, ...] = (
    "https://www.google.com/",
    "https://duckduckgo.com/",
    "https://news.ycombinator.com/",
    "https://t.co/",
)
MAX_PAGES = 12
DISORDER = timedelta(seconds=3)
# The demo's mix: 7 % duplicates, 2 % malformed records.
DEMO_MIX = Mix(duplicate_ratio=0.07, malformed_ratio=0.02)

_MEAN_ARRIVAL_MS = 500  # a new session every half second of event time on average
_MEAN_DWELL_MS = 30_000
_MIN_DWELL_MS = 2_000
_HELD_BACK = 0.2  # share of views delivered up to ``disorder`` after their time


def plan_transactions(
    seed: int,
    start_time: datetime,
    count: int,
    transaction_size: int,
    mix: Mix,
    disorder: timedelta = DISORDER,
) -> Iterator[TransactionPlan]:
    """Yield transactions holding ``count`` page-view records in all, aborted ones included.

    The caller commits or aborts each plan before asking for the next one. An aborted
    transaction's views are taken back (sessions, clock and held-back views as before it), so
    the committed stream stays plausible and no aborted view id ever appears committed.
    Duplicates repeat a record committed in an earlier transaction (same view id, same bytes).
    Late records are one-view sessions whose ``ts`` lies ``mix.late_by`` behind the clock.
    """
    rng = random.Random(seed)
    site = _Site(rng, start_time, disorder)
    yield from plan_with(rng, site, _next_record, count, transaction_size, mix)


def generate(
    seed: int,
    start_time: datetime,
    count: int,
    mix: Mix = DEMO_MIX,
    transaction_size: int = 500,
    disorder: timedelta = DISORDER,
) -> list[Record]:
    """The ``count`` records of a run whose transactions all commit, in the order they are sent.

    They are the records the producer sends with the same seed, start time, count, transaction
    size and mix (``mix.abort_ratio`` is taken as 0). Duplicates repeat records of earlier
    transactions, so a run of one transaction has none.
    """
    mix = dataclasses.replace(mix, abort_ratio=0.0)
    plans = plan_transactions(seed, start_time, count, transaction_size, mix, disorder)
    return [record for plan in plans for record in plan.records]


@dataclass(frozen=True)
class _Session:
    session_id: str
    user_id: str | None
    signs_in_at: int  # the view from which user_id is sent (planned + 1: never)
    planned: int
    viewed: int = 0
    page: str | None = None  # the page viewed last
    referrer: str | None = None  # where the visitor came from


# (deliver at, sequence, session, time, duration): views taken but not yet delivered. The view
# id is drawn at delivery, so a view held over an aborted transaction gets a new one.
_Held = tuple[int, int, _Session, int, int | None]


class _Site:
    """Sessions in progress, the arrival clock and the views held back for delivery."""

    def __init__(self, rng: random.Random, start_time: datetime, disorder: timedelta) -> None:
        self.rng = rng
        self.disorder_ms = int(disorder / timedelta(milliseconds=1))
        self.arrival = _millis(start_time)
        self._next_id = rng.randrange(1, 10**9)  # runs with other seeds use other ids
        self._seq = 0
        self._sessions: list[tuple[int, int, _Session]] = []  # heap by next view time
        self._held: list[_Held] = []  # heap by delivery time

    @property
    def now(self) -> int:
        """The time of the next view (epoch milliseconds): the stream's clock."""
        return min(self.arrival, self._sessions[0][0]) if self._sessions else self.arrival

    def save(self) -> tuple[int, list, list]:
        return self.arrival, list(self._sessions), list(self._held)

    def restore(self, saved: tuple[int, list, list]) -> None:
        self.arrival, self._sessions, self._held = saved[0], list(saved[1]), list(saved[2])

    def next_id(self, prefix: str) -> str:
        self._next_id += 1
        return f"{prefix}-{self._next_id}"

    def new_session(self, planned: int | None = None) -> _Session:
        rng = self.rng
        if planned is None:
            bounce = rng.random() < 0.35
            planned = 1 if bounce else min(MAX_PAGES, 2 + int(rng.expovariate(1 / 3)))
        # 40 % are signed in from the first view, 15 % sign in later, the rest never do.
        r = rng.random()
        if r < 0.4:
            signs_in_at = 1
        elif r < 0.55 and planned > 1:
            signs_in_at = rng.randint(2, planned)
        else:
            signs_in_at = planned + 1
        return _Session(
            session_id=self.next_id("s"),
            user_id=f"u-{rng.randint(1, 5000)}",
            signs_in_at=signs_in_at,
            planned=planned,
            referrer=rng.choice(REFERRERS) if rng.random() < 0.6 else None,
        )

    def next_view(self) -> Record:
        """The next view in delivery order."""
        while not self._held or self._held[0][0] > self.now:
            self._view()
        _, _, session, at, duration = heapq.heappop(self._held)
        return _record(self.rng, session, at, duration, "valid")

    def _view(self) -> None:
        """Take the next view in time order and hold it until it is due."""
        rng = self.rng
        if not self._sessions or self.arrival <= self._sessions[0][0]:
            at, session = self.arrival, self.new_session()
            self.arrival += round(rng.expovariate(1 / _MEAN_ARRIVAL_MS))
        else:
            at, _, session = heapq.heappop(self._sessions)
        session = dataclasses.replace(session, viewed=session.viewed + 1, page=_page(rng, session))
        dwell = _MIN_DWELL_MS + round(rng.expovariate(1 / _MEAN_DWELL_MS))
        last = session.viewed >= session.planned
        if not last:
            self._push(self._sessions, (at + dwell, self._seq, session))
        duration = None if last and rng.random() < 0.5 else dwell
        held = rng.random() < _HELD_BACK
        due = at + rng.randint(0, self.disorder_ms) if held else at
        self._push(self._held, (due, self._seq, session, at, duration))

    def _push(self, heap: list, item: tuple) -> None:
        heapq.heappush(heap, item)
        self._seq += 1


def _record(
    rng: random.Random, session: _Session, at: int, duration: int | None, kind: str
) -> Record:
    """The record of ``session``'s latest view at ``at`` (epoch milliseconds)."""
    return record(session.session_id, _payload(rng, session, at, duration), kind, "view_id")


def _payload(rng: random.Random, session: _Session, at: int, duration: int | None) -> dict:
    payload: dict[str, object] = {
        "view_id": uuid4_text(rng.getrandbits(128)),
        "session_id": session.session_id,
    }
    if session.viewed >= session.signs_in_at:
        payload["user_id"] = session.user_id
    payload["page"] = session.page
    if session.referrer is not None:
        payload["referrer"] = session.referrer
    if duration is not None:
        payload["duration_ms"] = duration
    payload["ts"] = at
    payload["schema_version"] = 1
    return payload


def _page(rng: random.Random, session: _Session) -> str:
    """The session's next page: a landing page first, then any other page."""
    if session.page is None:
        return rng.choices(LANDING_PAGES, cum_weights=_LANDING_WEIGHTS)[0]
    return rng.choice([p for p in PAGES if p != session.page])


def _millis(moment: datetime) -> int:
    moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)


def _next_record(rng: random.Random, site: _Site, kind: str, mix: Mix) -> Record:
    if kind == "malformed":
        return _malformed(rng, site)
    if kind == "late":
        # A visitor whose view reaches us late_by after it happened (an app that was offline):
        # a session of its own, so the other sessions' views stay in order.
        session = site.new_session(planned=1)
        session = dataclasses.replace(session, viewed=1, page=_page(rng, session))
        at = site.now - int(mix.late_by / timedelta(milliseconds=1))
        return _record(rng, session, at, rng.randint(_MIN_DWELL_MS, 60_000), "late")
    return site.next_view()


def _malformed(rng: random.Random, site: _Site) -> Record:
    """A record with exactly one defect, of a code drawn from ``CODES``."""
    code = rng.choice(CODES)
    # Outside every session in progress: a broken record changes no session.
    session = site.new_session(planned=1)
    session = dataclasses.replace(session, viewed=1, page=_page(rng, session))
    payload = _payload(rng, session, site.now, None)
    value: bytes
    if code == Malformed.INVALID_JSON:
        good = encode(payload)
        value = good[: len(good) // 2]
    else:
        if code == Malformed.MISSING_EVENT_ID:
            drop_id(rng, payload, "view_id")
        elif code == Malformed.INVALID_EVENT_TIME:
            at = datetime.fromtimestamp(site.now / 1000, UTC)
            payload["ts"] = format_event_time(at)  # an ISO string where a number belongs
        elif rng.random() < 0.5:
            del payload["page"]
        else:
            payload["page"] = None
        value = encode(payload)
    carried = payload if code != Malformed.INVALID_JSON else None
    return malformed_record(session.session_id, value, code, carried, "view_id")
