"""What an object store's error means for the lake, in one line naming what to set.

delta-rs (object_store) and pyarrow (the AWS SDK for C++, in the Spark tasks that write the
tables' files) tell a store's answer in pages of text; ``explain`` finds the answer in it.
In a Spark task, ``task_errors`` raises the line as an ``EosError``, which the driver finds in
the task's failure (``errors.raised_in``) instead of a Python and Java stack.
"""

import contextlib
import os
from collections.abc import Iterator, Mapping

from eos_assets.lib.errors import EosError
from eos_assets.lib.lake_store import bucket_of, is_s3, table_root

# What a store answered, in the text of an error of delta-rs (object_store) or of pyarrow (the
# AWS SDK for C++, in the Spark tasks that write the files), and what to set.
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
    ("NO_SUCH_BUCKET", "bucket {bucket} does not exist: create it, or fix EOS_LAKE_ROOT"),
    ("403 Forbidden", "the store denied access: check AWS_ACCESS_KEY_ID and its permissions"),
    ("ACCESS_DENIED", "the store denied access: check AWS_ACCESS_KEY_ID and its permissions"),
    ("HTTP status 403", "the store denied access: check AWS_ACCESS_KEY_ID and its permissions"),
    (
        "tcp connect error",
        "nothing answers at {endpoint}: start the store, or fix AWS_ENDPOINT_URL",
    ),
    (
        "NETWORK_CONNECTION",
        "nothing answers at {endpoint}: start the store, or fix AWS_ENDPOINT_URL",
    ),
    ("dns error", "the host of {endpoint} is unknown: fix AWS_ENDPOINT_URL"),
    (
        "error sending request",
        "the store at {endpoint} did not answer: check it runs, or fix AWS_ENDPOINT_URL",
    ),
)


def explain(exc: BaseException, uri: str, env: Mapping[str, str]) -> str | None:
    """The one-line cause and fix of an object-store error on ``uri``; None when ``uri`` is not
    on S3 or the error is not one of the store's known answers."""
    if not is_s3(uri):
        return None
    text = str(exc)
    endpoint = env.get("AWS_ENDPOINT_URL") or "the AWS endpoint"
    for marker, cause in _CAUSES:
        if marker in text:
            found = cause.format(bucket=bucket_of(uri), endpoint=endpoint)
            return f"cannot use the lake at {table_root(uri)} on {endpoint}: {found}"
    return None


@contextlib.contextmanager
def task_errors(uri: str) -> Iterator[None]:
    """In a task writing to the table at ``uri``: a store's error becomes its one line."""
    try:
        yield
    except OSError as exc:
        explained = explain(exc, uri, os.environ)
        if explained is None:
            raise
        raise EosError(explained) from None
