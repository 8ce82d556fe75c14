"""The lost-race bench (dvengine/bench/lost_race.py) holds a real DML at its commit, lets winners
from another process land, and measures the commit that catches up with them."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from dvengine.api.table import DeltaTable
from dvengine.bench import lost_race
from dvengine.commands.options import CONF_MAX_STALENESS, env_key


def test_every_sample_catches_up_with_its_winners_and_the_rows_match_the_model(tmp_path: Path) -> None:
    key = env_key(CONF_MAX_STALENESS)
    assert key not in os.environ
    result = lost_race.main(["--rows", "4000", "--deleted", "0", "300", "--winners", "0", "1", "2",
                             "--samples", "2", "--out", str(tmp_path)])
    assert key not in os.environ  # the bench's setting does not outlive it (other tests plan blind)
    assert result is not None
    assert json.loads((tmp_path / "lost_race.json").read_text()) == json.loads(json.dumps(result))
    assert "us CPU per winner" in (tmp_path / "lost_race.md").read_text()
    for table in result["tables"]:
        cells = table["by_winners"]
        assert set(cells) == {"0", "1", "2"}
        assert cells["0"]["rebased_files_median"] == 0  # nobody to rebase onto
        assert cells["1"]["rebased_files_median"] == cells["2"]["rebased_files_median"] == 1  # the hot file
        for cell in cells.values():
            assert 0 < cell["cpu_min_s"] <= cell["cpu_median_s"] <= cell["cpu_max_s"]
        assert table["cpu_per_winner_s"] is not None and table["cpu_first_winner_s"] is not None
        assert table["cpu_per_further_winner_s"] is not None  # k = 2 is beyond the first
    assert "the first" in (tmp_path / "lost_race.md").read_text()


def test_a_loser_that_catches_up_with_fewer_winners_than_asked_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env_key(CONF_MAX_STALENESS), "0")
    root = str(tmp_path / "t")
    lost_race.make_template(root, 4000, 0)
    monkeypatch.setattr(lost_race, "_run_winners", lambda *_args: None)  # the winners never land
    with pytest.raises(AssertionError, match="caught up with 0 winners, expected 2"):
        lost_race.one_sample(root, 4000, 1, 2, str(tmp_path / "decoy"), 2)


def test_the_decoy_takes_the_commits_the_winners_do_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env_key(CONF_MAX_STALENESS), "0")  # as main() sets it: the loser lists
    root, decoy = str(tmp_path / "t"), str(tmp_path / "decoy")
    lost_race.make_template(root, 4000, 0)
    lost_race.make_template(decoy, 4000, 0)
    before = DeltaTable.forPath(None, decoy).toArrow().num_rows
    lost_race.one_sample(root, 4000, 1, 1, decoy, 3)
    after = DeltaTable.forPath(None, decoy).toArrow().to_pydict()
    rows = lost_race._winner_rows(4000, 1, 3)
    values = dict(zip(after["id"], after["v"], strict=True))
    assert len(after["id"]) == before - 1  # the decoy's first op is a DELETE, its second an UPDATE
    assert rows[1] not in values and values[rows[2]] == -rows[2]


def test_the_commit_hold_is_lifted_afterwards(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    lost_race.make_template(root, 4000, 0)
    slot = lost_race._Held()
    with lost_race._held_commits({"someone-else": slot}):
        pass
    done = threading.Event()
    threading.Thread(target=lambda: (DeltaTable.forPath(None, root).delete("id = 5"), done.set()), name="someone-else").start()
    assert done.wait(30), "a commit after the context ended was still held"
    assert DeltaTable.forPath(None, root).toArrow().num_rows == 3999


def test_a_failed_winners_process_does_not_leave_the_loser_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env_key(CONF_MAX_STALENESS), "0")
    root = str(tmp_path / "t")
    lost_race.make_template(root, 4000, 0)

    def fail(*_args: object) -> None:
        raise RuntimeError("the winners' process failed")

    monkeypatch.setattr(lost_race, "_run_winners", fail)
    with pytest.raises(RuntimeError, match="winners' process failed"):
        lost_race.one_sample(root, 4000, 1, 1, str(tmp_path / "decoy"), 1)
    assert not [t for t in threading.enumerate() if t.name.startswith("dvengine-lost-race")]


def test_more_winners_than_a_sample_has_rows_for_is_refused() -> None:
    with pytest.raises(SystemExit):
        lost_race.main(["--winners", "0", str(lost_race._WINNER_BLOCK + 1)])
