"""Exactly-once streaming upserts, short version: a foreachBatch MERGE job killed twice.

The long run (>= 20 kills) is ``python -m dvengine.testing.stream_soak``; this runs the same
harness with 2 SIGKILLs during batches. Truth: the model (initial rows plus every batch's
deltas once), dvengine / delta-rs / DuckDB reads, and each batch id in exactly one txn commit.
"""

from __future__ import annotations

from pathlib import Path

from dvengine.testing.stream_soak import soak


def test_stream_killed_and_restarted_applies_every_batch_once(tmp_path: Path) -> None:
    result = soak(str(tmp_path), kills=2, batches=8, seed=3, timeout_s=600)
    assert result.errors == [] and result.failed_restarts == []
    assert result.kills == 2 and result.kills_during_batches >= 1
    assert result.rows_match_model and result.each_batch_once and result.txn_versions_increase
    assert result.delta_rs_matches is True and result.duckdb_matches is True
