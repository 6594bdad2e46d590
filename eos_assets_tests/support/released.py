"""Shared services stopped once a worker has run the last test that needs them.

In ``make test`` each worker runs the tests of a service's group one after another, then other
groups until the session ends. A service kept up until then only idles: a 3-node cluster costs
22-37 s of CPU a minute idle on this machine, the schema registry 7 s, a Spark Connect server
4 s, on two cores the suite keeps busy. So the fixture that starts such a service registers its
stop here, and the worker group hook (``conftest.py``) releases it after the last test of the
group that uses it. The fixture's own teardown then finds it stopped and does nothing.
"""

from collections.abc import Callable

_STOPS: dict[str, Callable[[], None]] = {}


def on_release(fixture: str, stop: Callable[[], object]) -> Callable[[], None]:
    """Register ``stop`` as the release of ``fixture``'s service; return a call that runs it at
    most once (for the fixture's teardown at the session's end)."""
    done: list[bool] = []

    def once() -> None:
        if not done:
            done.append(True)
            stop()

    _STOPS[fixture] = once
    return once


def release(fixture: str) -> None:
    """Stop ``fixture``'s service now, if it was started and is not stopped yet."""
    stop = _STOPS.pop(fixture, None)
    if stop is not None:
        stop()
