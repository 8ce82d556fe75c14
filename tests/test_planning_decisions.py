"""The per-file DV / rewrite / remove decision and the option checks, as pure functions."""

from __future__ import annotations

import pytest

from dvengine.errors import InvalidArgumentError
from dvengine.planning.decisions import DEFAULT_REWRITE_THRESHOLD, DmlOptions, FileAction, decide_file_action

DV, REWRITE, REMOVE = FileAction.DELETION_VECTOR, FileAction.REWRITE, FileAction.REMOVE


@pytest.mark.parametrize(
    ("mode", "physical", "old", "new", "dv_supported", "expected"),
    [
        ("auto", 100, 0, 100, True, REMOVE),  # nothing left: plain remove in every mode
        ("dv", 100, 40, 60, True, REMOVE),
        ("rewrite", 100, 99, 1, True, REMOVE),
        ("auto", 100, 0, 20, True, DV),  # exactly at the threshold stays a DV
        ("auto", 100, 0, 21, True, REWRITE),
        ("auto", 100, 15, 6, True, REWRITE),  # the old DV counts towards the fraction
        ("dv", 100, 0, 99, True, DV),
        ("rewrite", 100, 0, 1, True, REWRITE),
        ("auto", 100, 0, 1, False, REWRITE),  # no DV support: copy-on-write
        ("auto", None, 0, 5, True, DV),  # fraction unknown without stats: DV is always safe
        ("rewrite", None, 0, 5, True, REWRITE),
    ],
)
def test_decide_file_action(
    mode: str, physical: int | None, old: int, new: int, dv_supported: bool, expected: FileAction
) -> None:
    options = DmlOptions(mode=mode, rewrite_threshold=0.2)
    assert decide_file_action(physical, old, new, options, dv_supported) is expected


def test_default_threshold_is_the_measured_crossover() -> None:
    assert DmlOptions().rewrite_threshold == DEFAULT_REWRITE_THRESHOLD == 0.15


@pytest.mark.parametrize(
    "kwargs", [{"mode": "fast"}, {"rewrite_threshold": 1.5}, {"rewrite_threshold": -0.1}, {"inline_max_bytes": -1}]
)
def test_bad_options_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidArgumentError):
        DmlOptions(**kwargs)  # type: ignore[arg-type]
