"""The DV codec bench (dvengine/bench/dv_codec.py) runs, checks its round trips and reports each step."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from dvengine.bench import dv_codec


def test_shapes_are_what_they_say() -> None:
    got = dv_codec.shapes(9000)
    assert len(got["sparse"]) == 9000 and set(np.diff(got["sparse"]).tolist()) == {30}
    assert len(got["dense"]) == 9000 and not np.any(got["dense"] % 10 == 0)
    assert len(got["runs"]) == 9000 and got["runs"][999] == 999 and got["runs"][1000] == 3000
    assert got["point"].tolist() == [7, 65_537, 4_000_000_123]


def test_bench_reports_every_step_of_every_shape(tmp_path: Path) -> None:
    result = dv_codec.main(["--rows", "20000", "--repeats", "3", "--out", str(tmp_path)])
    assert json.loads((tmp_path / "results.json").read_text()) == json.loads(json.dumps(result))
    assert set(result["shapes"]) == {"sparse", "dense", "runs", "point"}
    for name, shape in result["shapes"].items():
        assert shape["rows"] == len(dv_codec.shapes(20000)[name])
        assert shape["serialized_bytes"] > 0
        for step in ("build_from_indexes", "serialize", "deserialize", "z85_encode", "z85_decode"):
            timing = shape[step]
            assert 0 < timing["min_s"] <= timing["median_s"] <= timing["max_s"], (name, step, timing)
