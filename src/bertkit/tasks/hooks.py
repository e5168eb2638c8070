"""The hooks a task family's module may define, and their defaults.

A family module (bertkit.tasks.classification, ...) defines the hooks where its family
differs; `TaskFamily.hook(name)` (bertkit.tasks.registry) returns the module's function
or the default here. Callers (fine-tuning, evaluation, `predict`, the CLI) only ever call
hooks, so no family's behaviour is spelled outside its module.

Checkpoints:
- `spec_from_config(config) -> dict`: TaskSpec fields of a checkpoint fine-tuned
  elsewhere (no bertkit_task.json), read from its config (e.g. regression).
- `head_config(config, spec, labels)`: the checkpoint's config with the task's outputs
  (label map, regression's single output).
Scoring:
- `metrics(spec, data, outputs, id2label) -> dict`: the official metrics of a model's
  per-feature logits on a labelled `TaskData` (`bertkit evaluate`, dev evaluation).
- `evaluation_label_map(spec, config, examples, origin)`: the model's label -> id map
  checked against a file's labels (None: the family has no label names; the default
  takes config.json's map unchecked).
Run reports:
- `describe(spec) -> str`: the task line of a report; `report_details(spec, dev) -> dict`:
  more lines of the run description; `report_sections(spec, dev) -> list`: (title,
  body) sections; `report_files(spec, dev, outputs) -> str`: files beside best/
  (", `name` (what)" pieces); `write_dev_predictions(spec, dev, outputs, output_dir)`:
  those files; `dev_plots(spec, dev, labels, outputs, output_dir) -> list[Path]`.
Prediction:
- `predict(loaded, batch, max_seq_length, batch_size, progress) -> list[dict]`: one result
  per input; `loaded` runs encoded features (`loaded.outputs(features, batch_size,
  progress)`, logits per feature) and carries tokenizer, spec, id2label and program_cls.
- `bertkit predict`'s inputs in the shape `predict` takes: `inputs_from_texts(texts, spec)`
  (TEXT arguments), `inputs_from_file(path, spec)` (a file the family reads itself;
  None: one input per line, or per JSONL record through `input_from_record(record, spec,
  path, line_no, text_field, pair_field)`), `input_from_line(text, spec, source)`, and
  `echo(item) -> dict`: the input as printed before the result.
- `input_tokens(tokenizer, spec, item, max_seq_length) -> (tokens, truncated)`: the real
  tokens one `predict` input costs the model and whether encoding it cuts text off (a
  server's batch budget and its --truncate check). The default counts the item's texts as
  one sequence and never truncates: the families using it (tagging, QA) window long inputs.
Export:
- `input_axes() -> tuple[str, ...]`: the axes of the model's token inputs, named as
  optimum names them (`bertkit export onnx`'s dynamic axes): ("batch_size",
  "sequence_length"), with "num_choices" between them for a model scoring choices.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from bertkit.errors import BertkitError

HOOKS = ("spec_from_config", "head_config", "metrics", "evaluation_label_map", "describe", "report_details",
         "report_sections", "report_files", "write_dev_predictions", "dev_plots", "predict", "inputs_from_texts",
         "inputs_from_file", "input_from_record", "input_from_line", "echo", "input_tokens", "input_axes")
INPUT_SOURCE = "<input>"  # where a `predict` input came from, in its error messages


# ---------------------------------------------------------------------------- checkpoints


def spec_from_config(config) -> dict[str, Any]:
    return {}


def head_config(config, spec, labels: list[str] | None, problem_type: str | None = None):
    if spec.regression:
        return dataclasses.replace(config, extra=dict(config.extra), id2label={0: "LABEL_0"},
                                   label2id={"LABEL_0": 0}, problem_type="regression")
    if labels is not None:
        return config.with_labels(labels, problem_type)
    return config


# ---------------------------------------------------------------------------- scoring


def metrics(spec, data, outputs, id2label) -> dict[str, float]:
    raise BertkitError(f"task family {spec.family!r}: no metrics")


def evaluation_label_map(spec, config, examples: list, origin: str) -> dict[str, int] | None:
    """The model's label map as it is (None for regression; a family without label names never
    gets here: `TaskFamily.evaluation_label_map`)."""
    if spec.regression:
        return None
    if not config.has_label_names:
        raise missing_label_names(origin)
    return dict(config.label2id)


def missing_label_names(origin: str) -> BertkitError:
    """The error for a model whose label map has only LABEL_0, ... placeholders."""
    return BertkitError(f"{origin}: the label map has no label names (LABEL_0, ...), so the file's labels cannot "
                        "be matched to the model's outputs; add id2label to config.json")


# ---------------------------------------------------------------------------- run reports


def describe(spec) -> str:
    return spec.family.replace("_", " ")


def report_details(spec, dev) -> dict[str, str]:
    return {}


def report_sections(spec, dev) -> list[tuple[str, Any]]:
    return []


def report_files(spec, dev, outputs) -> str:
    return ""


def write_dev_predictions(spec, dev, outputs, output_dir: Path) -> None:
    return None


def dev_plots(spec, dev, labels: list[str] | None, outputs, output_dir: Path) -> list[Path]:
    return []


# ---------------------------------------------------------------------------- prediction


def predict(loaded, batch: list[Any], max_seq_length: int, batch_size: int, progress: bool) -> list[dict[str, Any]]:
    raise BertkitError(f"task family {loaded.spec.family!r}: no predictions")


def inputs_from_texts(texts: list[str], spec) -> list[Any]:
    return list(texts)


def inputs_from_file(path: str, spec) -> list[Any] | None:
    return None


def input_from_record(record: dict[str, Any], spec, path: str, line_no: int, text_field: str,
                      pair_field: str) -> Any:
    from bertkit.tasks.records import as_text, missing_field

    if text_field not in record:
        raise missing_field(path, line_no, [text_field], record)
    return as_text(record[text_field], path, line_no, text_field)


def input_from_line(text: str, spec, source: str) -> Any:
    return text


def tab_pair(text: str, source: str) -> tuple[str, str]:
    """A line of two tab-separated texts (a pair model's, QA's question and context)."""
    first, sep, second = text.partition("\t")
    if not sep:
        raise BertkitError(f"{source}: this model classifies text pairs; give two tab-separated texts per line")
    return (first, second)


def echo(item: Any) -> dict[str, Any]:
    return {"text": item}


def input_tokens(tokenizer, spec, item: Any, max_seq_length: int) -> tuple[int, bool]:
    texts = list(_texts_in(item))
    return len(tokenizer(" ".join(texts))["input_ids"]), False


def _texts_in(item: Any):
    """Every string inside a predict input (a text, a tuple or list of them, a dict's values)."""
    if isinstance(item, str):
        yield item
    elif isinstance(item, (list, tuple)):
        for part in item:
            yield from _texts_in(part)
    elif isinstance(item, dict):
        for part in item.values():
            yield from _texts_in(part)


# ---------------------------------------------------------------------------- export


def input_axes() -> tuple[str, ...]:
    return ("batch_size", "sequence_length")
