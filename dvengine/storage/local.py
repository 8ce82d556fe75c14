"""The local (or mounted POSIX) backend: today's behaviour, unchanged.

Delta's correctness under concurrency rests on creating a commit file only if no file of that
name exists, atomically. On a local filesystem ``os.link`` of a fully written temporary file
gives exactly that: the link fails with EEXIST if the target exists, and readers never see a
partially written commit. Plain paths are handed to pyarrow as paths (memory-mapped reads, no
copies), so going through this layer costs the local executor nothing.
"""

from __future__ import annotations

import contextlib
import os
import uuid

import pyarrow as pa

from dvengine.faults import COMMIT_AFTER_LINK, COMMIT_BEFORE_LINK, fault_point
from dvengine.storage.base import FileAlreadyExists, FileInfo
from dvengine.storage.durable import fsync_dir, write_failed


def _write_hidden_temp(target: str, data: bytes) -> str:
    """Write and fsync ``data`` in a hidden temp file next to ``target`` (so a rename/link is atomic
    and names complete content after a power loss too); return its path.

    Hidden names (leading dot) are ignored by log listing and by VACUUM's candidate scan. A failed
    write or fsync removes the temp file and raises :class:`StorageWriteError` naming ``target``.
    """
    directory = os.path.dirname(target)
    tmp = os.path.join(directory, f".{os.path.basename(target)}.{uuid.uuid4().hex}.tmp")
    try:
        os.makedirs(directory, exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise write_failed("write and fsync", target, exc) from exc
        raise
    return tmp


def _replace_with(path: str, data: bytes) -> None:
    """Put ``data`` at ``path`` by a synced temp file and a rename over it; a failed rename removes
    the temp file and raises :class:`StorageWriteError` naming ``path``."""
    tmp = _write_hidden_temp(path, data)
    try:
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise write_failed(f"rename {tmp} to", path, exc) from exc


class LocalStorage:
    """Storage for a local or mounted POSIX filesystem."""

    is_local = True

    def list_dir(self, directory: str) -> list[FileInfo]:
        return self.list_dir_after(directory, "")

    def list_dir_after(self, directory: str, after_name: str) -> list[FileInfo]:
        """Files of ``directory`` whose name sorts after ``after_name``, sorted by path (base.LogStore);
        only those are stat'ed."""
        try:
            entries = [e for e in os.scandir(directory) if e.name > after_name]
        except FileNotFoundError:
            return []
        out = []
        for entry in entries:
            if entry.name.startswith("."):
                continue  # other writers' temp files (see _write_hidden_temp): never log files, and they vanish
            try:
                if not entry.is_file():
                    continue
                st = entry.stat()
            except FileNotFoundError:
                continue  # deleted between the listing and the stat (log cleanup, a finished temp file)
            out.append(FileInfo(entry.path, st.st_size, int(st.st_mtime * 1000)))
        out.sort(key=lambda f: f.path)
        return out

    def list_files(self, directory: str, include_hidden: bool = False) -> list[FileInfo]:
        out = []
        for folder, dirs, names in os.walk(directory):
            if not include_hidden:
                dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in names:
                if name.startswith(".") and not include_hidden:
                    continue
                path = os.path.join(folder, name)
                try:
                    st = os.stat(path)
                except FileNotFoundError:
                    continue
                out.append(FileInfo(path, st.st_size, int(st.st_mtime * 1000)))
        out.sort(key=lambda f: f.path)
        return out

    def read_bytes(self, path: str) -> bytes:
        """The whole file, through raw descriptors: a buffered ``open()`` costs ~12 us per small
        file against ~4 here, and a loser of a commit race reads every winner's commit (and its
        next snapshot refresh reads them again), ~7 per op with 8 writers on one table."""
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            chunks = []
            want = max(os.fstat(fd).st_size, 0) + 1  # one more byte: a file that grew is read to its end
            while chunk := os.read(fd, want):
                chunks.append(chunk)
                want = 1 << 20
            return b"".join(chunks)
        finally:
            os.close(fd)

    def read_range(self, path: str, start: int, length: int) -> bytes:
        with open(path, "rb") as fh:
            fh.seek(start)
            return fh.read(length)

    def head(self, path: str) -> FileInfo:
        st = os.stat(path)
        return FileInfo(path, st.st_size, int(st.st_mtime * 1000))

    def put_if_absent(self, path: str, data: bytes) -> None:
        """Create ``path`` by linking a synced temp file (EEXIST = lost race); local files have no e-tag."""
        self.link_staged(self.stage_commit(path, data), path)

    def stage_commit(self, path: str, data: bytes) -> str:
        """Write and fsync the commit ``path`` will hold under a hidden temp name; return that name.

        Split from :meth:`link_staged` so a committer can pay the fsync before it takes the
        host-local commit turn (commit/commit_lock.py): the content is private until linked.
        """
        return _write_hidden_temp(path, data)

    def link_staged(self, staged: str, path: str) -> None:
        """Publish a staged commit: ``os.link`` (atomic, EEXIST = lost race), then drop the temp
        name whatever happened (a lost race's content is stale: it is re-staged, not re-linked)."""
        fault_point(COMMIT_BEFORE_LINK)
        try:
            os.link(staged, path)
        except FileExistsError:
            raise FileAlreadyExists(path) from None
        except OSError as exc:
            raise write_failed(f"link {staged} to", path, exc) from exc
        finally:
            os.unlink(staged)
        fault_point(COMMIT_AFTER_LINK)

    def discard_staged(self, staged: str) -> None:
        """Remove a staged commit that was never linked (no-op once :meth:`link_staged` ran)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)

    def sync_dir(self, directory: str) -> None:
        """fsync a folder, making the names linked or renamed into it durable (a file's own fsync
        covers its content, not its directory entry). See spec_notes/crash-safety.md. A failure
        is a :class:`StorageWriteError` naming the folder."""
        fsync_dir(directory)

    def write(self, path: str, data: bytes) -> None:
        """Overwrite atomically and durably: temp file, fsync, rename (checkpoints, their sidecars,
        ``_last_checkpoint``, ``_last_vacuum_info``). A checkpoint is fsynced before the rename
        that names it, and before ``_last_checkpoint`` (written after it) can name it, so a power
        loss never leaves a hint pointing at an empty checkpoint (spec_notes/crash-safety.md)."""
        _replace_with(path, data)

    def put_new(self, path: str, data: bytes) -> None:
        _replace_with(path, data)

    def put_new_in_background(self, path: str, data: bytes) -> None:
        self.put_new(path, data)  # no round trip to hide

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def delete(self, path: str) -> None:
        os.unlink(path)

    def parquet_source(self, path: str) -> str | pa.NativeFile:
        return path
