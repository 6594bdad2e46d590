"""The check that a lake's S3 store honours conditional writes, before a table is made there.

Delta commits on S3 rest on a put that stores the next log entry only if its key is absent
(``If-None-Match: *``). DESIGN.md, "Commits on object storage", says why the check puts an
object itself rather than committing twice.
"""

import contextlib
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, cast

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError
from obstore.store import S3Store

from eos_assets.lib.errors import ConfigError, EosError
from eos_assets.lib.lake_store import bucket_of, is_s3, table_root
from eos_assets.lib.store_errors import explain

if TYPE_CHECKING:
    from obstore.store import RetryConfig, S3Config  # typing-only names of obstore

# Buckets (with their endpoint) whose conditional writes this process has seen work.
_VERIFIED: set[tuple[str, str]] = set()
# The check's own requests: one answer each, a store that refuses the header answers at once.
_CHECK_RETRIES: "RetryConfig" = {"max_retries": 0, "retry_timeout": timedelta(seconds=30)}


def require_conditional_put(uri: str, storage_options: Mapping[str, str] | None) -> None:
    """Make sure the store of ``uri`` refuses to overwrite an existing key on a conditional
    put (``If-None-Match: *``), once per bucket and process, before a table is created there.

    Delta commits on S3 rest on it: the next log entry is written only if absent. A store that
    ignores the condition lets two writers both "win" one version, the second silently
    replacing the first. delta-rs lists the log before each commit, so two of its commits in
    a row never race; the check therefore puts one scratch object twice, if absent, through
    object_store (the library under delta-rs's commits): the second put must be refused. The
    object is deleted afterwards. An answer that decides nothing (no credentials, no bucket,
    ...) leaves the verdict to the table's own creation, which says it in one line.

    Raises:
        ConfigError: the store ignores conditional writes (one line).
        EosError: the store does not implement them (one line).
    """
    if not is_s3(uri):
        return
    options = dict(storage_options or {})
    where = (bucket_of(uri), options.get("AWS_ENDPOINT_URL", ""))
    if where in _VERIFIED:
        return
    table = table_root(uri).removeprefix(f"s3://{where[0]}").strip("/")
    key = f"{table}/_eos_store_check/{uuid.uuid4().hex}".lstrip("/")
    # delta-rs hands its storage options to object_store as they are: the same keys serve.
    config = cast("S3Config", options)
    store = S3Store(where[0], config=config, retry_config=_CHECK_RETRIES)
    try:
        obstore.put(store, key, b"1", mode="create")
    except BaseError as exc:
        if "NotImplemented" in str(exc):
            raise EosError(explain(exc, uri, options) or str(exc).splitlines()[0]) from None
        return
    try:
        obstore.put(store, key, b"2", mode="create")
        honoured = False
    except AlreadyExistsError:
        honoured = True
    except BaseError:  # the second answer decides nothing either
        return
    finally:
        with contextlib.suppress(BaseError):
            obstore.delete(store, key)
    if not honoured:
        raise ConfigError(
            f"the object store of {table_root(uri)} ignores conditional writes "
            "(If-None-Match: *), so concurrent Delta commits could overwrite each other: use a "
            "store that supports them (AWS S3 does), or a local EOS_LAKE_ROOT"
        )
    _VERIFIED.add(where)
