"""Resuming a run (`--resume`): the checkpoint to continue from, the saved configuration,
and what the command line may change in it. Pre-training and general distillation share it.

- `run_config.json` holds absolute paths (`absolute_paths`), so a run resumes from any
  working directory; the folder being resumed is always the run's folder, so a copied
  run writes only into the copy.
- The newest checkpoint that reads back is the one resumed; a newer unreadable one is
  named in a one-line warning instead of stopping the run.
- Values given again on the command line must equal the saved run's, except the
  schedule and bookkeeping fields (RESUMABLE_FIELDS) and `data` built with the
  checkpoint's tokenizer: those are applied and named; any other difference refuses the
  resume in one line naming each field with its saved value. Without such changes a
  resumed run ends bit-identical to an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertkit.errors import BertkitError, ConfigError
from bertkit.training import checkpoints as ckpt
from bertkit.training.config import read_run_config

# the learning-rate schedule: the loop re-derives the step's lr from these on resume
SCHEDULE_FIELDS = ("max_steps", "lr", "warmup_steps", "warmup_ratio", "budget_seconds")
# what only decides logging, evaluation and saving, never a weight
BOOKKEEPING_FIELDS = ("log_steps", "eval_steps", "save_steps", "save_total_limit", "eval_batches", "progress",
                      "tensorboard", "save_checkpoints", "on_nonfinite",
                      "nonfinite_skip_limit", "budget_evals")
RESUMABLE_FIELDS = SCHEDULE_FIELDS + BOOKKEEPING_FIELDS
DATA_FIELD = "data"  # resumable when built with the checkpoint's tokenizer

Notify = Callable[[str], None]  # receives one-line notes for the user (the CLI prints them on stderr)


@dataclass
class Resumption:
    """Where a resumed run starts: the checkpoint, its step, the configuration to run and
    the command-line changes applied to the saved one ("max_steps 4 (saved 2)")."""

    checkpoint: Path
    step: int
    config: Any
    changed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # why each newer checkpoint could not be read

    def notes(self) -> list[str]:
        """One-line notes for stderr, given once every check has passed (so an error stays
        one line): a warning per unreadable newer checkpoint, where the run resumes, the
        changes applied."""
        lines = [f"warning: {problem}; resuming from the newest readable checkpoint, {self.checkpoint.name}"
                 for problem in self.skipped]
        lines.append(f"resuming {self.checkpoint.parent} from {self.checkpoint.name} (step {self.step})")
        if self.changed:
            lines.append(f"resume applies from the command line: {', '.join(self.changed)}")
        return lines

    def report_entry(self) -> str:
        """The run report's line: where it resumed from and what changed."""
        changed = f"; changed: {', '.join(self.changed)}" if self.changed else ""
        return f"{self.checkpoint.name} (step {self.step}){changed}"


def absolute(value: str) -> str:
    return str(Path(value).expanduser().resolve())


def absolute_paths(config, names: tuple[str, ...]):
    """`config` with its path fields `names` made absolute (empty and None stay)."""
    changes = {name: absolute(getattr(config, name)) for name in names if getattr(config, name)}
    return dataclasses.replace(config, **changes)


def _absolute_values(values: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {k: absolute(v) if k in names and isinstance(v, str) and v else v for k, v in values.items()}


def newest_readable_checkpoint(output_dir: Path) -> tuple[Path, int, list[str]]:
    """The newest checkpoint in `output_dir` that reads back, its step, and why each newer
    one does not (one line each, naming the file)."""
    found = ckpt.list_checkpoints(output_dir)
    if not found:
        raise BertkitError(f"{output_dir}: no checkpoint to resume from (start without --resume)")
    problems = []
    for step, path in reversed(found):
        problem = ckpt.checkpoint_problem(path)
        if problem is None:
            return path, step, problems
        problems.append(problem)
    raise BertkitError(f"{problems[0]}; no checkpoint in {output_dir} reads back (start over with --overwrite)")


def data_tokenizer_problem(checkpoint: Path, data: str) -> str | None:
    """Why `data` cannot replace a resumed run's data (another tokenizer than the
    checkpoint's), or None."""
    from bertkit.data.dataset import PretrainingDataset, tokenizer_fingerprint
    from bertkit.tokenization import Tokenizer

    info = PretrainingDataset.open(data, "train").info
    try:
        tokenizer = Tokenizer.from_pretrained(checkpoint)
    except BertkitError:
        return "the checkpoint holds no tokenizer to compare it with"
    if tokenizer_fingerprint(tokenizer) != info.tokenizer_fingerprint:
        return "built with another tokenizer than the checkpoint's"
    return None


def resumes_by_itself(output_dir: str | Path | None, requested: bool, notify: Notify | None = None) -> bool:
    """Whether a run continues from its checkpoints: `--resume`, or a process that
    `torchrun --max-restarts` restarted after a failure when `output_dir` holds a
    checkpoint (the same command line then picks up where the run stopped)."""
    from bertkit.training.faults import restart_count

    if requested or not output_dir or restart_count() == 0 or not ckpt.list_checkpoints(Path(output_dir)):
        return requested
    if notify is not None:
        notify(f"torchrun restart {restart_count()}: resuming from the newest checkpoint")
    return True


def differences(saved, requested) -> list[tuple[str, Any, Any]]:
    """(field, saved value, requested value) for each field of two configs that differs;
    mapping fields (BertConfig overrides) compare key by key as `model.hidden_size`."""
    found = []
    for f in dataclasses.fields(saved):
        old, new = getattr(saved, f.name), getattr(requested, f.name)
        if isinstance(old, dict) and isinstance(new, dict):
            for key in sorted(set(old) | set(new), key=str):
                if old.get(key) != new.get(key) or (key in old) != (key in new):
                    found.append((f"{f.name}.{key}", old.get(key), new.get(key)))
        elif old != new:
            found.append((f.name, old, new))
    return found


def _show(value: Any) -> str:
    return "unset" if value is None else str(value)


def resume_run(output_dir: str | Path, build: Callable[[dict, dict, str], Any], given: dict[str, Any],
               overrides: dict[str, str], path_fields: tuple[str, ...]) -> Resumption:
    """The run in `output_dir` to resume with what the command line gave: `given` (YAML and
    flag values) and `overrides` (`--set`), as `build(values, overrides, source)` makes a
    config of them. Changes to RESUMABLE_FIELDS (and same-tokenizer data) are applied and
    listed in the result; any other difference raises one line naming each field."""
    output_dir = Path(absolute(str(output_dir)))
    checkpoint, step, skipped = newest_readable_checkpoint(output_dir)
    path, saved_values = read_run_config(output_dir)
    saved_values = _absolute_values(saved_values, path_fields)  # a relative path (older runs): from here, as before
    here = {"output_dir": str(output_dir)}  # the folder being resumed, wherever the run first was
    saved = build({**saved_values, **here}, {}, str(path))
    requested = build({**saved_values, **_absolute_values(given, path_fields), **here},
                      _absolute_values(overrides, path_fields), "config")
    applied, refused = [], []
    for name, old, new in differences(saved, requested):
        if name == DATA_FIELD:
            reason = data_tokenizer_problem(checkpoint, new)
        else:
            reason = None if name in RESUMABLE_FIELDS else ""
        if reason is None:
            applied.append(f"{name} {_show(new)} (saved {_show(old)})")
        else:
            refused.append(f"{name} {_show(new)} (saved {_show(old)}{'; ' + reason if reason else ''})")
    if refused:
        raise BertkitError(f"{output_dir}: --resume continues the saved run, but the command line changes "
                           f"{', '.join(refused)}; drop those values, or start a new run in another --output-dir")
    if requested.max_steps < step:
        raise ConfigError(f"field 'max_steps' {requested.max_steps} is below the step of {checkpoint.name} ({step})")
    return Resumption(checkpoint, step, requested, applied, skipped)
