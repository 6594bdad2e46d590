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
- the one-line cause and fix of a configuration that cannot work (``problem``; the store's
  own answers are explained by ``store_errors``, and ``store_check`` makes sure the store
  honours conditional writes).

Every table URI of a lake on S3 is an ``s3://`` one (``table_uri``): delta-rs, pyarrow and
Spark (through ``fs.s3.impl``) all read it, so ``s3a://`` in the setting is only an alias.
"""

import re
from collections.abc import Mapping

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


def store_of(root: str, env: Mapping[str, str]) -> str:
    """The object store of the lake at ``root``, as a Spark server records what it was started
    for: ``s3 <endpoint>`` (``s3 AWS`` without one), empty for a local lake."""
    if not is_s3(root):
        return ""
    return f"s3 {env.get('AWS_ENDPOINT_URL') or 'AWS'}"


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
