"""The object-store backend (S3 and S3-compatible stores, GCS, Azure) on obstore.

obstore is the Python binding of the Rust ``object_store`` crate that delta-rs uses, so dvengine
and delta-rs talk to a store the same way: same configuration keys, same retries, same
conditional writes. Commits are ``put(..., mode="create")``: S3 and Azure Blob send
``If-None-Match: *`` and the store refuses the PUT when the object exists (S3 412, Azure 409
BlobAlreadyExists), which is Delta's put-if-absent without a lock service. A store that ignores the header would let two writers both "win" one version, so the
first write of a process to a store is preceded by a probe (create the same hidden object
twice: the second must be refused); a store that fails it is refused before anything is written.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections import Counter
from datetime import timedelta
from typing import Any

import obstore
import pyarrow as pa
from obstore.exceptions import AlreadyExistsError, BaseError, PermissionDeniedError, UnauthenticatedError

from dvengine.errors import (
    ConditionalPutUnsupportedError,
    InvalidArgumentError,
    StorageAccessError,
    StorageError,
    StorageUnreachableError,
)
from dvengine.faults import COMMIT_AFTER_LINK, COMMIT_BEFORE_LINK, fault_point
from dvengine.storage import pending
from dvengine.storage.base import BACKGROUND_PUT, CONDITIONAL_PUT_PROBE_PREFIX, FileAlreadyExists, FileInfo
from dvengine.storage.recent_writes import RecentWrites
from dvengine.storage.settings import (
    ALLOW_UNSAFE_COMMITS,
    DEFAULT_CLIENT,
    DEFAULT_MAX_RETRIES,
    DEFAULT_RETRY_TIMEOUT_S,
    allows_unsafe_commits,
    store_config,
)
from dvengine.storage.uris import split_object_uri

# A refusal shows as the HTTP status or the S3 / Azure error code (object_store maps few of them to types).
_ACCESS_DENIED = re.compile(
    r"status code: 40[13]\b|Forbidden|InvalidAccessKeyId|SignatureDoesNotMatch|AccessDenied|ExpiredToken"
    r"|AuthenticationFailed|AuthorizationFailure|AuthorizationPermissionMismatch"
)
# The store's code for "the bucket / container in the URI does not exist" (S3, Azure Blob).
_NO_CONTAINER = {"NoSuchBucket": "bucket", "ContainerNotFound": "container"}
_UNREACHABLE_MARKERS = ("error sending request", "timed out", "timeout", "Connection refused", "connect error",
                        "dns error")  # fmt: skip
_RETRY_KEYS = {"max_retries", "retry_timeout"}
# object_store's HTTP client settings (obstore's ClientConfig keys).
_CLIENT_KEYS = frozenset({
    "allow_http", "allow_invalid_certificates", "connect_timeout", "default_content_type", "http1_only",
    "http2_keep_alive_interval", "http2_keep_alive_timeout", "http2_keep_alive_while_idle", "http2_only",
    "pool_idle_timeout", "pool_max_idle_per_host", "proxy_url", "proxy_ca_certificate", "proxy_excludes",
    "randomize_addresses", "read_timeout", "timeout", "user_agent",
})  # fmt: skip


def _translate(exc: BaseException, uri: str, action: str) -> BaseException:
    """A typed dvengine error naming ``uri`` for an obstore failure; missing objects stay FileNotFoundError."""
    text = str(exc).split("\n\nDebug source:", 1)[0]
    for code, kind in _NO_CONTAINER.items():
        if code in text:
            return StorageError(f"cannot {action} {uri}: {kind} {_container_of(uri)} does not exist")
    if isinstance(exc, FileNotFoundError):
        return exc
    if any(m.lower() in text.lower() for m in _UNREACHABLE_MARKERS):
        return StorageUnreachableError(f"cannot {action} {uri}: the store did not answer ({text[:300]})")
    if isinstance(exc, PermissionDeniedError | UnauthenticatedError) or _ACCESS_DENIED.search(text):
        return StorageAccessError(f"cannot {action} {uri}: the store refused the credentials ({text[:300]})")
    return StorageError(f"cannot {action} {uri}: {text[:400]}")


def _container_of(uri: str) -> str:
    """The bucket or container a URI names: ``b`` of ``s3://b/k``, ``c`` of ``az://c/k`` and of
    ``abfss://c@account.dfs.core.windows.net/k`` (the account is not the container)."""
    netloc = split_object_uri(uri)[0].split("://", 1)[1]
    return netloc.split("@", 1)[0]


def _build_store(base: str, options: dict[str, str]) -> Any:
    config = store_config(options)
    retry: dict[str, Any] = {"max_retries": DEFAULT_MAX_RETRIES, "retry_timeout": timedelta(seconds=DEFAULT_RETRY_TIMEOUT_S)}
    for key in list(config):
        if key.lower() == "max_retries":
            retry["max_retries"] = int(config.pop(key))
        elif key.lower() == "retry_timeout":
            retry["retry_timeout"] = timedelta(seconds=float(config.pop(key).rstrip("s")))
    try:
        if base.startswith("s3://"):
            # Client settings go in ``config`` with the aws_ prefix: an explicit client_options
            # would replace what the environment set (AWS_ALLOW_HTTP ...) instead of adding to it.
            given = {k.lower().removeprefix("aws_") for k in config}
            config.update({f"aws_{k}": v for k, v in DEFAULT_CLIENT.items() if k not in given})
            return obstore.store.S3Store(base.removeprefix("s3://"), config=config, retry_config=retry)  # type: ignore[arg-type]
        store_keys, client = _split_client_options(base, config)
        build: Any = obstore.store.from_url  # gs / az / abfss (Azure tested against Azurite, GCS untested)
        return build(base, config=store_keys, client_options=client, retry_config=retry)
    except (BaseError, ValueError, TypeError) as exc:
        raise InvalidArgumentError(f"storage_options for {base} are not valid: {exc}") from exc
    except BaseException as exc:
        # A Rust panic inside obstore arrives as pyo3's PanicException, a BaseException: a bad
        # option must not escape as something no ``except Exception`` catches.
        if type(exc).__name__ == "PanicException":
            raise InvalidArgumentError(f"storage_options for {base} are not valid: {exc}") from None
        raise


def _split_client_options(base: str, config: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``(store config, client options)`` for a ``gs://`` / ``az://`` / ``abfss://`` store.

    delta-rs takes HTTP client settings (``allow_http``, ``timeout`` ...) among the storage options,
    with or without the store's prefix (``azure_allow_http``). obstore's Azure and GCS stores want
    them in ``client_options``: given in ``config`` they make obstore panic ("Expected config prefix
    to start with azure_"), so ``{"allow_http": "true"}``, which an Azurite user needs, could not be
    passed at all. dvengine's client defaults (short timeouts) fill in what is not given, as for S3.
    """
    prefix = "google_" if base.startswith("gs://") else "azure_"
    store_keys: dict[str, str] = {}
    client: dict[str, str] = {}
    for key, value in config.items():
        name = key.lower().removeprefix(prefix)
        if name in _CLIENT_KEYS:
            client[name] = value
        else:
            store_keys[key] = value
    for name, value in DEFAULT_CLIENT.items():
        client.setdefault(name, value)
    return store_keys, client


class ObjectStorage:
    """Storage for one bucket (container) of an object store; paths are full URIs (``s3://bucket/key``)."""

    is_local = False

    def __init__(self, base: str, options: dict[str, str]) -> None:
        self.base = base
        self._store = _build_store(base, options)
        self._unsafe = allows_unsafe_commits(options)
        self._checked = False
        self._lock = threading.Lock()
        # Requests sent, by kind, and the seconds spent waiting for their answers (the bench
        # reports round trips per command, and how much of a command's time they take, from these).
        self.requests: Counter[str] = Counter()
        self.request_seconds: dict[str, float] = {}
        # Data/DV/CDC files this client just wrote: read back without a GET (see recent_writes).
        self._recent = RecentWrites()

    def _key(self, path: str) -> str:
        base, key = split_object_uri(path)
        if base != self.base:
            raise InvalidArgumentError(f"{path} is not in {self.base}")
        return key

    def _uri(self, key: str) -> str:
        return f"{self.base}/{key}"

    def list_dir(self, directory: str) -> list[FileInfo]:
        prefix = self._key(directory).rstrip("/") + "/"
        started = self._start("LIST")
        try:
            listing = obstore.list_with_delimiter(self._store, prefix)
        except BaseError as exc:
            raise _translate(exc, directory, "list") from exc
        finally:
            self._done("LIST", started)
        out = [self._info(o) for o in listing["objects"] if not o["path"].rsplit("/", 1)[-1].startswith(".")]
        out.sort(key=lambda f: f.path)
        return out

    def _info(self, meta: Any) -> FileInfo:
        return FileInfo(self._uri(meta["path"]), meta["size"], int(meta["last_modified"].timestamp() * 1000), meta.get("e_tag"))

    def list_dir_after(self, directory: str, after_name: str) -> list[FileInfo]:
        """One LIST of the names sorting after ``after_name`` (S3 ``start-after``): a reopened table's
        log tail costs one request however long the log before it is."""
        prefix = self._key(directory).rstrip("/") + "/"
        out = []
        started = self._start("LIST")
        try:
            for batch in obstore.list(self._store, prefix, offset=prefix + after_name, chunk_size=1000):
                for o in batch:
                    name = o["path"][len(prefix) :]
                    if "/" not in name and not name.startswith(".") and name > after_name:
                        out.append(self._info(o))
        except BaseError as exc:
            raise _translate(exc, directory, "list") from exc
        finally:
            self._done("LIST", started)
        out.sort(key=lambda f: f.path)
        return out

    def list_files(self, directory: str, include_hidden: bool = False) -> list[FileInfo]:
        prefix = self._key(directory).rstrip("/") + "/"
        out = []
        started = self._start("LIST")
        try:
            for batch in obstore.list(self._store, prefix):
                for o in batch:
                    parts = o["path"][len(prefix) :].split("/")
                    if not include_hidden and any(p.startswith(".") for p in parts):
                        continue
                    out.append(self._info(o))
        except BaseError as exc:
            raise _translate(exc, directory, "list") from exc
        finally:
            self._done("LIST", started)
        out.sort(key=lambda f: f.path)
        return out

    def _start(self, kind: str) -> float:
        self.requests[kind] += 1
        return time.perf_counter()

    def _done(self, kind: str, started: float) -> None:
        self.request_seconds[kind] = self.request_seconds.get(kind, 0.0) + time.perf_counter() - started

    def _get(self, path: str) -> tuple[Any, str | None]:
        """The whole object as obstore's ``Bytes`` (buffer protocol: no copy into Python bytes yet),
        and its e-tag. Every whole-object GET goes through here."""
        started = self._start("GET")
        try:
            result = obstore.get(self._store, self._key(path))
            data = result.bytes()
        except (BaseError, FileNotFoundError) as exc:
            raise _translate(exc, path, "read") from exc
        finally:
            self._done("GET", started)
        e_tag = result.meta.get("e_tag")
        return data, None if e_tag is None else str(e_tag)

    def read_bytes(self, path: str) -> bytes:
        pending.wait_for([path])
        recent = self._recent.get(path)
        if recent is not None:
            return recent
        return bytes(self._get(path)[0])

    def read_bytes_tagged(self, path: str) -> tuple[bytes, str | None]:
        """The object and its e-tag from one GET (``TaggedReads``)."""
        pending.wait_for([path])
        data, e_tag = self._get(path)
        return bytes(data), e_tag

    def read_range(self, path: str, start: int, length: int) -> bytes:
        pending.wait_for([path])
        recent = self._recent.get(path)
        if recent is not None:
            return recent[start : start + length]
        started = self._start("GET")
        try:
            return bytes(obstore.get_range(self._store, self._key(path), start=start, length=length))
        except (BaseError, FileNotFoundError) as exc:
            raise _translate(exc, path, "read") from exc
        finally:
            self._done("GET", started)

    def head(self, path: str) -> FileInfo:
        pending.wait_for([path])
        started = self._start("HEAD")
        try:
            meta = obstore.head(self._store, self._key(path))
        except (BaseError, FileNotFoundError) as exc:
            raise _translate(exc, path, "stat") from exc
        finally:
            self._done("HEAD", started)
        return FileInfo(path, meta["size"], int(meta["last_modified"].timestamp() * 1000))

    def exists(self, path: str) -> bool:
        try:
            self.head(path)
        except FileNotFoundError:
            return False
        return True

    def _check_conditional_put(self, path: str) -> None:
        """Once per store: prove create-if-absent is enforced before the first byte of a write lands."""
        with self._lock:
            if self._checked or self._unsafe:
                return
            probe = f"{path.rsplit('/', 1)[0]}/{CONDITIONAL_PUT_PROBE_PREFIX}{uuid.uuid4().hex}"
            key = self._key(probe)
            refused = False
            self.requests["PUT"] += 2
            self.requests["DELETE"] += 1
            started = time.perf_counter()
            try:
                obstore.put(self._store, key, b"probe", mode="create")
                try:
                    obstore.put(self._store, key, b"probe", mode="create")
                except AlreadyExistsError:
                    refused = True
                finally:
                    obstore.delete(self._store, key)
            except NotImplementedError as exc:
                raise self._unsupported(path, str(exc).split("\n", 1)[0]) from exc
            except (BaseError, FileNotFoundError) as exc:
                raise _translate(exc, path, "write") from exc
            finally:
                self._done("PUT", started)  # the three requests of the probe, counted together
            if not refused:
                raise self._unsupported(path, "a second create of the same object succeeded (If-None-Match ignored)")
            self._checked = True

    def _unsupported(self, path: str, why: str) -> ConditionalPutUnsupportedError:
        return ConditionalPutUnsupportedError(
            f"cannot commit to {path}: the store does not enforce create-if-absent writes ({why}), so concurrent "
            f"writers could overwrite each other's commits; nothing was written. Set storage option "
            f"{ALLOW_UNSAFE_COMMITS}=true to allow a single writer at your own risk"
        )

    def put_if_absent(self, path: str, data: bytes) -> str | None:
        """Create ``path`` with ``If-None-Match: *``; the new object's e-tag (the snapshot cache keeps it
        to recognise this commit in the next listing without reading it back)."""
        self._check_conditional_put(path)
        fault_point(COMMIT_BEFORE_LINK)
        started = self._start("PUT")
        try:
            if self._unsafe:
                if self.exists(path):
                    raise FileAlreadyExists(path)
                result = obstore.put(self._store, self._key(path), data)
            else:
                result = obstore.put(self._store, self._key(path), data, mode="create")
        except AlreadyExistsError:
            raise FileAlreadyExists(path) from None
        except NotImplementedError as exc:
            raise self._unsupported(path, str(exc).split("\n", 1)[0]) from exc
        except (BaseError, FileNotFoundError) as exc:
            raise _translate(exc, path, "commit") from exc
        finally:
            self._done("PUT", started)
        fault_point(COMMIT_AFTER_LINK)
        e_tag = result.get("e_tag")
        return None if e_tag is None else str(e_tag)

    def _put(self, path: str, data: bytes) -> None:
        self._check_conditional_put(path)
        self.requests["PUT"] += 1
        self._send(path, self._key(path), data)

    def _send(self, path: str, key: str, data: bytes, timed_as: str = "PUT") -> None:
        started = time.perf_counter()  # counted by the caller, which may run before this (a background PUT)
        try:
            obstore.put(self._store, key, data)
        except (BaseError, FileNotFoundError) as exc:
            raise _translate(exc, path, "write") from exc
        finally:
            self._done(timed_as, started)

    def write(self, path: str, data: bytes) -> None:
        """Overwrite (``_last_checkpoint``): a PUT replaces an object atomically."""
        self._put(path, data)

    def put_new(self, path: str, data: bytes) -> None:
        self._put(path, data)
        self._recent.remember(path, data)

    def put_new_in_background(self, path: str, data: bytes) -> None:
        """``put_new`` sent on a worker (storage/pending.py): returns once the PUT is under way.
        The probe and the path check run here first, so their errors still come before any
        byte is sent; the PUT's own failure is raised, typed, by whoever waits for the file (the
        commit that names it, a read, a delete)."""
        self._check_conditional_put(path)
        key = self._key(path)
        self.requests["PUT"] += 1
        self._recent.remember(path, data)

        def send() -> None:
            try:
                self._send(path, key, data, BACKGROUND_PUT)
            except BaseException:
                self._recent.forget(path)
                raise

        pending.start(path, send)

    def delete(self, path: str) -> None:
        pending.settle(path)
        self._recent.forget(path)
        started = self._start("DELETE")
        try:
            obstore.delete(self._store, self._key(path))
        except (BaseError, FileNotFoundError) as exc:
            raise _translate(exc, path, "delete") from exc
        finally:
            self._done("DELETE", started)

    def parquet_source(self, path: str) -> str | pa.NativeFile:
        """The object in memory for pyarrow: the bytes this client just wrote, else one GET whose
        buffer pyarrow reads in place (no copy into Python bytes: a 1.6 MB file is ~0.1-0.2 ms of copy)."""
        pending.wait_for([path])
        recent = self._recent.get(path)
        return pa.BufferReader(recent if recent is not None else pa.py_buffer(self._get(path)[0]))
