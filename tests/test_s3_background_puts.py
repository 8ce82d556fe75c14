"""The data file's PUT runs while the command builds its commit (storage/pending.py): what must
still hold on the local S3 server (moto on 127.0.0.1).

- The commit is never sent before the data file it names has landed, and a data PUT that fails
  while the commit is being built raises its typed error from the commit's wait: no commit, and
  nothing left in the bucket (not even a file whose PUT landed but whose answer was lost).
- A command that fails for another reason while its PUT is in flight deletes the file only after
  the PUT is done, so the PUT cannot land after the clean-up's delete.
Each case then runs an UPDATE that succeeds, and dvengine and delta-rs read the model's rows.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import obstore
import pyarrow as pa
import pytest
from interop import sort_rows
from obstore.exceptions import GenericError
from s3_support import S3Server, no_ambient_credentials, rows_delta_rs_s3, s3_server  # noqa: F401

import dvengine
from dvengine import DeltaTable
from dvengine.commit.transaction import Transaction
from dvengine.errors import StorageUnreachableError
from dvengine.storage import pending

COLUMNS = ["id", "val"]
Row = tuple[Any, ...]
SLOW_PUT_S = 0.3  # far longer than building a point UPDATE's commit (~1 ms)


def _arrow(rows: list[Row]) -> pa.Table:
    return pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "val": pa.array([r[1] for r in rows], pa.int64())})


def _dvengine_rows(uri: str, options: dict[str, str]) -> list[Row]:
    table = DeltaTable.forPath(None, uri, storage_options=options).toArrow()
    return sort_rows([tuple(d[c] for c in COLUMNS) for d in table.to_pylist()])


def _is_data_file(key: str) -> bool:
    return key.endswith(".parquet") and "/_delta_log/" not in key


class SlowDataPuts:
    """Wraps obstore.put: a data file's PUT waits ``SLOW_PUT_S``, then (``lands``) sends it, then
    (``fails``) raises what object_store raises for a dropped connection. Records when each
    commit was serialized and when each data PUT finished, to show they overlapped."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, lands: bool, fails: bool) -> None:
        self.lands, self.fails = lands, fails
        self.data_put_threads: list[str] = []
        self.data_put_done: list[float] = []
        self.serialized: list[float] = []
        real_put: Callable[..., Any] = obstore.put
        real_serialize = Transaction._serialize

        def put(store: Any, key: str, data: Any, **kwargs: Any) -> Any:
            if not _is_data_file(key):
                return real_put(store, key, data, **kwargs)
            self.data_put_threads.append(threading.current_thread().name)
            time.sleep(SLOW_PUT_S)
            try:
                result = real_put(store, key, data, **kwargs) if self.lands else None
                if self.fails:
                    raise GenericError(f"error sending request for url (injected: connection reset after {key})")
                return result
            finally:
                self.data_put_done.append(time.monotonic())

        def serialize(txn: Transaction, *args: Any) -> bytes:
            self.serialized.append(time.monotonic())
            return real_serialize(txn, *args)

        monkeypatch.setattr(obstore, "put", put)
        monkeypatch.setattr(Transaction, "_serialize", serialize)


@pytest.fixture
def table(s3_server: S3Server) -> tuple[str, dict[str, str], dict[int, Row]]:  # noqa: F811
    uri, opts = f"s3://{s3_server.new_bucket()}/t", s3_server.options
    model = {i: (i, i * 10) for i in range(100)}
    dvengine.write(_arrow(list(model.values())), uri, storage_options=opts)
    DeltaTable.forPath(None, uri, storage_options=opts).update("id = 1", {"val": "-1"}, engine="local")  # probe done
    model[1] = (1, -1)
    return uri, opts, model


def _check_unchanged_then_update(s3_server: S3Server, uri: str, opts: dict[str, str], model: dict[int, Row],  # noqa: F811
                                 keys_before: list[str]) -> None:
    bucket = uri.removeprefix("s3://").split("/", 1)[0]
    assert s3_server.keys(bucket) == keys_before  # no commit, no data file: nothing even for VACUUM
    assert pending.in_flight() == 0
    assert _dvengine_rows(uri, opts) == sort_rows(list(model.values()))
    assert rows_delta_rs_s3(s3_server, uri, COLUMNS) == sort_rows(list(model.values()))
    DeltaTable.forPath(None, uri, storage_options=opts).update("id = 7", {"val": "-7"}, engine="local")
    model[7] = (7, -7)
    assert _dvengine_rows(uri, opts) == sort_rows(list(model.values()))
    assert rows_delta_rs_s3(s3_server, uri, COLUMNS) == sort_rows(list(model.values()))


@pytest.mark.parametrize("lands", [False, True], ids=["put-lost", "put-landed-answer-lost"])
def test_data_put_failing_while_the_commit_is_built(
    s3_server: S3Server, table: tuple[str, dict[str, str], dict[int, Row]], lands: bool  # noqa: F811
) -> None:
    uri, opts, model = table
    bucket = uri.removeprefix("s3://").split("/", 1)[0]
    keys_before = s3_server.keys(bucket)
    with pytest.MonkeyPatch.context() as patch:
        puts = SlowDataPuts(patch, lands=lands, fails=True)
        with pytest.raises(StorageUnreachableError, match=rf"cannot write {uri}/part-.*\.parquet") as raised:
            DeltaTable.forPath(None, uri, storage_options=opts).update("id = 5", {"val": "-5"}, engine="local")
    # the PUT ran on a worker while this thread serialized the commit, and its failure came out
    # of the commit's wait for the files it names, before the commit was sent
    assert [name.startswith("dvengine-put") for name in puts.data_put_threads] == [True]
    assert puts.serialized and puts.serialized[0] < puts.data_put_done[0]
    frames = [f.name for f in traceback.extract_tb(raised.value.__traceback__)]
    assert "_wait_for_named_files" in frames and "put_if_absent" not in frames
    _check_unchanged_then_update(s3_server, uri, opts, model, keys_before)


def test_command_failing_before_its_commit_deletes_after_its_put_landed(
    s3_server: S3Server, table: tuple[str, dict[str, str], dict[int, Row]]  # noqa: F811
) -> None:
    """The command fails (here: building its commit) while the slow data PUT is still under way;
    its clean-up must wait for that PUT, or the object would land after the delete."""
    uri, opts, model = table
    bucket = uri.removeprefix("s3://").split("/", 1)[0]
    keys_before = s3_server.keys(bucket)

    with pytest.MonkeyPatch.context() as patch:
        puts = SlowDataPuts(patch, lands=True, fails=False)

        def broken(txn: Transaction, *args: Any) -> bytes:
            puts.serialized.append(time.monotonic())
            raise RuntimeError("injected: building the commit failed")

        patch.setattr(Transaction, "_serialize", broken)
        with pytest.raises(RuntimeError, match="injected: building the commit failed"):
            DeltaTable.forPath(None, uri, storage_options=opts).update("id = 5", {"val": "-5"}, engine="local")
    assert len(puts.data_put_done) == 1 and puts.serialized[0] < puts.data_put_done[0]  # failed mid-PUT
    _check_unchanged_then_update(s3_server, uri, opts, model, keys_before)


def test_commands_opened_by_path_share_one_client(
    s3_server: S3Server, table: tuple[str, dict[str, str], dict[int, Row]]  # noqa: F811
) -> None:
    """Each command reopened by path (with an equal, separately built options dict) reaches the
    same storage object, so the same obstore client and its connection pool serve them all."""
    from dvengine.storage.registry import storage_for

    uri, opts, model = table
    seen = []
    for key in (11, 12):
        table_obj = DeltaTable.forPath(None, uri, storage_options=dict(opts))
        table_obj.delete(f"id = {key}", engine="local")
        del model[key]
        seen.append(storage_for(f"{uri}/_delta_log"))
    assert seen[0] is seen[1] and seen[0] is storage_for(uri)
    assert _dvengine_rows(uri, opts) == sort_rows(list(model.values()))
