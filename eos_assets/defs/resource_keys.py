"""A stream's own resource keys in the functions Dagster calls with resources.

An asset, check, sensor or op names a resource by a parameter of the resource's type; Dagster
binds the resource whose key is the parameter's name (``lake: LakeResource``). A stream that
declares its own lake needs its definitions to name ``lake__<stream>`` instead, and the code
keeps reading ``lake``: ``renamed`` gives the function the signature with the stream's keys
(Dagster reads a callable's ``__signature__``, its parameters and their annotations alike) and
calls it with the names it was written with.
"""

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def renamed(fn: F, keys: Mapping[str, str]) -> F:
    """``fn`` with each parameter named in ``keys`` renamed to its value (a resource key)."""
    signature = inspect.signature(fn)
    keys = {name: key for name, key in keys.items() if name in signature.parameters}
    if not keys:
        return fn
    names = {key: name for name, key in keys.items()}

    def named(kwargs: dict[str, Any]) -> dict[str, Any]:
        return {names.get(k, k): v for k, v in kwargs.items()}

    # A generator stays one: Dagster reads what a generator yields as its outputs.
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            yield from fn(*args, **named(kwargs))
    else:

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **named(kwargs))

    call.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p.replace(name=keys.get(p.name, p.name)) for p in signature.parameters.values()]
    )
    return call  # type: ignore[return-value]
