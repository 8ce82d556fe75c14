"""Fault injection for crash-safety tests: die abruptly at a named stage of a write.

Crash safety is a claim about *every* point where a writer can stop, so the tests must be able
to stop a real writer at those points. Production code calls :func:`fault_point` at each stage;
it costs one environment lookup and does nothing unless ``DVENGINE_FAULT_INJECT`` names that
stage. When it does, the process kills itself with SIGKILL: no ``finally`` blocks, no atexit
hooks, no buffered writes flushed - exactly what a power cut or an OOM kill leaves behind.

Stages (see ``spec_notes/crash-safety.md`` for where each is called):

- ``dml.dv_files_written``   - new DV files exist on disk, nothing committed yet;
- ``dml.data_files_written`` - rewritten data files exist in the table folder, nothing committed;
- ``commit.before_link``     - the temp commit file is written and fsynced, not yet linked;
- ``commit.after_link``      - the commit file exists (the commit is durable) and its temp file is gone.
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "DVENGINE_FAULT_INJECT"

DML_DV_FILES_WRITTEN = "dml.dv_files_written"
DML_DATA_FILES_WRITTEN = "dml.data_files_written"
COMMIT_BEFORE_LINK = "commit.before_link"
COMMIT_AFTER_LINK = "commit.after_link"

STAGES = (DML_DV_FILES_WRITTEN, DML_DATA_FILES_WRITTEN, COMMIT_BEFORE_LINK, COMMIT_AFTER_LINK)


def armed_stages() -> frozenset[str]:
    """Stages named in ``DVENGINE_FAULT_INJECT`` (comma separated); empty when unset."""
    raw = os.environ.get(FAULT_ENV, "")
    return frozenset(s.strip() for s in raw.split(",") if s.strip())


def fault_point(stage: str) -> None:
    """Kill this process with SIGKILL if ``stage`` is armed; otherwise return immediately."""
    if stage not in armed_stages():
        return
    os.kill(os.getpid(), signal.SIGKILL)
    os._exit(137)  # pragma: no cover - unreachable unless SIGKILL is unavailable
