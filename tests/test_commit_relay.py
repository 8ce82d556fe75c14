"""The host-local commit relay (dvengine/storage/commit_relay.py): one writer's commit bytes, left for
the others on the host, are used only under the e-tag a listing shows, only from a folder private to
the user, and only while they fit an MD5 e-tag; truth is the store's own listing and objects."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dvengine.storage import commit_relay

KEY = "s3://relay-test-bucket/table"  # no options registered for it: the environment names the endpoint


@pytest.fixture(autouse=True)
def private_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    root = tmp_path / "relay"
    root.mkdir(mode=0o700)
    monkeypatch.setattr(commit_relay, "_private_root", lambda: str(root))
    yield root


def _md5_tag(data: bytes) -> str:
    return f'"{hashlib.md5(data).hexdigest()}"'


def test_bytes_are_found_under_their_version_and_e_tag_only() -> None:
    data = b'{"commitInfo":{}}\n'
    commit_relay.publish(KEY, 7, _md5_tag(data), data)
    assert commit_relay.lookup(KEY, 7, _md5_tag(data)) == data
    assert commit_relay.lookup(KEY, 7, _md5_tag(b"other bytes")) is None  # another object at that name
    assert commit_relay.lookup(KEY, 8, _md5_tag(data)) is None
    assert commit_relay.lookup("s3://relay-test-bucket/other", 7, _md5_tag(data)) is None
    assert commit_relay.lookup(KEY, 7, None) is None
    assert commit_relay.lookup("/a/local/table", 7, _md5_tag(data)) is None  # local tables are never relayed


def test_another_endpoint_is_another_table(monkeypatch: pytest.MonkeyPatch) -> None:
    data = b"seven"
    commit_relay.publish(KEY, 7, _md5_tag(data), data)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:2")  # another server's bucket of the same name
    assert commit_relay.lookup(KEY, 7, _md5_tag(data)) is None


def test_bytes_that_do_not_fit_an_md5_e_tag_are_neither_left_nor_used(private_root: Path) -> None:
    data = b"the commit"
    commit_relay.publish(KEY, 1, _md5_tag(b"something else"), data)
    assert not any(private_root.rglob("0*"))  # nothing written
    commit_relay.publish(KEY, 2, _md5_tag(data), data)
    (written,) = private_root.rglob("00000000000000000002-*")
    written.write_bytes(b"tampered")
    assert commit_relay.lookup(KEY, 2, _md5_tag(data)) is None


def test_other_e_tags_are_trusted_from_the_private_folder_and_large_commits_skipped() -> None:
    commit_relay.publish(KEY, 3, '"opaque-tag-3"', b"three")
    assert commit_relay.lookup(KEY, 3, '"opaque-tag-3"') == b"three"
    big = b"x" * (commit_relay.MAX_BYTES + 1)
    commit_relay.publish(KEY, 4, _md5_tag(big), big)
    assert commit_relay.lookup(KEY, 4, _md5_tag(big)) is None


def test_old_versions_are_pruned() -> None:
    for v in range(1, 3 * commit_relay.KEEP_VERSIONS):
        commit_relay.publish(KEY, v, f'"t{v}"', b"v")
    newest = 3 * commit_relay.KEEP_VERSIONS - 1
    assert commit_relay.lookup(KEY, 1, '"t1"') is None
    assert commit_relay.lookup(KEY, newest, f'"t{newest}"') == b"v"
    folder = commit_relay._table_folder(KEY, create=False)
    assert folder is not None and len(os.listdir(folder)) <= commit_relay.KEEP_VERSIONS + commit_relay._PRUNE_EVERY


def test_a_folder_others_can_write_to_is_never_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real root check: a relay folder open to other users (someone could plant commit bytes)
    is refused, so nothing is read from it or written to it."""
    monkeypatch.undo()  # the real _private_root, with tempfile pointed at a folder of this test
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    commit_relay._private_root.cache_clear()
    try:
        root = commit_relay._private_root()
        assert root is not None and (os.stat(root).st_mode & 0o777) == 0o700
        os.chmod(root, 0o777)
        commit_relay._private_root.cache_clear()
        assert commit_relay._private_root() is None
        commit_relay.publish(KEY, 5, '"tag"', b"five")
        assert commit_relay.lookup(KEY, 5, '"tag"') is None
        assert os.listdir(root) == []
    finally:
        commit_relay._private_root.cache_clear()


def test_folders_of_tables_idle_for_a_day_are_removed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "idle").mkdir(parents=True)
    (root / "idle" / "00000000000000000001-x").write_bytes(b"old")
    (root / "busy").mkdir()
    old = os.stat(root / "idle").st_mtime - 2 * commit_relay.IDLE_TABLE_S
    os.utime(root / "idle", (old, old))
    commit_relay._remove_idle_tables(str(root), os.stat(root / "busy").st_mtime - commit_relay.IDLE_TABLE_S)
    assert sorted(os.listdir(root)) == ["busy"]


def test_commits_of_local_tables_are_not_relayed(private_root: Path) -> None:
    data = b"local"
    commit_relay.publish("/a/local/table", 1, _md5_tag(data), data)
    assert list(private_root.iterdir()) == []
