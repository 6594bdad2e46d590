"""The lake on object storage: what every part that touches it needs, derived in one place.

With ``EOS_LAKE_ROOT=s3://bucket/prefix`` (or ``s3a://``) the store is configured by the
standard AWS variables only (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``, or a profile
or instance credentials on AWS). From them this module derives:

- delta-rs's storage options (``storage_options``): endpoint, region and ``allow_http``; the
  credentials stay in the environment, where delta-rs's own chain (keys, profile, instance)
  reads them, so no secret lands in a run's config;
- Spark's s3a settings (``spark_settings``): the endpoint, region and path-style access of
  the store, ``s3://`` URIs served by S3A, and the same variables for the Python tasks of a
  cluster's executors, whose pyarrow writes the files (pyarrow follows ``AWS_ENDPOINT_URL``);
- the one-line cause and fix of a store that cannot be used (``problem``, ``explain``).

Every table URI of a lake on S3 is an ``s3://`` one (``table_uri``): delta-rs, pyarrow and
Spark (through ``fs.s3.impl``) all read it, so ``s3a://`` in the setting is only an alias.
"""

import contextlib
import re
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, cast

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError
from obstore.store import S3Store

if TYPE_CHECKING:
    from obstore.store import RetryConfig, S3Config  # typing-only names of obstore

from eos_assets.lib.errors import ConfigError, EosError

S3_SCHEMES = ("s3://", "s3a://")
_TRUE = {"1", "true", "yes", "on"}


def is_s3(root: str) -> bool:
    """Whether the lake root (or a table URI) is on S3 (``s3://`` or ``s3a://``)."""
    return root.startswith(S3_SCHEMES)


def table_root(root: str) -> str:
    """The lake root as the URI every engine reads: ``s3a://`` becomes ``s3://``."""
    return "s3://" + root.removeprefix("s3a://") if root.startswith("s3a://") else root


def bucket_of(uri: str) -> str:
    """The bucket of an ``s3://`` or ``s3a://`` URI."""
    return table_root(uri).removeprefix("s3://").split("/", 1)[0]


def _region(env: Mapping[str, str]) -> str | None:
    return env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None


def _allow_http(env: Mapping[str, str]) -> bool:
    return (env.get("AWS_ALLOW_HTTP") or "").strip().lower() in _TRUE


def storage_options(root: str, env: Mapping[str, str]) -> dict[str, str]:
    """delta-rs storage options of the lake at ``root`` (none for a local lake).

    Only what is not secret: the credentials are read from the environment by delta-rs.
    """
    if not is_s3(root):
        return {}
    options: dict[str, str] = {}
    if endpoint := env.get("AWS_ENDPOINT_URL"):
        options["AWS_ENDPOINT_URL"] = endpoint
    if region := _region(env):
        options["AWS_REGION"] = region
    if _allow_http(env):
        options["AWS_ALLOW_HTTP"] = "true"
    return options


def spark_settings(root: str, env: Mapping[str, str]) -> dict[str, str]:
    """Spark's s3a settings for the lake at ``root`` (none for a local lake).

    S3A reads the credentials from the environment (its default provider chain: keys, then
    instance credentials). The store's address goes to the executors (``spark.executorEnv.*``)
    but never a credential: these settings become the Spark resource's config, which the UI
    shows, and the Spark server's command line. Executors of a cluster take theirs from their
    own environment or instance profile.
    """
    if not is_s3(root):
        return {}
    settings = {
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
    }
    if endpoint := env.get("AWS_ENDPOINT_URL"):
        # An S3-compatible store: one host for every bucket, as delta-rs and pyarrow use it.
        settings["spark.hadoop.fs.s3a.endpoint"] = endpoint
        settings["spark.hadoop.fs.s3a.path.style.access"] = "true"
        secure = endpoint.lower().startswith("https://")
        settings["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(secure).lower()
    if region := _region(env):
        settings["spark.hadoop.fs.s3a.endpoint.region"] = region
    for name in ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ALLOW_HTTP"):
        if value := env.get(name):
            settings[f"spark.executorEnv.{name}"] = value
    return settings


def problem(root: str, env: Mapping[str, str]) -> str | None:
    """The one-line cause and fix of a lake configuration that cannot work, seen without
    asking the store; None when nothing is wrong (or the lake is local)."""
    if not is_s3(root):
        return None
    if not bucket_of(root):
        return f"EOS_LAKE_ROOT={root!r} names no bucket: set it to s3://<bucket>/<prefix>"
    endpoint = env.get("AWS_ENDPOINT_URL") or ""
    if not endpoint and env.get("AWS_ENDPOINT"):
        return (
            "AWS_ENDPOINT is set but pyarrow and Spark read AWS_ENDPOINT_URL: set "
            "AWS_ENDPOINT_URL to the store's URL"
        )
    if endpoint and not re.match(r"https?://", endpoint, re.IGNORECASE):
        return f"AWS_ENDPOINT_URL={endpoint!r} is not an http(s) URL: set it to the store's URL"
    if endpoint.lower().startswith("http://") and not _allow_http(env):
        return (
            f"the lake's endpoint {endpoint} is plain http: set AWS_ALLOW_HTTP=true (or use "
            "an https endpoint)"
        )
    has_keys = bool(env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"))
    if endpoint and not has_keys and not env.get("AWS_PROFILE"):
        return (
            f"no credentials for the lake at {endpoint}: set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY"
        )
    return None


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


# What a store answered, in the text of delta-rs's (object_store's) error, and what to set.
_CAUSES: tuple[tuple[str, str], ...] = (
    (
        "NotImplemented",
        "the store does not support conditional writes (If-None-Match: *), which Delta "
        "commits need: use a store that does (AWS S3 does)",
    ),
    ("URL scheme is not allowed", "its endpoint is plain http: set AWS_ALLOW_HTTP=true"),
    ("NoSuchBucket", "bucket {bucket} does not exist: create it, or fix EOS_LAKE_ROOT"),
    (
        "SignatureDoesNotMatch",
        "the store refused the secret key: fix AWS_SECRET_ACCESS_KEY",
    ),
    (
        "InvalidAccessKeyId",
        "the store does not know the access key: fix AWS_ACCESS_KEY_ID",
    ),
    (
        "169.254.169.254",
        "no credentials (none set, no instance credentials): set AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)",
    ),
    ("403 Forbidden", "the store denied access: check AWS_ACCESS_KEY_ID and its permissions"),
    (
        "tcp connect error",
        "nothing answers at {endpoint}: start the store, or fix AWS_ENDPOINT_URL",
    ),
    ("dns error", "the host of {endpoint} is unknown: fix AWS_ENDPOINT_URL"),
    (
        "error sending request",
        "the store at {endpoint} did not answer: check it runs, or fix AWS_ENDPOINT_URL",
    ),
)


def explain(exc: BaseException, uri: str, env: Mapping[str, str]) -> str | None:
    """The one-line cause and fix of an object-store error of delta-rs on ``uri``; None when
    ``uri`` is not on S3 or the error is not one of the store's known answers."""
    if not is_s3(uri):
        return None
    text = str(exc)
    endpoint = env.get("AWS_ENDPOINT_URL") or "the AWS endpoint"
    for marker, cause in _CAUSES:
        if marker in text:
            found = cause.format(bucket=bucket_of(uri), endpoint=endpoint)
            return f"cannot use the lake at {table_root(uri)} on {endpoint}: {found}"
    return None
