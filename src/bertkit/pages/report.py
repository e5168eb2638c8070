"""`bertkit report RUN_DIR`: a run folder as one self-contained HTML page.

A run folder (pre-training, fine-tuning, distillation: bertkit.training.reporting writes
them) holds report.md, metrics.jsonl and PNG plots. The page is report.md rendered
(bertkit.pages.markdown) with its images inlined as data URIs, the latest value of each
metric in metrics.jsonl (and the step it was logged at), and every PNG of the folder that
report.md does not show. Links to other files stay relative to the run folder.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from bertkit.errors import BertkitError
from bertkit.pages.html import data_uri, page
from bertkit.pages.markdown import render

REPORT_FILE = "report.md"
METRICS_FILE = "metrics.jsonl"


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """metrics.jsonl's records; a line cut short (a killed run) ends the file."""
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            break
        if isinstance(record, dict):
            records.append(record)
    return records


def latest_values(records: list[dict[str, Any]]) -> dict[str, tuple[Any, Any]]:
    """metric -> (its last logged value, the step then), in first-seen order."""
    latest: dict[str, tuple[Any, Any]] = {}
    for record in records:
        for key, value in record.items():
            if key != "step" and isinstance(value, (int, float, str)) and not isinstance(value, bool):
                latest[key] = (value, record.get("step"))
    return latest


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.6g}"
    return str(value)


def metrics_markdown(records: list[dict[str, Any]]) -> str:
    latest = latest_values(records)
    if not latest:
        return "No metrics logged."
    rows = [f"| {key} | {_fmt(value)} | {'' if step is None else step} |" for key, (value, step) in latest.items()]
    return "\n".join([f"{len(records)} records; the latest value of each:", "", "| metric | value | step |",
                      "|---|---|---|", *rows])


def report_page(run_dir: str | Path) -> str:
    """The page of `run_dir`; a one-line BertkitError when it is not a run folder."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise BertkitError(f"{run_dir}: no such folder")
    report, metrics = run_dir / REPORT_FILE, run_dir / METRICS_FILE
    if not report.is_file() and not metrics.is_file():
        raise BertkitError(f"{run_dir}: not a run folder (no {REPORT_FILE} or {METRICS_FILE}); give the folder "
                           "a pretrain, finetune or distill run wrote (its --output-dir)")
    shown: set[str] = set()

    def image_src(target: str) -> str:
        path = run_dir / target
        if "://" in target or not path.is_file():
            return target
        shown.add(path.resolve().name if path.parent.resolve() == run_dir.resolve() else str(path))
        return data_uri(path)

    parts = []
    if report.is_file():
        parts.append(render(report.read_text(encoding="utf-8"), image_src))
    else:
        parts.append(f"<h1>{run_dir.name}</h1><p class=\"note\">No {REPORT_FILE} (the run has not finished).</p>")
    if metrics.is_file():
        parts.append("<h2>Metrics (metrics.jsonl)</h2>\n" + render(metrics_markdown(read_metrics(metrics))))
    others = [p for p in sorted(run_dir.glob("*.png")) if p.name not in shown]
    if others:
        parts.append("<h2>Other plots</h2>\n" + "\n".join(
            f'<figure><img alt="{p.stem}" src="{data_uri(p)}"><figcaption>{p.name}</figcaption></figure>' for p in others))
    return page(f"bertkit report: {run_dir.name}", "\n".join(parts))
