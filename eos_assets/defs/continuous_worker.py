"""The KPI half of a continuous run, in a thread of its own, so the next batch's read overlaps
this batch's KPI tables.

The run's loop (``continuous.py``) brings bronze and silver/events up to Kafka and proves
silver with its blocking check; it then hands the proven silver version to this worker and
goes on reading. The worker brings the declared KPI tables up to that version (never further,
whatever silver holds by then) and serves them. While it works, newer versions handed to it
replace each other: its next pass consumes the latest proven one, so it never falls behind by
more than one pass.

The worker makes no Dagster call: it queues what each pass did and a line of its seconds, and
the op's own thread, between its steps, turns them into the KPI assets' materializations.
"""

import queue
import threading
from collections.abc import Callable, Iterator

from eos_assets.defs.continuous_batch import Batches, Event, KpiPass

JOIN_S = 600.0  # the longest a closing run waits for the pass in flight


class KpiWorker:
    """One thread running ``Batches.kpis`` on the latest silver version handed to it."""

    def __init__(self, batches: Batches) -> None:
        self._batches = batches
        self._out: queue.Queue[KpiPass | str | BaseException] = queue.Queue()
        self._wake = threading.Condition()
        self._wanted: list[int | None] = []  # at most one: the latest version handed over
        self._closing = False
        self._thread = threading.Thread(target=self._loop, name="kpi-worker", daemon=True)
        self._thread.start()

    def submit(self, upto: int | None) -> None:
        """Bring the KPI tables up to silver version ``upto`` next (replacing one not begun)."""
        with self._wake:
            self._wanted[:] = [upto]
            self._wake.notify()

    def drain(self, log: Callable[[str], None]) -> Iterator[Event]:
        """The events the worker queued so far (its lines go to ``log``).

        Raises:
            BaseException: what the worker's last pass raised (it stops at the first).
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
                yield from self._batches.kpi_events(item)

    def close(self, log: Callable[[str], None]) -> Iterator[Event]:
        """Finish the pass in flight and the one waiting, then drain."""
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join(JOIN_S)
        yield from self.drain(log)

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._wanted and not self._closing:
                    self._wake.wait()
                if not self._wanted:
                    return
                upto = self._wanted.pop()
            took: dict[str, float] = {}
            try:
                done = self._batches.kpis(upto, took)
            except BaseException as exc:  # handed to the op's thread, which raises it
                self._out.put(exc)
                return
            if done is not None:
                self._out.put(done)
            if took:
                steps = ", ".join(f"{k} {v:.2f}" for k, v in took.items())
                self._out.put(f"KPIs up to silver version {upto}: seconds {steps}")
