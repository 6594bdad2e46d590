"""The lanes of a continuous run: the tables after silver, each lane in a thread of its own, so
the next batch's read overlaps this batch's tables.

The run's loop (``continuous.py``) brings bronze and silver/events up to Kafka and proves
silver with its blocking check; it then hands the proven silver version to each lane and goes
on reading. The KPI lane brings the declared KPI tables up to that version (never further,
whatever silver holds by then) and serves them; the follow lane brings the entity state, the
windows with their late events and the SQL KPIs up to it, at most once every
``follow_every_s``, so it shares the Spark server with the KPI lane without holding it. While a
lane works, newer versions handed to it replace each other: its next pass consumes the latest
proven one, so it never falls behind by more than one pass.

A lane makes no Dagster call: it queues what each pass did and a line of its seconds, and the
op's own thread, between its steps, turns them into the assets' materializations.
"""

import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from eos_assets.defs.continuous_batch import Event

JOIN_S = 600.0  # the longest a closing run waits for the pass in flight


class Lane:
    """One thread running ``step(upto, took)`` on the latest silver version handed to it.

    ``events`` turns what a pass returned (None: nothing done) into Dagster events; ``label``
    names its passes in the run's log; a pass starts at least ``every_s`` after the last one
    began.
    """

    def __init__(
        self,
        step: Callable[[int | None, dict[str, float]], Any],
        events: Callable[[Any], Iterator[Event]],
        label: str,
        every_s: float = 0.0,
    ) -> None:
        self._step, self._events, self._label, self._every_s = step, events, label, every_s
        self._out: queue.Queue[Any] = queue.Queue()
        self._wake = threading.Condition()
        self._wanted: list[int | None] = []  # at most one: the latest version handed over
        self._closing = False
        self._thread = threading.Thread(target=self._loop, name=f"{label}-lane", daemon=True)
        self._thread.start()

    def submit(self, upto: int | None) -> None:
        """Bring the lane's tables up to silver version ``upto`` next (replacing one not
        begun)."""
        with self._wake:
            self._wanted[:] = [upto]
            self._wake.notify()

    def drain(self, log: Callable[[str], None]) -> Iterator[Event]:
        """The events the lane queued so far (its lines go to ``log``).

        Raises:
            BaseException: what the lane's last pass raised (it stops at the first).
        """
        while True:
            try:
                item = self._out.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, str):
                log(item)
            else:
                yield from self._events(item)

    def close(self, log: Callable[[str], None]) -> Iterator[Event]:
        """Finish the pass in flight and the one waiting, then drain."""
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join(JOIN_S)
        yield from self.drain(log)

    def _loop(self) -> None:
        began = float("-inf")
        while True:
            with self._wake:
                while not self._closing and (
                    not self._wanted or time.monotonic() - began < self._every_s
                ):
                    wait = self._every_s - (time.monotonic() - began)
                    self._wake.wait(wait if self._wanted and wait > 0 else None)
                if not self._wanted:
                    return
                upto = self._wanted.pop()
            began = time.monotonic()
            took: dict[str, float] = {}
            try:
                done = self._step(upto, took)
            except BaseException as exc:  # handed to the op's thread, which raises it
                self._out.put(exc)
                return
            if done is not None:
                self._out.put(done)
            if took:
                steps = ", ".join(f"{k} {v:.2f}" for k, v in took.items())
                self._out.put(f"{self._label} up to silver version {upto}: seconds {steps}")
