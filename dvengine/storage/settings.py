"""Object-store settings: delta-rs's ``storage_options`` names, the environment, and Spark's ``fs.s3a.*``.

Users configure S3 once, the way their other Delta tools take it: the standard ``AWS_*``
environment variables work with no code change (the object_store crate reads them), and
``storage_options`` given to ``forPath`` / ``write`` / the CLI use delta-rs's keys
(``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``, ...), which obstore accepts as they are. A Spark
user's ``fs.s3a.*`` Hadoop settings are translated here too.

Options are registered per table root; a path below a root uses that root's options. This is
what lets deep code (a DV read in the middle of a scan) reach the store without every call
carrying the options along.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping

from dvengine.errors import InvalidArgumentError

# dvengine's own keys (not passed to the store).
ALLOW_UNSAFE_COMMITS = "AWS_S3_ALLOW_UNSAFE_RENAME"  # delta-rs's name for "single writer, no conditional put"
_OWN_KEYS = frozenset({ALLOW_UNSAFE_COMMITS.lower()})

# Retry/timeout defaults: object_store retries for up to 3 minutes, so an unreachable endpoint
# would hang a command that long. Users can raise them with the same keys.
DEFAULT_CLIENT = {"connect_timeout": "5s", "timeout": "30s"}
DEFAULT_MAX_RETRIES = 3
DEFAULT_RETRY_TIMEOUT_S = 15.0

_lock = threading.Lock()
_registered: dict[str, dict[str, str]] = {}


def normalize_options(options: Mapping[str, object] | None) -> dict[str, str]:
    """``storage_options`` as ``{KEY: str}``; InvalidArgumentError for non-string keys or None values."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise InvalidArgumentError(f"storage_options must be a dict of str to str, got {type(options).__name__}")
    out: dict[str, str] = {}
    for key, value in options.items():
        if not isinstance(key, str) or not key or value is None:
            raise InvalidArgumentError(f"storage_options entry {key!r}={value!r}: keys and values must be strings")
        out[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def register_options(root: str, options: Mapping[str, object] | None) -> None:
    """Remember ``options`` for every path under the object URI ``root`` (later calls replace them)."""
    opts = normalize_options(options)
    if not opts:
        return
    with _lock:
        _registered.pop(root.rstrip("/"), None)  # re-insert: "last registered" order for same-bucket lookups
        _registered[root.rstrip("/")] = opts


def options_for(path: str) -> dict[str, str]:
    """The options registered for the longest root that contains ``path``; failing that, the ones last
    registered for a table in the same bucket (a clone target, a second table: same credentials);
    empty when none (the environment alone configures the store)."""
    best = ""
    bucket = "/".join(path.split("/", 3)[:3])  # scheme://bucket
    same_bucket = ""
    with _lock:
        for root in _registered:
            if (path == root or path.startswith(root + "/")) and len(root) > len(best):
                best = root
            if root == bucket or root.startswith(bucket + "/"):
                same_bucket = root  # dicts keep insertion order: the last registered wins
        return dict(_registered.get(best or same_bucket, {}))


def allows_unsafe_commits(options: Mapping[str, str]) -> bool:
    return any(k.lower() == ALLOW_UNSAFE_COMMITS.lower() and v.lower() == "true" for k, v in options.items())


def store_config(options: Mapping[str, str]) -> dict[str, str]:
    """Options to hand to obstore (dvengine's own keys removed)."""
    return {k: v for k, v in options.items() if k.lower() not in _OWN_KEYS}


def options_from_hadoop(conf: Mapping[str, str]) -> dict[str, str]:
    """delta-rs-named options from a SparkSession's ``fs.s3a.*`` (also ``spark.hadoop.fs.s3a.*``) settings."""
    get = {k.removeprefix("spark.hadoop."): v for k, v in conf.items()}
    out: dict[str, str] = {}
    pairs = {
        "fs.s3a.endpoint": "AWS_ENDPOINT_URL",
        "fs.s3a.access.key": "AWS_ACCESS_KEY_ID",
        "fs.s3a.secret.key": "AWS_SECRET_ACCESS_KEY",
        "fs.s3a.session.token": "AWS_SESSION_TOKEN",
        "fs.s3a.endpoint.region": "AWS_REGION",
    }
    for hadoop_key, ours in pairs.items():
        if get.get(hadoop_key):
            out[ours] = get[hadoop_key]
    endpoint = out.get("AWS_ENDPOINT_URL")
    ssl = get.get("fs.s3a.connection.ssl.enabled", "true").lower() != "false"
    if endpoint is not None and "://" not in endpoint:
        out["AWS_ENDPOINT_URL"] = f"{'https' if ssl else 'http'}://{endpoint}"
    if endpoint is not None and out["AWS_ENDPOINT_URL"].startswith("http://"):
        out["AWS_ALLOW_HTTP"] = "true"
    # Hadoop's default (false) means "virtual-hosted unless the endpoint needs otherwise"; only an
    # explicit true is a setting worth passing on (object_store's own default is path style).
    if get.get("fs.s3a.path.style.access", "").lower() == "true":
        out["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
    return out


# Where each store kind takes its endpoint from (option names, lower case; the prefixed ones in
# upper case are also environment variables). Azure's emulator mode reads AZURITE_BLOB_STORAGE_URL.
_ENDPOINT_KEYS = {
    "s3": ("aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint"),
    "az": ("azure_storage_endpoint", "azure_endpoint", "endpoint", "azurite_blob_storage_url"),
    "gs": ("google_service_account_endpoint",),
}


def host_table_key(uri: str) -> str:
    """What names a table on an object store for this host's writers: the endpoint (the table's
    options, else the environment's) and the URI, so two servers with a bucket (container) of the
    same name are two tables. Keys the commit turn (commit/commit_lock.py) and the commit relay
    (storage/commit_relay.py). Azure's endpoint counts too: two Azurite servers on one host each
    have a ``devstoreaccount1`` with its own containers."""
    scheme = uri.split("://", 1)[0].lower()
    kind = "az" if scheme in ("az", "azure", "abfs", "abfss", "adl") else scheme
    options = {k.lower(): v for k, v in options_for(uri).items()}
    names = _ENDPOINT_KEYS.get(kind, ())
    # the options first (they override the environment, as in object_store); never a bare ENDPOINT variable
    candidates = [options.get(n) for n in names]
    candidates += [os.environ.get(n.upper()) for n in names if n.startswith(("aws_", "azure_", "azurite_", "google_"))]
    endpoint = next((c for c in candidates if c), "")
    return f"{endpoint}\n{uri.rstrip('/')}"
