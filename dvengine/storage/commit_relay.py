"""A host-local relay of the commit objects of tables on object stores.

Every writer of a hot table must know each commit the others made: its next listed load (and its
catch-up after a lost race) sees them in the LIST and reads each with a GET, so W writers on one
host each GET the same W-1 objects per operation, and on a store every GET is a round trip (and a
request the server serves). Writers on one host can hand those bytes to each other instead: after a
commit PUT (or a GET of another writer's commit) the bytes are left here under a name made of the
version and a digest of the object's e-tag, and a later load on this host that *lists* that
version with that e-tag takes them from here. The listing stays the authority: nothing is ever used
that the store's own LIST does not show with the same e-tag, so a relay file can neither invent a
version nor stand in for a different object at the same name (a table deleted and recreated at the
path has other objects, and their e-tags differ; where an e-tag is the MD5 of the bytes, as S3's is
for a single PUT, the bytes are checked against it too).

The folder is private to the user (created 0700 and checked to be owned by the user and closed to
others before anything is read from it or written to it): commit bytes from a folder someone else
can write to would be an injection point. Files are replaced atomically (temp + rename); the
newest ``KEEP_VERSIONS`` versions per table are kept, folders of tables idle for a day are removed;
commits over ``MAX_BYTES`` are not relayed. Best effort throughout: a relay file that cannot be
written or read only means a GET from the store, so those errors are not raised.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import shutil
import stat
import tempfile
import time

from dvengine.storage.settings import host_table_key
from dvengine.storage.uris import is_object_uri

MAX_BYTES = 64 * 1024
KEEP_VERSIONS = 64
IDLE_TABLE_S = 24 * 3600.0
_PRUNE_EVERY = 16
_MD5_ETAG = re.compile(r'^"?([0-9a-f]{32})"?$')


@functools.cache
def _private_root() -> str | None:
    """The user's relay folder, or None when it cannot be made private (then nothing is relayed)."""
    uid = os.getuid() if hasattr(os, "getuid") else None
    if uid is None:
        return None
    root = os.path.join(tempfile.gettempdir(), f"dvengine-commit-relay-{uid}")
    try:
        os.makedirs(root, mode=0o700, exist_ok=True)
        st = os.lstat(root)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o077:
        return None
    _remove_idle_tables(root, time.time() - IDLE_TABLE_S)
    return root


def _remove_idle_tables(root: str, before: float) -> None:
    """Once per process: remove the folders of tables nobody on this host has committed to since
    ``before`` (their last versions would otherwise stay in the temp folder)."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        with contextlib.suppress(OSError):  # another process may be removing (or filling) it right now
            if entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < before:
                shutil.rmtree(entry.path)


def _table_folder(table_root: str, create: bool) -> str | None:
    """The table's folder in the relay, named by its endpoint and URI (``host_table_key``)."""
    root = _private_root()
    if root is None:
        return None
    folder = os.path.join(root, hashlib.sha256(host_table_key(table_root).encode()).hexdigest()[:32])
    if create:
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        except OSError:
            return None
    return folder


def _name(version: int, e_tag: str) -> str:
    return f"{version:020d}-{hashlib.sha256(e_tag.encode()).hexdigest()[:24]}"


def _matches_etag(data: bytes, e_tag: str) -> bool:
    """Do the bytes fit the e-tag? Checked where the e-tag is an MD5 of the content; other
    e-tags (multipart uploads, encrypted objects, other stores) say nothing about the bytes."""
    md5 = _MD5_ETAG.match(e_tag)
    return md5 is None or hashlib.md5(data, usedforsecurity=False).hexdigest() == md5.group(1)


def publish(table_root: str, version: int, e_tag: str | None, data: bytes) -> None:
    """Leave ``data`` (the object at ``version`` whose e-tag is ``e_tag``) for this host's other
    writers of the table at ``table_root`` (nothing for a local table: its commits cost no round
    trip); best effort: a failure only means they GET it."""
    if not is_object_uri(table_root) or e_tag is None or len(data) > MAX_BYTES or not _matches_etag(data, e_tag):
        return
    folder = _table_folder(table_root, create=True)
    if folder is None:
        return
    target = os.path.join(folder, _name(version, e_tag))
    temp = f"{target}.{os.getpid()}.tmp"
    try:
        with open(temp, "wb") as out:
            out.write(data)
        os.replace(temp, target)
    except OSError:
        _remove(temp)
        return
    if version % _PRUNE_EVERY == 0:
        _prune(folder, version - KEEP_VERSIONS)


def lookup(table_root: str, version: int, e_tag: str | None) -> bytes | None:
    """The bytes of ``version`` with ``e_tag`` if a writer on this host left them; else None."""
    if e_tag is None or not is_object_uri(table_root):
        return None
    folder = _table_folder(table_root, create=False)
    if folder is None:
        return None
    try:
        with open(os.path.join(folder, _name(version, e_tag)), "rb") as found:
            data = found.read(MAX_BYTES + 1)
    except OSError:
        return None
    return data if len(data) <= MAX_BYTES and _matches_etag(data, e_tag) else None


def _prune(folder: str, below: int) -> None:
    """Remove the relay files of versions below ``below`` (and temp files they left)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        head = name[:20]
        if head.isdigit() and int(head) < below:
            _remove(os.path.join(folder, name))


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):  # gone already, or another writer's prune took it
        os.unlink(path)
