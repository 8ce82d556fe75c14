"""A process-wide cache of the newest snapshot per table root, advanced by the log tail.

A job that opens the same table every few seconds (a CDC upsert stream) used to list the whole
``_delta_log`` and re-read the newest checkpoint on every round, so its cost grew with history.
Like delta-rs's incremental snapshot update, the cache keeps the reconciled state of the last
version this process loaded and, on the next load, reads only the commit files after it:
``<v+1>.json``, ``<v+2>.json`` ... until one does not exist. Commits are created put-if-absent
and in order (a writer can only create ``v+2`` after reading ``v+1``), so the first missing file
ends the tail exactly as a listing would.

What keeps the cached answer equal to a fresh load:

- the commit file of the cached version is read again and compared (BLAKE2 digest) before the
  state is trusted: a table deleted and recreated at the same path, or a log rewritten under
  us, differs there (new commitInfo timestamp and txnId) and the entry is dropped;
- time travel to a version older than the cached one, ``timestamp`` lookups, and any request
  the tail cannot answer exactly (a version that does not exist yet, a commit without a
  commitInfo timestamp, a tail longer than ``MAX_TAIL`` commits) go through the normal
  listing-based load, which then refreshes the entry; a long tail is where a newer checkpoint
  pays off, so that is when the listing and newest checkpoint are used;
- the cached state is never mutated: applying a tail copies the file map first, and snapshots
  are immutable, so threads may share entries.

Disable with the environment variable ``DVENGINE_LOG_SNAPSHOTCACHE=false`` (tests of log
corruption do, so that they read the files they corrupt).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from dvengine.log.replay import ReplayState
from dvengine.log.snapshot import Snapshot
from dvengine.protocol.actions import Action
from dvengine.storage import commit_relay

ENV_SWITCH = "DVENGINE_LOG_SNAPSHOTCACHE"
# More new commits than this and a listing plus the newest checkpoint is the cheaper way there
# (Delta's default checkpoint interval is 10: past 50 commits a checkpoint is nearly certain).
MAX_TAIL = 50
# Tables remembered at once; the least recently used one is dropped beyond this.
MAX_TABLES = 64


def cache_enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "true").strip().lower() not in ("false", "0", "no", "off")


def digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


@dataclass(frozen=True)
class CachedTable:
    """The snapshot of one version, the state it was built from, and its commit file's digest.

    ``with_tombstones``: ``state.tombstones`` holds every remove a full replay of this version
    holds (set once a checkpoint writer or VACUUM asked for them), so the next versions get
    theirs by applying the tail too, instead of re-reading the newest checkpoint's removes.
    """

    snapshot: Snapshot
    state: ReplayState
    commit_digest: bytes
    with_tombstones: bool = False
    # On object stores: the e-tag of the commit file of ``version``. One LIST of the log from this
    # version on then both proves the table is the same (same e-tag) and shows the tail, where a
    # content digest would need the file read back (a second round trip).
    commit_etag: str | None = None
    # The storage client (one per store and credentials) that built or last checked this entry.
    # Only that client may skip asking the store whether the table exists: other credentials
    # must still prove they can reach it.
    store: object | None = None
    # When (time.monotonic(), taken before the request was sent) a listing, a tail read that ended
    # at a missing file, or this process's own put-if-absent showed that no version newer than
    # ``version`` existed. None: never shown (a time-travel load). A DML may commit on this
    # snapshot without listing while it is young enough (loader.blind_snapshot).
    verified_at: float | None = None

    @property
    def version(self) -> int:
        return self.snapshot.version


_LOCK = threading.Lock()
_ENTRIES: OrderedDict[str, CachedTable] = OrderedDict()


def get(table_root: str) -> CachedTable | None:
    with _LOCK:
        entry = _ENTRIES.get(table_root)
        if entry is not None:
            _ENTRIES.move_to_end(table_root)
        return entry


def remember(table_root: str, entry: CachedTable) -> None:
    """Keep ``entry`` unless an entry of a newer version is already there (a racing thread's)."""
    with _LOCK:
        current = _ENTRIES.get(table_root)
        if current is not None and current.version > entry.version:
            return
        _ENTRIES[table_root] = entry
        _ENTRIES.move_to_end(table_root)
        while len(_ENTRIES) > MAX_TABLES:
            _ENTRIES.popitem(last=False)


def forget(table_root: str, entry: CachedTable | None = None) -> None:
    """Drop the entry of ``table_root`` (only if it is still ``entry``, when given)."""
    with _LOCK:
        if entry is None or _ENTRIES.get(table_root) is entry:
            _ENTRIES.pop(table_root, None)


def clear_snapshot_cache() -> None:
    """Forget every cached snapshot (tests; a process that rewrites logs behind dvengine's back)."""
    with _LOCK:
        _ENTRIES.clear()
        _OWN_COMMITS.clear()
        _READ_COMMITS.clear()
        _CHECKPOINTS.clear()
        _BLIND_LOSSES.clear()


@dataclass(frozen=True)
class OwnCommit:
    """The last commit this process wrote to a table, and when its put-if-absent was sent."""

    version: int
    e_tag: str | None
    data: bytes
    sent_at: float  # time.monotonic() before the put-if-absent: no newer version existed then


# The last commit this process wrote to each table. On a store, the next listed load sees that
# version with that e-tag and takes the bytes from here instead of a GET of what it has just PUT;
# the e-tag is what makes it safe (another object under that name, a table recreated in between,
# has another e-tag and is read from the store). On any backend, the next DML may move a cached
# snapshot of the version before it forward by these bytes without listing (blind_snapshot).
_OWN_COMMITS: OrderedDict[str, OwnCommit] = OrderedDict()


def note_own_commit(table_root: str, version: int, e_tag: str | None, data: bytes, sent_at: float) -> None:
    """Remember the commit just written at ``version``; ``sent_at``: monotonic time before its put."""
    if not cache_enabled():
        return
    commit_relay.publish(table_root, version, e_tag, data)  # for this host's other writers (stores only)
    with _LOCK:
        _OWN_COMMITS[table_root] = OwnCommit(version, e_tag, data, sent_at)
        _OWN_COMMITS.move_to_end(table_root)
        while len(_OWN_COMMITS) > MAX_TABLES:
            _OWN_COMMITS.popitem(last=False)


def own_commit(table_root: str, version: int, e_tag: str | None) -> bytes | None:
    """The bytes of ``version`` if this process wrote it and the listed object is still that one."""
    with _LOCK:
        found = _OWN_COMMITS.get(table_root)
    if found is None or e_tag is None or found.version != version or found.e_tag != e_tag:
        return None
    return found.data


# Commits of other writers this process has just read whole from a store, with their e-tags: a
# writer that lost a race reads the winners (transaction.py), and its next listed load would GET
# the same objects again (on a hot table ~W-1 of them per op). Kept per table for the newest
# READ_COMMITS_PER_TABLE versions, only commits up to READ_COMMIT_MAX_BYTES; the e-tag check is
# the same as for the own commit above.
READ_COMMITS_PER_TABLE = 64
READ_COMMIT_MAX_BYTES = 64 * 1024
_READ_COMMITS: OrderedDict[str, dict[int, tuple[str, bytes]]] = OrderedDict()


def note_read_commit(table_root: str, version: int, e_tag: str | None, data: bytes) -> None:
    """Remember ``data``, read from the store as ``version`` with ``e_tag`` (no e-tag: nothing to
    recognise it by later, so nothing is kept)."""
    if e_tag is None or len(data) > READ_COMMIT_MAX_BYTES or not cache_enabled():
        return
    commit_relay.publish(table_root, version, e_tag, data)
    with _LOCK:
        versions = _READ_COMMITS.setdefault(table_root, {})
        versions[version] = (e_tag, data)
        while len(versions) > READ_COMMITS_PER_TABLE:
            versions.pop(min(versions))
        _READ_COMMITS.move_to_end(table_root)
        while len(_READ_COMMITS) > MAX_TABLES:
            _READ_COMMITS.popitem(last=False)


def known_commit(table_root: str, version: int, e_tag: str | None) -> bytes | None:
    """The bytes of ``version`` if this process wrote or read it, or another writer on this host
    left it in the commit relay (storage/commit_relay.py), and the listed object (``e_tag``) is
    that one; None means it has to be read."""
    own = own_commit(table_root, version, e_tag)
    if own is not None or e_tag is None:
        return own
    with _LOCK:
        found = _READ_COMMITS.get(table_root, {}).get(version)
    if found is not None and found[0] == e_tag:
        return found[1]
    return commit_relay.lookup(table_root, version, e_tag) if cache_enabled() else None  # another writer on this host


def last_own_commit(table_root: str) -> OwnCommit | None:
    """The last commit this process wrote to ``table_root`` (None when none is remembered)."""
    with _LOCK:
        return _OWN_COMMITS.get(table_root)


# The newest checkpoint version this process has seen listed or written, per table. Log cleanup
# deletes commits only below a checkpoint, so a cached snapshot older than a known checkpoint may
# sit below a cleaned-up stretch of the log: it is never committed on blindly.
_CHECKPOINTS: dict[str, int] = {}


def note_checkpoint(table_root: str, version: int) -> None:
    with _LOCK:
        if version > _CHECKPOINTS.get(table_root, -1):
            _CHECKPOINTS[table_root] = version
            while len(_CHECKPOINTS) > 4 * MAX_TABLES:
                _CHECKPOINTS.pop(next(iter(_CHECKPOINTS)))


def known_checkpoint(table_root: str) -> int:
    with _LOCK:
        return _CHECKPOINTS.get(table_root, -1)


# When (monotonic) a DML that committed blindly on this process's cached snapshot of a table last
# found its version taken. Another writer is active there: for one staleness window the next
# commands list first instead of planning on a snapshot that is likely stale again.
_BLIND_LOSSES: dict[str, float] = {}


def note_blind_loss(table_root: str, at: float) -> None:
    with _LOCK:
        _BLIND_LOSSES[table_root] = at
        while len(_BLIND_LOSSES) > 4 * MAX_TABLES:
            _BLIND_LOSSES.pop(next(iter(_BLIND_LOSSES)))


def last_blind_loss(table_root: str) -> float | None:
    with _LOCK:
        return _BLIND_LOSSES.get(table_root)


def cacheable_state(state: ReplayState, with_tombstones: bool = False) -> ReplayState:
    """A private copy of ``state``; its tombstones only when ``with_tombstones`` (they are complete
    only after a replay that read the checkpoint's removes)."""
    copy = ReplayState()
    copy.protocol = state.protocol
    copy.metadata = state.metadata
    copy.files = dict(state.files)
    copy.txns = dict(state.txns)
    copy.domains = dict(state.domains)
    copy.last_commit_info = state.last_commit_info
    if with_tombstones:
        copy.tombstones = state.tombstones.copy()  # O(changes): the base is shared (tombstone_map)
    return copy


def advanced_state(entry: CachedTable, tail: Sequence[Sequence[Action]]) -> ReplayState:
    """The cached state with the commits of ``tail`` applied in order (the entry is not touched).

    With complete tombstones they are carried forward by the same rules (a remove adds one, an
    add of the same key clears it). The result can hold removes a replay from a *newer*
    checkpoint would not, those the checkpoint writer dropped as expired; both readers of
    tombstones (the checkpoint writer, VACUUM) filter by the retention window themselves.
    """
    state = cacheable_state(entry.state, entry.with_tombstones)
    for actions in tail:
        state.apply_commit(actions)
    if not entry.with_tombstones:
        state.tombstones.clear()
    return state
