"""The post-commit hook that runs auto compaction after DELETE, UPDATE, MERGE and writes.

It joins the engine-neutral trigger and commit (:mod:`dvengine.maintenance.auto_compact`) to the
embedded executor's bin rewriters (plain, and along the curve for a clustered table), which
compact after commands of either executor (as OPTIMIZE does today) without a Spark job; the API
entry points call it once their command returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dvengine.commands.options import ConfLookup
from dvengine.engine.local.cluster_rewrite import clustering_rewriter
from dvengine.engine.local.optimize import rewrite_files
from dvengine.maintenance.auto_compact import maybe_auto_compact


def after_commit(
    conf: ConfLookup, table_root: str, version: object, configuration: Mapping[str, str] | None = None
) -> dict[str, Any] | None:
    """Auto-compact ``table_root`` if the command committed (``version`` is an int) and it qualifies;
    ``configuration``: the table properties the command read and did not change (see maybe_auto_compact)."""
    if not isinstance(version, int) or isinstance(version, bool):
        return None
    return maybe_auto_compact(
        table_root, version, conf, rewrite_files,
        lambda columns, max_file_size: clustering_rewriter(columns, conf, max_file_size),
        configuration=configuration,
    )
