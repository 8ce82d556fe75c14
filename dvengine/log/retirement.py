"""Which files a newer cached state no longer has: what the caches may forget (``retired_files``).

A logical file is (path, DV id). When a commit replaces a file's DV, the logical file (path, old
DV) is retired but its data file stays live, so only the old DV and, when it differs, the old
stats string go; when compaction or a copy-on-write rewrite removes a file for good, its path goes
too. Computed from the commits applied (``retired_by_tail``: the work is proportional to the
commits' actions, not to the table's files) or, when the cache jumped by a full replay, from the
two states (``retired_between``: proportional to the files, which that replay already paid).
"""

from __future__ import annotations

from collections.abc import Sequence

from dvengine.log.replay import FileKey, ReplayState
from dvengine.protocol.actions import Action, AddFile, RemoveFile
from dvengine.storage.logstore import resolve_data_path
from dvengine.storage.retired_files import RetiredFiles


def _retired(table_root: str, gone: Sequence[AddFile], still_live: Sequence[AddFile]) -> RetiredFiles:
    """``gone``: logical files of the old state that the new one lacks; ``still_live``: the live
    files sharing a path with one of them or that could share its stats (those it must keep)."""
    live_paths = {add.path for add in still_live}
    live_stats = {add.stats for add in still_live}
    live_dvs = {add.deletion_vector.unique_id for add in still_live if add.deletion_vector is not None}
    paths = {resolve_data_path(table_root, add.path) for add in gone if add.path not in live_paths}
    dv_ids = {
        add.deletion_vector.unique_id
        for add in gone
        if add.deletion_vector is not None and add.deletion_vector.unique_id not in live_dvs
    }
    stats = {add.stats for add in gone if add.stats is not None and add.stats not in live_stats}
    return RetiredFiles(table_root, frozenset(paths), frozenset(dv_ids), frozenset(stats))


def retired_by_tail(
    table_root: str, before: ReplayState, tail: Sequence[Sequence[Action]], after: ReplayState
) -> RetiredFiles:
    """What ``tail`` (applied to ``before``, giving ``after``) retired."""
    added: dict[FileKey, AddFile] = {}
    removed: list[FileKey] = []
    for actions in tail:
        for action in actions:
            if isinstance(action, AddFile):
                added[action.key] = action
            elif isinstance(action, RemoveFile):
                removed.append(action.key)
    gone: list[AddFile] = []
    for key in removed:
        if key in after.files:
            continue  # removed and added again: still live
        old = before.files.get(key) or added.get(key)
        if old is not None:
            gone.append(old)
    still_live = [add for key, add in added.items() if key in after.files]
    return _retired(table_root, gone, still_live)


def retired_between(table_root: str, before: ReplayState, after: ReplayState) -> RetiredFiles:
    """What ``before`` had that ``after`` lacks (two states of one table, any distance apart)."""
    gone = [add for key, add in before.files.items() if key not in after.files]
    if not gone:
        return RetiredFiles(table_root, frozenset(), frozenset(), frozenset())
    return _retired(table_root, gone, list(after.files.values()))
