"""Write a run's outputs: results.json, results.md and the PNG plots, all in one folder."""

from __future__ import annotations

import json
import os
from typing import Any

from dvengine.bench.analysis import crossover_report
from dvengine.bench.plots import write_plots
from dvengine.bench.report import render_markdown
from dvengine.bench.results import write_json

DEFAULT_READS_PER_WRITE = 1.0  # a rewrite must pay for itself by the first full read after it


def write_report(out_dir: str, stem: str, report: dict[str, Any], markdown: str) -> list[str]:
    """``<stem>.json`` and ``<stem>.md`` of a single-purpose benchmark (point, read_path); their paths."""
    os.makedirs(out_dir, exist_ok=True)
    json_path = os.path.join(out_dir, f"{stem}.json")
    with open(json_path, "w") as fh:
        json.dump(report, fh, indent=2)
    md_path = os.path.join(out_dir, f"{stem}.md")
    with open(md_path, "w") as fh:
        fh.write(markdown)
    return [json_path, md_path]


def write_outputs(payload: dict[str, Any], out_dir: str, reads_per_write: float = DEFAULT_READS_PER_WRITE) -> list[str]:
    """Add the crossover analysis to ``payload`` and write every output; return their paths."""
    os.makedirs(out_dir, exist_ok=True)
    payload["crossover"] = crossover_report(payload["summaries"], reads_per_write)
    json_path = os.path.join(out_dir, "results.json")
    write_json(json_path, payload)
    md_path = os.path.join(out_dir, "results.md")
    with open(md_path, "w") as fh:
        fh.write(render_markdown(payload))
    return [json_path, md_path, *write_plots(payload, out_dir)]
