"""Building snapshots from the log, and the small history queries around it.

Replay = newest usable checkpoint at or before the target version + every JSON commit after it,
in order. The directory listing is authoritative: ``_last_checkpoint`` is read and cross-checked
but a stale or broken hint never changes the result, because the listing already shows every
complete checkpoint. A checkpoint that turns out unreadable (corrupt Parquet, missing sidecar,
no protocol/metaData) is skipped in favour of an older one or of full replay from commit 0;
only when nothing else can reconstruct the version is its error raised.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Mapping, Sequence

from dvengine.errors import InvalidArgumentError, LogCorruptedError, ProtocolError, VersionNotFoundError
from dvengine.log import snapshot_cache
from dvengine.log.app_transactions import RETENTION_PROPERTY as TXN_RETENTION_PROPERTY
from dvengine.log.app_transactions import live_app_transactions
from dvengine.log.checkpoint_reader import read_checkpoint
from dvengine.log.column_mapping import column_mapping_mode
from dvengine.log.commit_file import find_commit_info, parse_actions
from dvengine.log.file_order import advanced_files, sorted_files
from dvengine.log.filenames import LogFileKind, commit_file_name, parse_log_file_name
from dvengine.log.intervals import parse_interval_ms
from dvengine.log.last_checkpoint import read_last_checkpoint
from dvengine.log.listing import CheckpointFiles, LogListing, list_log, list_log_from, log_files_from, probe_log_from
from dvengine.log.replay import ReplayState
from dvengine.log.retirement import retired_between, retired_by_tail
from dvengine.log.snapshot import Snapshot
from dvengine.log.timestamps import commit_info_timestamp, to_epoch_ms
from dvengine.log.tombstone_map import flat_tombstones
from dvengine.log.tombstones import to_remove, tombstone_rows
from dvengine.protocol.actions import Action, AddFile, CommitInfo, RemoveFile
from dvengine.protocol.features import check_readable
from dvengine.protocol.schema import parse_schema
from dvengine.protocol.type_widening import TYPE_CHANGES_KEY, check_type_changes_readable
from dvengine.storage.base import FileInfo
from dvengine.storage.batch import read_many
from dvengine.storage.logstore import LogStore, log_dir, normalize_table_path
from dvengine.storage.registry import storage_for
from dvengine.storage.retired_files import announce_retired

_LOG = logging.getLogger(__name__)

TimestampArg = int | dt.datetime | str


def _store(store: LogStore | None, table_root: str) -> LogStore:
    return storage_for(table_root) if store is None else store


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")


# --- version resolution ----------------------------------------------------------------------


def _is_version(version: object) -> bool:
    return isinstance(version, int) and not isinstance(version, bool)


def _check_version(listing: LogListing, version: int) -> int:
    if isinstance(version, bool) or not isinstance(version, int):
        raise InvalidArgumentError(f"version must be an int, got {version!r}")
    latest = listing.latest_version
    if version < 0:
        raise VersionNotFoundError(f"version {version} of {listing.table_root} does not exist: versions start at 0")
    if version > latest:
        raise VersionNotFoundError(
            f"version {version} of {listing.table_root} does not exist: the latest version is {latest}"
        )
    earliest = listing.earliest_reconstructable_version
    if version < earliest:
        raise VersionNotFoundError(
            f"version {version} of {listing.table_root} can no longer be reconstructed: log files before "
            f"version {earliest} were cleaned up; the earliest available version is {earliest}"
        )
    return version


def _version_timestamp(store: LogStore, listing: LogListing, version: int) -> int | None:
    info = listing.commits.get(version)
    if info is not None:
        return commit_info_timestamp(find_commit_info(store.read_bytes(info.path), info.path), info.modification_time_ms)
    for cp in listing.checkpoints:
        if cp.version == version:
            return cp.modification_time_ms
    return None


def _version_at_timestamp(store: LogStore, listing: LogListing, ts_ms: int) -> int:
    """Latest version whose commit timestamp is <= ts_ms (later than the latest commit is fine)."""
    earliest = listing.earliest_reconstructable_version
    best: int | None = None
    first_ts: int | None = None
    for version in range(earliest, listing.latest_version + 1):
        ts = _version_timestamp(store, listing, version)
        if ts is None:
            continue
        if first_ts is None:
            first_ts = ts
        if ts <= ts_ms:
            best = version
    if best is None:
        first = "unknown" if first_ts is None else _iso(first_ts)
        raise VersionNotFoundError(
            f"timestamp {_iso(ts_ms)} is before the earliest available commit of {listing.table_root} "
            f"(version {earliest} at {first})"
        )
    return best


# --- replay ----------------------------------------------------------------------------------


def _require_commits(listing: LogListing, first: int, last: int) -> None:
    missing = [v for v in range(first, last + 1) if v not in listing.commits]
    if missing:
        shown = ", ".join(str(v) for v in missing[:10]) + (" ..." if len(missing) > 10 else "")
        raise ProtocolError(
            f"the log of {listing.table_root} has a gap: commit file(s) for version(s) {shown} are missing "
            f"although versions up to {listing.latest_version} exist; cannot reconstruct version {last}"
        )


def _check_hint(store: LogStore, listing: LogListing) -> None:
    if not getattr(store, "is_local", True):
        return  # the hint only feeds a log line; on an object store it would cost a GET per load
    hint = read_last_checkpoint(store, listing.log_path)
    if hint is None:
        return
    if not any(cp.version == hint.version for cp in listing.checkpoints):
        _LOG.info(
            "_last_checkpoint of %s points at version %d, which has no complete checkpoint; using the listing",
            listing.table_root,
            hint.version,
        )


def _state_from_checkpoint(
    store: LogStore, listing: LogListing, cp: CheckpointFiles, with_removes: bool
) -> ReplayState:
    state = ReplayState()
    state.apply_commit(read_checkpoint(store, cp, listing.log_path, with_removes))
    if state.protocol is None or state.metadata is None:
        raise LogCorruptedError(
            f"checkpoint {cp.paths[0]} of version {cp.version} has no "
            f"{'protocol' if state.protocol is None else 'metaData'} action"
        )
    return state


def _initial_state(
    store: LogStore, listing: LogListing, target: int, with_removes: bool
) -> tuple[ReplayState, int]:
    """State of the newest readable checkpoint <= target (or empty state at -1) and its version."""
    errors: list[LogCorruptedError] = []
    for cp in listing.checkpoints_at_or_before(target):
        _require_commits(listing, cp.version + 1, target)
        try:
            return _state_from_checkpoint(store, listing, cp, with_removes), cp.version
        except LogCorruptedError as exc:
            _LOG.warning("skipping unreadable checkpoint of version %d: %s", cp.version, exc)
            errors.append(exc)
    if 0 not in listing.commits:
        if errors:
            raise LogCorruptedError(
                f"cannot reconstruct version {target} of {listing.table_root}: every checkpoint at or before it is "
                f"unreadable and the commits before them were cleaned up; first error: {errors[0]}"
            ) from errors[0]
        raise VersionNotFoundError(
            f"version {target} of {listing.table_root} can no longer be reconstructed: no checkpoint at or before it "
            f"and commit 0 was cleaned up"
        )
    _require_commits(listing, 0, target)
    return ReplayState(), -1


def _replay(store: LogStore, listing: LogListing, target: int, with_removes: bool) -> tuple[ReplayState, int]:
    state, start = _initial_state(store, listing, target, with_removes)
    paths = [listing.commits[version].path for version in range(start + 1, target + 1)]
    for path, data in zip(paths, read_many(store, paths)):  # parallel GETs on an object store
        state.apply_commit(parse_actions(data, path))
    return state, start


def _sorted_tombstones(tombstones: Mapping[str, bytes]) -> tuple[RemoveFile, ...]:
    """The replay's tombstones as actions, sorted by (path, DV unique id)."""
    flat = flat_tombstones(tombstones)
    ordered = [flat[key] for key in sorted(flat)]  # key texts sort as (path, DV id) do
    return tuple(to_remove(row) for row in tombstone_rows(ordered))


def _tombstone_map_at(store: LogStore, listing: LogListing, target: int) -> Mapping[str, bytes]:
    """Full replay including the checkpoint's removes (VACUUM and checkpoint writing only): the
    tombstones as replay keeps them (:mod:`dvengine.log.tombstones`).

    When the cache holds this version, it keeps the complete tombstones from now on and carries
    them forward with each tail, so the next checkpoint does not re-read these removes.
    """
    state, _ = _replay(store, listing, target, with_removes=True)
    entry = snapshot_cache.get(listing.table_root) if snapshot_cache.cache_enabled() else None
    if entry is not None and entry.version == target and not entry.with_tombstones:
        snapshot_cache.remember(
            listing.table_root,
            dataclasses.replace(
                entry, state=snapshot_cache.cacheable_state(state, with_tombstones=True), with_tombstones=True
            ),
        )
    return state.tombstones


def replayed_tombstones(snapshot: Snapshot) -> Mapping[str, bytes]:
    """Every tombstone of ``snapshot`` (key text -> bytes), from a listing-based replay of its
    version with the checkpoint's removes; for the checkpoint writer, which needs no
    ``RemoveFile`` objects (building and sorting them cost more than the replay at 24,000)."""
    store = storage_for(snapshot.table_root)
    return _tombstone_map_at(store, list_log(store, snapshot.table_root), snapshot.version)


def _build_snapshot(
    store: LogStore,
    table_root: str,
    target: int,
    state: ReplayState,
    timestamp_ms: int,
    with_tombstones: bool = False,
    files: tuple[AddFile, ...] | None = None,
) -> Snapshot:
    """Check a replayed state and freeze it; tombstones come from ``state`` when it holds them all,
    else from a fresh listing-based replay on demand. ``files``: ``state.files`` already in
    snapshot order (a cached snapshot moved forward edits its predecessor's order: file_order)."""
    if state.protocol is None:
        raise ProtocolError(f"the log of {table_root} up to version {target} has no protocol action")
    if state.metadata is None:
        raise ProtocolError(f"the log of {table_root} up to version {target} has no metaData action")
    check_readable(state.protocol)
    if TYPE_CHANGES_KEY in state.metadata.schema_string:  # a widened table: every recorded change must be readable
        check_type_changes_readable(parse_schema(state.metadata.schema_string))
    column_mapping_mode(state.metadata)
    return Snapshot(
        table_root=table_root,
        version=target,
        protocol=state.protocol,
        metadata=state.metadata,
        files=sorted_files(state.files.values()) if files is None else files,
        load_tombstones=(
            (lambda: _sorted_tombstones(state.tombstones))
            if with_tombstones
            else (lambda: _sorted_tombstones(_tombstone_map_at(store, list_log(store, table_root), target)))
        ),
        app_transactions=live_app_transactions(state.txns, state.metadata.configuration),
        domain_metadata=dict(state.domains),
        timestamp_ms=timestamp_ms,
    )


def _snapshot_at(store: LogStore, listing: LogListing, target: int, verified_at: float | None = None) -> Snapshot:
    """The snapshot at ``target``, cached when newer than the cached one; ``verified_at``: the
    listing was of the latest version, sent at that monotonic time (see CachedTable.verified_at)."""
    if listing.checkpoints:
        snapshot_cache.note_checkpoint(listing.table_root, max(cp.version for cp in listing.checkpoints))
    state, start = _replay(store, listing, target, with_removes=False)
    if start < target:
        timestamp = commit_info_timestamp(state.last_commit_info, listing.commits[target].modification_time_ms)
    else:
        found = _version_timestamp(store, listing, target)
        timestamp = 0 if found is None else found
    snapshot = _build_snapshot(store, listing.table_root, target, state, timestamp)
    if snapshot_cache.cache_enabled() and target in listing.commits:
        entry = snapshot_cache.get(listing.table_root)
        if entry is None or entry.version < target:
            info = listing.commits[target]
            # an e-tag identifies the commit without reading it back (a round trip on a store)
            commit_digest = b"" if info.e_tag is not None else snapshot_cache.digest(store.read_bytes(info.path))
            cached_state = snapshot_cache.cacheable_state(state)
            cached_state.tombstones.clear()
            if entry is not None:
                announce_retired(retired_between(listing.table_root, entry.state, cached_state))
            snapshot_cache.remember(
                listing.table_root,
                snapshot_cache.CachedTable(
                    snapshot,
                    cached_state,
                    commit_digest,
                    commit_etag=info.e_tag,
                    store=store,
                    verified_at=verified_at if target == listing.latest_version else None,
                ),
            )
    return snapshot


def _read_if_exists(store: LogStore, path: str) -> bytes | None:
    try:
        return store.read_bytes(path)
    except FileNotFoundError:
        return None


def _with_live_transactions(snapshot: Snapshot, state: ReplayState) -> Snapshot:
    """``snapshot`` as of now: txn watermarks expire with time (delta.setTransactionRetentionDuration),
    so a cached snapshot handed out again must not keep one that has expired since it was built."""
    if not state.txns or snapshot.metadata.configuration.get(TXN_RETENTION_PROPERTY) is None:
        return snapshot
    live = live_app_transactions(state.txns, snapshot.metadata.configuration)
    if live.keys() == snapshot.app_transactions.keys():
        return snapshot
    return dataclasses.replace(snapshot, app_transactions=live)


def _from_cache(
    store: LogStore, table_root: str, version: int | None, verified_at: float | None = None
) -> Snapshot | None:
    """The snapshot at ``version`` (latest when None) from the cached state plus the log tail,
    or None when only the listing-based load can answer exactly (see snapshot_cache).
    ``verified_at``: when this load started (a latest-version load proves there is nothing newer)."""
    entry = snapshot_cache.get(table_root)
    if entry is None or (version is not None and version < entry.version):
        return None
    if version is not None:
        verified_at = None
    if _lists_tail(store):
        return _from_cache_listed(store, table_root, version, entry, verified_at)
    log_path = log_dir(table_root)
    current = _read_if_exists(store, f"{log_path}/{commit_file_name(entry.version)}")
    if current is None or snapshot_cache.digest(current) != entry.commit_digest:
        snapshot_cache.forget(table_root, entry)  # log cleaned up, or a different table at this path
        return None
    tail: list[list[Action]] = []
    tail_data: bytes | None = None
    next_version = entry.version + 1
    while version is None or next_version <= version:
        if len(tail) >= snapshot_cache.MAX_TAIL:
            return None
        path = f"{log_path}/{commit_file_name(next_version)}"
        data = _read_if_exists(store, path)
        if data is None:
            break
        tail.append(parse_actions(data, path))
        tail_data = data
        next_version += 1
    reached = next_version - 1
    if version is not None and reached != version:
        return None  # the version does not exist (yet): the listing-based load says why
    if tail_data is None:
        _refreshed(table_root, entry, store, verified_at)
        return _with_live_transactions(entry.snapshot, entry.state)
    return _advanced(store, table_root, entry, tail, snapshot_cache.digest(tail_data), None, verified_at)


def _refreshed(table_root: str, entry: snapshot_cache.CachedTable, store: LogStore, verified_at: float | None) -> None:
    """Keep ``entry``, now checked by ``store`` (these credentials may skip the next existence check)
    and, with ``verified_at``, shown to be the latest version at that time."""
    if entry.store is store and (verified_at is None or (entry.verified_at or 0.0) >= verified_at):
        return
    snapshot_cache.remember(
        table_root, dataclasses.replace(entry, store=store, verified_at=verified_at or entry.verified_at)
    )


def _lists_tail(store: LogStore) -> bool:
    """Does a cached snapshot's tail come from one listing (object stores: a request per file read
    would cost more) or from reading ``<v+1>.json``, ``<v+2>.json`` ... in turn (local files)?"""
    return not getattr(store, "is_local", True)


def _listed_commits(store: LogStore, table_root: str, first: int) -> dict[int, FileInfo]:
    """Commit files of version ``first`` and later, from one LIST starting at ``first`` (not at 0)."""
    commits: dict[int, FileInfo] = {}
    for info in log_files_from(store, table_root, first):
        name = parse_log_file_name(info.path)
        if name is not None and name.kind is LogFileKind.COMMIT:
            commits[name.version] = info
    return commits


def _is_cached_commit(store: LogStore, entry: snapshot_cache.CachedTable, listed: FileInfo | None) -> bool:
    """Is ``listed`` still the commit file the entry was built from (same e-tag, else same bytes)?"""
    if listed is None:
        return False
    if entry.commit_etag is not None and listed.e_tag is not None:
        return entry.commit_etag == listed.e_tag
    data = _read_if_exists(store, listed.path)
    return data is not None and snapshot_cache.digest(data) == entry.commit_digest


def _from_cache_listed(
    store: LogStore,
    table_root: str,
    version: int | None,
    entry: snapshot_cache.CachedTable,
    verified_at: float | None = None,
) -> Snapshot | None:
    """``_from_cache`` on an object store: one LIST of the log from the cached version on both checks
    the cached commit (its e-tag) and finds the tail, whose commits are then read in parallel; the
    commit this process just wrote is not read back. Nothing new costs one request, not two GETs."""
    commits = _listed_commits(store, table_root, entry.version)
    if not _is_cached_commit(store, entry, commits.get(entry.version)):
        snapshot_cache.forget(table_root, entry)  # log cleaned up, or a different table at this path
        return None
    reached = entry.version
    while (reached + 1) in commits and (version is None or reached < version):
        reached += 1  # put-if-absent commits appear in order: the first gap ends the tail
    if reached - entry.version > snapshot_cache.MAX_TAIL:
        return None
    if version is not None and reached != version:
        return None  # the version does not exist (yet): the listing-based load says why
    if reached == entry.version:
        _refreshed(table_root, entry, store, verified_at)
        return _with_live_transactions(entry.snapshot, entry.state)
    infos = [commits[v] for v in range(entry.version + 1, reached + 1)]
    known = {i.path: snapshot_cache.known_commit(table_root, v, i.e_tag) for v, i in zip(range(entry.version + 1, reached + 1), infos)}
    missing = [i.path for i in infos if known[i.path] is None]
    fetched = dict(zip(missing, read_many(store, missing)))  # parallel GETs
    datas = [known[i.path] or fetched[i.path] for i in infos]
    tail = [parse_actions(data, info.path) for data, info in zip(datas, infos)]
    return _advanced(store, table_root, entry, tail, snapshot_cache.digest(datas[-1]), infos[-1].e_tag, verified_at)


def _advanced(
    store: LogStore,
    table_root: str,
    entry: snapshot_cache.CachedTable,
    tail: list[list[Action]],
    tail_digest: bytes,
    tail_etag: str | None,
    verified_at: float | None,
) -> Snapshot | None:
    """The entry moved forward by ``tail`` (non-empty), remembered; None when only the listing
    knows the new version's timestamp."""
    state = snapshot_cache.advanced_state(entry, tail)
    info = state.last_commit_info
    timestamp = None if info is None else commit_info_timestamp(info, -1)
    if timestamp is None or timestamp < 0:
        return None  # only the file's modification time would do: the listing has it
    reached = entry.version + len(tail)
    files = advanced_files(entry.snapshot.files, tail, state.files)
    snapshot = _build_snapshot(store, table_root, reached, state, timestamp, entry.with_tombstones, files)
    snapshot_cache.remember(
        table_root,
        snapshot_cache.CachedTable(snapshot, state, tail_digest, entry.with_tombstones, tail_etag, store, verified_at),
    )
    announce_retired(retired_by_tail(table_root, entry.state, tail, state))  # the caches forget those files
    return snapshot


# A commit larger than this is not parsed again just to move the cache (a large MERGE or write
# whose process may never load the table again); the next load reads it as before.
ADVANCE_MAX_COMMIT_BYTES = 64 * 1024


def advance_by_commit(
    table_root: str, read_version: int, winners: Sequence[tuple[int, Sequence[Action]]], store: LogStore
) -> bool:
    """Move this process's cached snapshot from ``read_version`` to the version it has just
    committed: by ``winners`` (the commits the transaction caught up with, parsed already, in
    order) and its own commit's bytes (snapshot_cache.last_own_commit). True when it moved.

    Without this the next load read every winner again from the log and parsed it a second time
    (a writer of a hot table catches up with ~W-1 winners per operation), and re-read its own
    commit. The state is the one that load would build: the same replay of the same immutable
    commit files (put-if-absent), which the catch-up read from this log. Only an entry at
    ``read_version`` built by the same storage client moves; anything else (another thread moved
    it, the cache is off, the commit is large) leaves the cache to the next load.

    Shown-latest time: with no winners, the put-if-absent's send time, as ``blind_snapshot``'s own
    advance takes it. After a lost race none: another writer is active, so the next DML lists
    (what it did before this function existed), now reading only commits newer than ours.
    """
    root = table_root  # a transaction's root, normalized already (realpath costs a syscall per part)
    entry = snapshot_cache.get(root)
    own = snapshot_cache.last_own_commit(root)
    if entry is None or own is None or entry.version != read_version or entry.store is not store:
        return False
    if own.version != read_version + len(winners) + 1 or len(own.data) > ADVANCE_MAX_COMMIT_BYTES:
        return False
    if [v for v, _ in winners] != list(range(read_version + 1, own.version)):
        return False
    tail = [list(actions) for _, actions in winners]
    return _advanced_by_own(store, root, entry, tail, own, own.sent_at if not winners else None) is not None


def _advanced_by_own(
    store: LogStore,
    root: str,
    entry: snapshot_cache.CachedTable,
    before: list[list[Action]],
    own: snapshot_cache.OwnCommit,
    verified_at: float | None,
) -> Snapshot | None:
    """``entry`` moved by the commits ``before`` (parsed already) and then this process's own
    commit, whose bytes give the new entry its digest and e-tag (:func:`_advanced`)."""
    path = f"{log_dir(root)}/{commit_file_name(own.version)}"
    tail = [*before, parse_actions(own.data, path)]
    return _advanced(store, root, entry, tail, snapshot_cache.digest(own.data), own.e_tag, verified_at)


def _latest_from_hint(store: LogStore, table_root: str, verified_at: float) -> Snapshot | None:
    """The latest snapshot of a local table read from ``_last_checkpoint`` on, without listing it all.

    A cold load of a long log was dominated by listing it (stat and name parse of ~11,000 files
    after 10,000 commits: 170 of 210 ms). The hint is checked, not trusted: the checkpoint it
    names must exist completely, then the commits after it are probed by stat
    (``probe_log_from``); when that cannot settle it (no commit after the hint, a V2 checkpoint)
    only the files named from the hint's version on are listed (``list_log_from``), which also
    sees newer checkpoints and any gap. Whatever this path cannot settle (no or bad hint, an
    unreadable checkpoint) returns None and the full listing decides, as before.
    """
    if not getattr(store, "is_local", True):
        return None
    hint = read_last_checkpoint(store, log_dir(table_root))
    if hint is None or hint.version < 0:
        return None
    listing = probe_log_from(store, table_root, hint.version, hint.parts) or list_log_from(
        store, table_root, hint.version
    )
    if listing is None or not any(cp.version == hint.version for cp in listing.checkpoints):
        return None
    try:
        return _snapshot_at(store, listing, listing.latest_version, verified_at)
    except (LogCorruptedError, VersionNotFoundError, ProtocolError) as exc:
        _LOG.info("loading %s from its _last_checkpoint failed (%s); listing the whole log", table_root, exc)
        return None


# --- public API -------------------------------------------------------------------------------


def load_snapshot(
    table_root: str,
    version: int | None = None,
    timestamp: TimestampArg | None = None,
    store: LogStore | None = None,
) -> Snapshot:
    """The table at ``version``, as of ``timestamp``, or latest when both are None."""
    if version is not None and timestamp is not None:
        raise InvalidArgumentError("pass either version or timestamp, not both")
    started = time.monotonic()  # before any request: what a latest-version load proves holds from here
    root = normalize_table_path(table_root)
    st = _store(store, root)
    if timestamp is None and snapshot_cache.cache_enabled() and (version is None or _is_version(version)):
        cached = _from_cache(st, root, version, started)
        if cached is not None:
            return cached
    if version is None and timestamp is None:
        hinted = _latest_from_hint(st, root, started)
        if hinted is not None:
            return hinted
    listing = list_log(st, root)
    if timestamp is not None:
        target = _version_at_timestamp(st, listing, to_epoch_ms(timestamp))
    elif version is not None:
        target = _check_version(listing, version)
    else:
        target = listing.latest_version
    _check_hint(st, listing)
    return _snapshot_at(st, listing, target, started if version is None and timestamp is None else None)


# delta.logRetentionDuration's default (cleanup.DEFAULT_LOG_RETENTION), in ms.
_DEFAULT_LOG_RETENTION_MS = 30 * 24 * 3600 * 1000


def blind_commit_window_s(configuration: Mapping[str, str], max_staleness_s: float) -> float:
    """How old (seconds) a cached snapshot may be for a DML to commit on it without listing.

    At most ``max_staleness_s`` (dvengine.snapshot.maxStalenessSeconds) and at most half the
    table's ``delta.logRetentionDuration``: log cleanup deletes a commit only once it is older than
    the retention (and a newer checkpoint exists), so every commit made after our snapshot was
    shown to be the latest is still there while we are inside the window, and put-if-absent of the
    next version is refused by it. A retention dvengine cannot parse allows no blind commit.
    """
    if max_staleness_s <= 0:
        return 0.0
    raw = configuration.get("delta.logRetentionDuration")
    try:
        retention_ms = _DEFAULT_LOG_RETENTION_MS if raw is None else parse_interval_ms(raw)
    except InvalidArgumentError:
        return 0.0  # cleanup refuses it too; no window can be bounded by it
    return min(max_staleness_s, retention_ms / 2000.0)


def blind_snapshot(table_root: str, max_staleness_s: float, store: LogStore | None = None) -> Snapshot | None:
    """A snapshot a DML may plan on without listing the log (a "blind" commit), or None: list.

    This process's cached snapshot of the table, not listed now, because a listing, a tail
    read, or this process's own put-if-absent showed it to be the latest version less than
    ``blind_commit_window_s`` ago. The command then commits ``version + 1`` by put-if-absent: if
    that succeeds, no commit landed between that proof and the commit, so the command saw exactly
    what a listing at its start would have shown; if the version is taken, the command must not
    rebase onto the winner but re-plan on a listed snapshot (Transaction.blind, the commands'
    ``replanning``), since the winner may have finished before the command started.
    None (no fresh entry, window 0, cache off, another storage client, an entry older than a
    checkpoint this process knows, a blind loss on this table within the window): the caller
    lists. Reads never come here: they always list.
    """
    if max_staleness_s <= 0 or not snapshot_cache.cache_enabled():
        return None
    root = normalize_table_path(table_root)
    return _fresh_cached(_store(store, root), root, max_staleness_s)


def _fresh_cached(store: LogStore, root: str, max_staleness_s: float) -> Snapshot | None:
    entry = snapshot_cache.get(root)
    if entry is None or entry.store is not store or entry.verified_at is None:
        return None
    own = snapshot_cache.last_own_commit(root)
    if own is not None and own.version > entry.version:
        if own.version > entry.version + 1 or own.sent_at < entry.verified_at:
            return None  # the table moved past the entry (this process committed after a lost race): list
        # This process wrote the next version after the entry was shown latest: move it forward by
        # those bytes (its put-if-absent succeeding shows it was the latest when sent).
        if _advanced_by_own(store, root, entry, [], own, own.sent_at) is None:
            return None
        entry = snapshot_cache.get(root)
        if entry is None or entry.version != own.version or entry.verified_at is None:
            return None
    now, verified_at = time.monotonic(), entry.verified_at
    window = blind_commit_window_s(entry.snapshot.metadata.configuration, max_staleness_s)
    if verified_at is None or now - verified_at > window:
        return None
    lost = snapshot_cache.last_blind_loss(root)
    if lost is not None and now - lost <= window:
        return None  # another writer is active here: list, do not plan on a stale snapshot twice
    if entry.version < snapshot_cache.known_checkpoint(root):
        return None  # commits after it may have been cleaned up: only a listing is safe
    return _with_live_transactions(entry.snapshot, entry.state)


def latest_version(table_root: str, store: LogStore | None = None) -> int:
    """Latest committed version; TableNotFoundError if ``table_root`` is not a Delta table."""
    root = normalize_table_path(table_root)
    return list_log(_store(store, root), root).latest_version


def table_exists(table_root: str, cached: bool = False) -> bool:
    """True when ``table_root`` has a ``_delta_log`` with at least one commit or checkpoint.

    Every ``DeltaTable.forPath`` and append asks this; listing the log to answer made each open
    cost O(commits) (35 ms after 2,000 rounds of a stream, half a round). A cached snapshot whose
    commit file is still there, unchanged, answers it with one small read instead (one LIST on a
    store). ``cached=True``, for an open whose operations load the snapshot before doing anything
    (``forPath``: that load finds a table deleted since and raises TableNotFoundError before
    anything is written): on a store, a snapshot cached by the same storage client (same store,
    same credentials) answers with no request at all, and without one the snapshot is loaded and
    cached here, so the log is listed in full once and the operation lists only its tail.
    """
    from dvengine.errors import TableNotFoundError

    root = normalize_table_path(table_root)
    store = storage_for(root)
    entry = snapshot_cache.get(root) if snapshot_cache.cache_enabled() else None
    if cached and entry is not None and entry.store is store:
        return True
    if cached and _lists_tail(store) and snapshot_cache.cache_enabled():
        # Load (and cache) the snapshot the operation is about to need, instead of a listing that
        # only says yes: the operation's own load then lists only the log after this version.
        try:
            load_snapshot(root, store=store)
        except TableNotFoundError:
            return False
        return True
    if entry is not None:
        if _lists_tail(store):
            listed = _listed_commits(store, root, entry.version).get(entry.version)
        else:
            listed = FileInfo(f"{log_dir(root)}/{commit_file_name(entry.version)}", 0, 0)
        if _is_cached_commit(store, entry, listed):
            return True
    try:
        list_log(store, root)
    except TableNotFoundError:
        return False
    return True


def find_table_root(path: str) -> str | None:
    """The table root at or above ``path``, as delta-spark's ``DeltaTableUtils.findDeltaTableRoot``.

    Walks up from ``path`` (an absolute local path; it need not exist) to the first folder holding
    a ``_delta_log``, stopping at a folder named ``_delta_log`` or ``_samples``; None when there is none.
    """
    store = storage_for(path)
    current = path.rstrip("/") or "/"
    while True:
        name = current.rsplit("/", 1)[-1]
        if name in ("_delta_log", "_samples"):
            return None
        if store.exists(log_dir(current)):
            return current
        parent = current.rsplit("/", 1)[0] or "/"
        if parent == current:
            return None
        current = parent


def read_commit_actions(table_root: str, version: int, store: LogStore | None = None) -> list[Action]:
    """The actions of one commit file, in file order."""
    root = normalize_table_path(table_root)
    st = _store(store, root)
    path = f"{log_dir(root)}/{commit_file_name(version)}" if version >= 0 else ""
    if not path or not st.exists(path):
        listing = list_log(st, root)  # TableNotFoundError when there is no table at all
        raise VersionNotFoundError(
            f"commit {version} of {root} does not exist (latest version is {listing.latest_version}, "
            f"earliest commit file is {min(listing.commits) if listing.commits else 'none'})"
        )
    return parse_actions(st.read_bytes(path), path)


def commit_infos(table_root: str, limit: int | None = None) -> list[tuple[int, CommitInfo]]:
    """(version, commitInfo) for available commits, newest first.

    A commit without a commitInfo action (allowed by the protocol) gets a synthetic one holding
    only its file time, so that history lists every version.
    """
    root = normalize_table_path(table_root)
    st = storage_for(root)
    listing = list_log(st, root)
    versions = sorted(listing.commits, reverse=True)
    if limit is not None:
        versions = versions[: max(limit, 0)]
    out: list[tuple[int, CommitInfo]] = []
    for version in versions:
        info = listing.commits[version]
        found = find_commit_info(st.read_bytes(info.path), info.path)
        out.append((version, found if found is not None else CommitInfo({"timestamp": info.modification_time_ms})))
    return out


def commit_timestamp(table_root: str, version: int) -> int:
    """Commit time of ``version`` in epoch ms (inCommitTimestamp, commitInfo.timestamp, or file time)."""
    root = normalize_table_path(table_root)
    st = storage_for(root)
    listing = list_log(st, root)
    found = _version_timestamp(st, listing, version) if version >= 0 else None
    if found is None:
        raise VersionNotFoundError(
            f"version {version} of {listing.table_root} has no commit or checkpoint file "
            f"(latest version is {listing.latest_version})"
        )
    return found
