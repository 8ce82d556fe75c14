"""Writer processes of single-row DML on one file of a table on S3 (moto on 127.0.0.1).

On a store there is no host-local commit turn: the writers race with conditional PUTs (``If-None-Match:
*``), lose, catch up with the winners, rebase their DVs and retry. Row-level resolution must still hide
every conflict. Truth: versions 1..W*N without gaps, each operation's predicate in exactly one commit
(read from the commit files on the store), rows equal to the model through dvengine, delta-rs and
DuckDB over httpfs.
"""

from __future__ import annotations

from s3_support import S3Server, no_ambient_credentials, rows_delta_rs_s3, rows_duckdb_s3, s3_server  # noqa: F401

from dvengine.bench.contention import run_contention
from dvengine.bench.contention_workload import model_rows

WRITERS = 4
OPS = 6
ROWS = 2_000


def test_writers_on_one_file_of_a_store_table_surface_no_conflict(s3_server: S3Server) -> None:  # noqa: F811
    uri = f"s3://{s3_server.new_bucket()}/hot"
    result = run_contention(uri, ROWS, WRITERS, OPS, row_level=True, options=s3_server.options)
    assert result.errors == []
    assert result.committed == WRITERS * OPS
    assert result.surfaced_conflicts == 0, result.conflict_messages
    assert result.versions_gap_free and result.each_op_once
    assert result.rows_match_model and result.delta_rs_matches is True and result.duckdb_matches is True
    want = model_rows(ROWS, WRITERS, OPS)
    assert rows_duckdb_s3(s3_server, uri, ["id", "v"]) == want
    assert rows_delta_rs_s3(s3_server, uri, ["id", "v"]) == want
    assert result.internal_retries > 0  # they raced: every lost PUT was retried inside dvengine
