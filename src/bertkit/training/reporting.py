"""What a person reads about a run: metrics JSONL, TensorBoard events, PNG curves, report.md."""

from __future__ import annotations

import re

import json
import math
from pathlib import Path
from typing import Any

from bertkit.atomic import write_text_atomic
from bertkit.evaluation.metrics import SCALE_NOTE, axis_label, format_metric
from bertkit.plots import new_figure, save_png

METRICS_FILE = "metrics.jsonl"


class MetricsLog:
    """Appends one JSON object per logging event to `metrics.jsonl` and mirrors the
    numbers to TensorBoard when the optional `tensorboard` package is installed."""

    def __init__(self, output_dir: Path, tensorboard: bool = True, resume_step: int | None = None):
        self.path = output_dir / METRICS_FILE
        self.records: list[dict[str, Any]] = []
        if resume_step is not None and self.path.exists():
            # keep what the interrupted run logged up to its checkpoint; later lines are replayed anew
            kept = [r for r in _read_jsonl(self.path) if r.get("step", 0) <= resume_step]
            self.records = kept
            write_text_atomic(self.path, "".join(json.dumps(r) + "\n" for r in kept))
        elif self.path.exists():
            self.path.unlink()
        self.writer = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.writer = SummaryWriter(str(output_dir / "tensorboard"))
            except ImportError:
                self.writer = None

    def log(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        if self.writer is not None:
            for key, value in record.items():
                if key != "step" and isinstance(value, (int, float)):
                    self.writer.add_scalar(key, value, record["step"])

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a line cut by a kill: everything after it is newer than any checkpoint
    return records


def series(records: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    points = [(r["step"], r[key]) for r in records if isinstance(r.get(key), (int, float)) and math.isfinite(r[key])]
    return [p[0] for p in points], [p[1] for p in points]


def plot_curves(records: list[dict[str, Any]], output_dir: Path, panels: list[tuple[str, list[str]]]) -> list[Path]:
    """One PNG per panel: (title, metric keys drawn against step). Panels with no data are skipped."""
    written = []
    for title, keys in panels:
        drawn = [(key, *series(records, key)) for key in keys]
        drawn = [d for d in drawn if d[1]]
        if not drawn:
            continue
        fig = new_figure(6, 4, dpi=110)
        ax = fig.subplots()
        for key, steps, values in drawn:
            ax.plot(steps, values, marker="o" if len(steps) < 20 else None, markersize=3, label=key)
        ax.set_xlabel("step")
        label = axis_label([key for key, *_ in drawn])
        if label:
            ax.set_ylabel(label)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        written.append(save_png(fig, output_dir / f"{plot_file_stem(title)}.png"))
    return written


def plot_file_stem(title: str) -> str:
    """A panel title as a file name: lower case, runs of anything but letters and digits
    as one underscore ("Replaced tokens: precision / recall" -> replaced_tokens_precision_recall)."""
    return re.sub(r"[^0-9a-z]+", "_", title.lower()).strip("_") or "plot"


def fresh_weights_note(model_name: str, source: str | Path, fresh: list[str]) -> str:
    """One line on loading a checkpoint: the weights it lacked, initialised fresh (a new
    head), or that every weight was loaded. Fine-tuning and continued pre-training say it."""
    return f"{model_name} from {source}: " + (f"initialised fresh: {', '.join(fresh)}" if fresh
                                              else "every weight loaded (head included)")


def write_report(output_dir: Path, title: str, sections: list[tuple[str, Any]], plots: list[Path]) -> Path:
    """report.md: a heading, sections of key/value tables or text, and the plots inline.
    Values are shown with `format_metric` (percentages with 2 decimals)."""
    lines = [f"# {title}", ""]
    for heading, body in sections:
        lines += [f"## {heading}", ""]
        if isinstance(body, dict):
            lines += ["| | |", "|---|---|"] + [f"| {k} | {_fmt(k, v)} |" for k, v in body.items()]
        else:
            lines.append(str(body))
        lines.append("")
    if plots:
        lines += ["## Curves", ""] + [f"![{p.stem}]({p.name})" for p in plots] + [""]
    lines += [f"Scale: {SCALE_NOTE}.", ""]
    path = output_dir / "report.md"
    write_text_atomic(path, "\n".join(lines))
    return path


def _fmt(key: str, value: Any) -> str:
    if isinstance(value, float):
        return format_metric(key, value)
    return str(value)
