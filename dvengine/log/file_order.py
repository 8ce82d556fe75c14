"""The order of ``Snapshot.files`` (path, then DV unique id), kept up to date without re-sorting.

Every snapshot lists its files sorted, so that equal states give equal snapshots and readers
and planners see a stable order. Sorting the whole list on every load made a cached snapshot's
advance by one commit cost O(n log n) Python key calls: 5-8 ms of a 21-24 ms single-row DML on a
table of 10,000 files (16 ms with the edits below), paid by every single-row DML (its blind path
moves the cached snapshot forward by its own commit).
A commit changes a handful of files, so the next order is the previous one with those entries
taken out and the new ones put in by binary search: O(changes * log n) comparisons plus a
memmove of the list (benchmarks/results/many-files/).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence

from dvengine.protocol.actions import Action, AddFile, RemoveFile

FileKey = tuple[str, str | None]

# Past this share of changed files a full sort is as cheap as the edits (each edit moves the list).
_EDIT_SHARE = 8


def file_order(add: AddFile) -> tuple[str, str]:
    """The sort key of a file in ``Snapshot.files`` (no DV sorts first: a unique id is never "")."""
    dv = add.deletion_vector
    return (add.path, "" if dv is None else dv.unique_id)


def _order_of_key(key: FileKey) -> tuple[str, str]:
    return (key[0], key[1] or "")


def sorted_files(files: Iterable[AddFile]) -> tuple[AddFile, ...]:
    return tuple(sorted(files, key=file_order))


def advanced_files(
    previous: Sequence[AddFile], tail: Sequence[Sequence[Action]], files: Mapping[FileKey, AddFile]
) -> tuple[AddFile, ...]:
    """``sorted_files(files.values())``, where ``files`` is the state ``previous`` (sorted, as
    ``Snapshot.files``) reached by applying the commits of ``tail``."""
    touched: dict[FileKey, None] = {}
    for actions in tail:
        for action in actions:
            if isinstance(action, (AddFile, RemoveFile)):
                touched[action.key] = None
    if len(touched) * _EDIT_SHARE > len(previous):
        return sorted_files(files.values())
    result = list(previous)
    gone: list[int] = []
    for key in touched:
        order = _order_of_key(key)
        at = bisect.bisect_left(result, order, key=file_order)
        if at < len(result) and file_order(result[at]) == order:
            gone.append(at)
    for at in sorted(gone, reverse=True):
        del result[at]
    for key in touched:
        add = files.get(key)
        if add is not None:
            bisect.insort(result, add, key=file_order)
    return tuple(result)
