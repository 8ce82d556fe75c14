"""Table locations: plain paths, ``file:`` URIs and object-store URIs, in one canonical spelling.

A table root is either an absolute local path or ``scheme://bucket/key`` with the scheme made
canonical (``s3a://`` and ``s3n://`` name the same bucket and key as ``s3://``; Hadoop users
write the first, delta-rs and DuckDB the last). Every path below a root is built by string
joining, so the rest of dvengine handles both spellings the same way.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlparse

from dvengine.errors import InvalidArgumentError, UnsupportedStorageError

# A URI scheme as RFC 3986 spells it. One letter is a Windows drive ("C:\\data"), not a scheme.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")
# Schemes served by the object-store backend, mapped to the spelling the store understands.
OBJECT_SCHEMES = {
    "s3": "s3", "s3a": "s3", "s3n": "s3",
    "gs": "gs",
    "az": "az", "azure": "az", "abfs": "abfs", "abfss": "abfss", "adl": "adl",
}  # fmt: skip
# Schemes that name remote storage even when written without "//" (Hadoop accepts "hdfs:x").
_UNSERVED_REMOTE_SCHEMES = frozenset(
    {"wasb", "wasbs", "hdfs", "viewfs", "dbfs", "oss", "cos", "http", "https", "ftp", "sftp", "webhdfs", "swebhdfs"}
)


def scheme_of(text: str) -> str | None:
    """The lower-case URI scheme of ``text``, or None for a plain path."""
    match = _SCHEME.match(text)
    return None if match is None else match.group(1).lower()


def is_object_uri(text: str) -> bool:
    """True when ``text`` is an object-store URI the storage layer serves (``s3://b/k`` ...)."""
    scheme = scheme_of(text)
    return scheme is not None and scheme in OBJECT_SCHEMES and text[len(scheme) + 1 :].startswith("//")


def split_object_uri(uri: str) -> tuple[str, str]:
    """``(store base, key)``: ``("s3://bucket", "a/b")`` for ``s3a://bucket/a/b``; the key has no leading slash."""
    parsed = urlparse(uri)
    scheme = OBJECT_SCHEMES[parsed.scheme.lower()]
    if not parsed.netloc:
        raise InvalidArgumentError(f"object store URI {uri!r} names no bucket (write {scheme}://bucket/path)")
    return f"{scheme}://{parsed.netloc}", parsed.path.lstrip("/")


def canonical_object_uri(uri: str) -> str:
    """``s3://bucket/key`` for any served spelling, without a trailing slash."""
    base, key = split_object_uri(uri)
    key = key.rstrip("/")
    return f"{base}/{key}" if key else base


def _refuse_unserved(text: str) -> None:
    """UnsupportedStorageError for schemes the storage layer cannot serve (``hdfs:``, ``wasbs:`` ...).

    A remote path must never be mistaken for a relative local folder named ``hdfs:``.
    """
    scheme = scheme_of(text)
    if scheme is None:
        return
    if scheme == "file":
        host = urlparse(text).netloc
        if host not in ("", "localhost"):
            raise UnsupportedStorageError(
                f"table path {text!r} names host {host!r}; only local file: URIs are supported "
                "(write file:///absolute/path, with three slashes)"
            )
        return
    if scheme in OBJECT_SCHEMES and not text[len(scheme) + 1 :].startswith("//"):
        raise InvalidArgumentError(f"table path {text!r}: write {scheme}://bucket/path (with two slashes)")
    if scheme in OBJECT_SCHEMES:
        return
    if scheme in _UNSERVED_REMOTE_SCHEMES or text[len(scheme) + 1 :].startswith("//"):
        served = ", ".join(sorted(f"{s}://" for s in OBJECT_SCHEMES))
        raise UnsupportedStorageError(
            f"table path {text!r} uses the {scheme}: scheme; dvengine serves local paths, file: URIs and "
            f"{served}, so nothing was read or written"
        )


def local_path_of(text: str) -> str:
    """A plain or ``file:`` path as an absolute local path (``~`` expanded, symlinks resolved)."""
    if text.startswith("file:"):
        text = unquote(urlparse(text).path)
    return os.path.realpath(os.path.expanduser(text))


def check_uri_text(text: str) -> None:
    """Raise for a URI no backend serves; plain paths and served URIs pass."""
    _refuse_unserved(text)


def join(root: str, relative: str) -> str:
    """``root/relative`` for a local path or an object URI ('/'-separated either way on POSIX)."""
    if is_object_uri(root):
        return f"{root.rstrip('/')}/{relative.lstrip('/')}"
    return os.path.join(root, relative)
