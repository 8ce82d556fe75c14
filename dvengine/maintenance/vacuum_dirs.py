"""Which folders VACUUM FULL deletes, as Delta's ``gc`` does, and deleting them.

Delta (``VacuumCommand.gc``, ``includeRespectiveDirectoriesWithFilesAndSafetyCheck``): the listing
gives one row per folder and file (hidden names left out); each file older than the cutoff adds
one row for itself and one for every folder above it (``getAllSubDirectories``); the rows are
grouped by path, the valid paths are taken away (``getValidFilesFromSnapshot``: every live file and
every tombstone younger than the cutoff, each with the folders above it, and their DV files), and
the paths seen exactly once are the diff. So a folder is in the diff when nothing older than the
cutoff lies anywhere under it and it holds no valid file: a folder already empty, or holding only
young files of an uncommitted write, or only hidden files. A folder whose old files this run
deletes is not (its count is above one): it is deleted by the next VACUUM, once empty ("we need two
GCs to guarantee the deletion of the directories", ``DeltaVacuumSuite``).

The diff's folders are in ``numFilesToDelete`` (VACUUM START) and in a DRY RUN's listing; each is
deleted with ``tryDeleteNonRecursive``: a folder that is not empty stays (false), one already gone
counts as deleted (``FileNotFoundException`` -> true), and ``numDeletedFiles`` (VACUUM END) counts
the true ones. Delta deletes the diff in no set order, so nested empty folders may need more runs;
dvengine deletes files first, then folders deepest first, one of the orders Delta may take.

On an object store a folder is a key prefix: it exists only while a visible object lies under it,
and that object is young (an old one would lift the count, a valid one protect the prefix), so
the prefix is in the diff but Hadoop's non-recursive delete of a non-empty "directory" fails:
counted to delete, never deleted, and no request is sent.

LITE lists no folders and reads relative paths from the log, from which Delta's
``getAllSubDirectories`` derives no folder at ordinary depths: LITE deletes no folder.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Iterator

from dvengine.maintenance.vacuum_rules import is_dv_file, relative_to_table
from dvengine.protocol.features import CHANGE_DATA_DIR
from dvengine.storage import is_object_uri


def ancestor_folders(relative: str) -> Iterator[str]:
    """The folders above a ``/``-separated relative path, outermost first (``a/b/f`` -> ``a``, ``a/b``)."""
    parts = relative.split("/")
    for i in range(1, len(parts)):
        yield "/".join(parts[:i])


def _relative(table_root: str, path: str) -> str | None:
    """``relative_to_table``, by slicing when ``path`` starts with the root (the usual case: a
    listing of 100k files took 0.9 s through ``os.path.relpath`` alone)."""
    sep = "/" if is_object_uri(table_root) else os.sep
    prefix = table_root.rstrip(sep) + sep
    if path.startswith(prefix) and ".." not in path:
        relative = path[len(prefix) :]
        return relative.replace(os.sep, "/") if sep != "/" else relative
    return relative_to_table(table_root, path)


def protects_folders(table_root: str, kept: str) -> bool:
    """Whether a file the window keeps makes the folders above it valid, as Delta's valid files do:
    data files (live or tombstoned) yes; DV files (Delta adds no folder for them) and change data
    files (not in the snapshot's state) no, so their age counts as any other file's."""
    relative = _relative(table_root, kept)
    return relative is not None and not is_dv_file(relative) and not relative.startswith(CHANGE_DATA_DIR + "/")


def _valid_folders(table_root: str, kept: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for path in kept:
        relative = _relative(table_root, path)
        if relative is not None and not is_dv_file(relative) and not relative.startswith(CHANGE_DATA_DIR + "/"):
            out.update(ancestor_folders(relative))
    return out


def folders_to_delete(table_root: str, listed: Iterable[str], old_files: Iterable[str], kept: Iterable[str]) -> list[str]:
    """Delta's diff folders (absolute, deepest first): of the ``listed`` folders (absolute), those
    with no file older than the cutoff under them (``old_files``: such visible files the listing
    found, absolute: every one not kept, and the kept ones :func:`protects_folders` says no to) and
    no valid file of the window's (``kept``) under them."""
    counts: Counter[str] = Counter()
    by_relative: dict[str, str] = {}
    for folder in listed:
        relative = _relative(table_root, folder)
        if relative is not None:
            counts[relative] += 1
            by_relative[relative] = folder
    for path in old_files:
        relative = _relative(table_root, path)
        if relative is not None:
            counts.update(ancestor_folders(relative))
    valid = _valid_folders(table_root, kept)
    chosen = [rel for rel, n in counts.items() if n == 1 and rel in by_relative and rel not in valid]
    chosen.sort(key=lambda rel: (-rel.count("/"), rel))
    return [by_relative[rel] for rel in chosen]


def delete_local_folders(folders: Iterable[str]) -> list[str]:
    """Delete each folder if it is empty (in the given order); the ones deleted or already gone.

    Delta's ``tryDeleteNonRecursive``: a folder that is not empty, or any other I/O failure,
    leaves it and is not counted (``IOException`` -> false); a folder already gone is counted."""
    deleted: list[str] = []
    for folder in folders:
        try:
            os.rmdir(folder)
        except FileNotFoundError:
            pass  # counted below, as Delta counts a FileNotFoundException as deleted
        except OSError:
            continue  # not empty (a young or hidden file), or not deletable: stays, not counted
        deleted.append(folder)
    return deleted
