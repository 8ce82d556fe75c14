"""What the contention bench's writers do, independent of the engine that does it.

Writer ``w`` of ``W`` owns rows ``w + W*k`` (op ``k``) and alternates ``DELETE WHERE id = x`` and
``UPDATE SET v = -x WHERE id = x``; the same-total baseline runs every writer's operations in one
process. Kept apart from the writers and the orchestrator so that every engine's writer process
(dvengine's in ``contention``, delta-rs's in ``contention_delta_rs``) runs exactly the same
operations in the same order, and verification checks them against one model.
"""

from __future__ import annotations


def first_id(writer: int, rows: int, file_per_writer: bool) -> int:
    """Where ``writer``'s rows start: at 0 on the one hot file, at its own file's first id
    (``writer * rows``) in the ``file-per-writer`` layout."""
    return writer * rows if file_per_writer else 0


def writer_rows(writer: int, writers: int, ops: int, rows: int = 0, file_per_writer: bool = False) -> list[int]:
    """The rows ``writer`` changes, op by op: ``w + W*k`` of its file."""
    return [first_id(writer, rows, file_per_writer) + writer + writers * k for k in range(ops)]


def is_delete(k: int) -> bool:
    return k % 2 == 0


def model_rows(rows: int, writers: int, ops: int, file_per_writer: bool = False) -> list[tuple[int, int]]:
    """The table after every writer's operations (they touch disjoint rows, so any order)."""
    out = {i: i for i in range(rows * (writers if file_per_writer else 1))}
    for w in range(writers):
        for k, x in enumerate(writer_rows(w, writers, ops, rows, file_per_writer)):
            if is_delete(k):
                del out[x]
            else:
                out[x] = -x
    return sorted(out.items())


def operations(
    writer: int | None, writers: int, ops: int, rows: int = 0, file_per_writer: bool = False
) -> list[tuple[int, bool]]:
    """(row, is DELETE) in the order one process runs them: writer ``writer``'s own, or with
    ``writer=None`` every writer's, op ``k`` of writers 0..W-1 before op ``k+1`` (the serial
    baseline: the same operations and the same final table as W concurrent writers)."""
    lanes = range(writers) if writer is None else [writer]
    return [(first_id(w, rows, file_per_writer) + w + writers * k, is_delete(k)) for k in range(ops) for w in lanes]


def warm_count(writer: int | None, writers: int, warm_ops: int) -> int:
    """How many of a process's first operations run before the start signal: ``warm_ops`` per
    lane (one lane for a writer, W for the same-total baseline, which runs every writer's)."""
    return warm_ops * (writers if writer is None else 1)
