"""Fine-tuning programs: one `TrainingProgram` per task family, for the shared loop.

A program holds the encoded training features and the dev set of one task family
(bertkit.tasks.classification / tagging / multiple_choice / qa) and tells the loop how to
batch them, what the loss is and how to score the dev set with the official metrics.
The same pieces serve `bertkit evaluate` and `bertkit predict`, so a model is scored
and used exactly as it was trained.

- Loss. The models return mean losses over their labelled items (sequences, tagged
  first sub-tokens, questions); a micro-batch's mean times its item count over the
  global count is its share of the global mean (see bertkit.training.program), so a
  step's gradient does not depend on accumulation or the number of processes.
- Training order. The default (`group_by_length=False`) is the loop's seeded random
  permutation of each epoch (the paper's recipe, and transformers' Trainer's). With
  `group_by_length=True` it groups by length as Hugging Face's `group_by_length`: the
  permutation is cut into chunks of 50 global batches and each chunk is sorted longest
  first, so a batch holds sequences of similar length and little padding. That order is
  no longer the default: batches of look-alike sequences cost about 2 points of CoNLL
  entity F1 at equal settings (bench/bench_finetune_recipes.py, docs/benchmarks.md), and
  the unpadded encoder path already drops padding's cost. Either way batches are padded
  only to their longest member (multiple of 8).
- Evaluation. The whole dev set runs on every rank (dev sets are small, and under FSDP
  every rank must run every forward anyway), sorted by length and batched, so every
  rank computes the same metrics without gathering predictions. `eval_batches` does
  not apply: official metrics need every example.
- Checkpoints. `save_pretrained` writes the model in the HF layout (config.json with the
  label map id2label / label2id), the tokenizer, and `bertkit_task.json` (`TaskSpec`:
  how to read and encode data for this model, e.g. the GLUE task, the tagging scheme,
  or SQuAD's window settings and the v2.0 no-answer threshold chosen on dev).
- SQuAD. Every evaluation post-processes the dev windows into answers
  (bertkit.tasks.qa.postprocess) and scores them with the official definitions; for
  v2.0 it first picks the null-score-difference threshold that maximizes dev F1 (the
  official best-threshold sweep), reports exact / f1 at that threshold (plus the
  official HasAns / NoAns / best_* keys), and a checkpoint written after that
  evaluation carries the threshold.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from bertkit.atomic import write_text_atomic
from bertkit.errors import BertkitError
from bertkit.evaluation.metrics import percent
from bertkit.labels import IGNORE_INDEX
from bertkit.model.families import head_of_model, model_inputs
from bertkit.model.recipes import AuxiliaryLoss
from bertkit.tasks.qa import qa_metrics
from bertkit.tasks.registry import CLASSIFICATION, MULTIPLE_CHOICE, QA, TAGGING
from bertkit.training.program import TrainingProgram

TASK_FILE = "bertkit_task.json"
LENGTH_GROUP_BATCHES = 50  # global batches per length-sorted chunk (Hugging Face's mega-batch)
INFERRED_MAX_SEQ_LENGTH = 512  # a checkpoint fine-tuned elsewhere: its family's length, else this


# ---------------------------------------------------------------------------- task spec


@dataclass
class TaskSpec:
    """How a fine-tuned model reads and encodes data; saved as `bertkit_task.json`.

    family: a task family's name (bertkit.tasks.registry). Classification: glue_task
    (a GLUE task name) or the text / pair / label columns of a CSV/TSV/JSONL file, and
    `regression`; `has_pairs`: inputs are text pairs; `both_orders`: each pair is encoded
    in both orders and the two scores added (a fine-tuning recipe's similarity rule,
    bertkit.model.recipes.FinetuningRecipe.fit_spec). Tagging: `scheme` of the training
    file (IOB1 / IOB2 / IOBES; predictions are written in it) and `tag_column`. QA:
    `squad_version` (1 or 2), the window settings, the answer-length and n-best limits,
    and `null_threshold` (v2.0: answer when null score - best span score <= it);
    `qa_metric`: "squad" / "korquad" answer comparison, None: from each scored file's
    version string (KorQuAD_v1.0_... -> korquad). Text-to-text (bertkit.tasks.text2text):
    `text2text_task` (glue / squad / ner / pairs, with glue_task, tag_column or the pairs'
    `source_field` / `target_field`), `max_target_length` (target tokens, EOS included;
    the longest generated) and `num_beams` (dev decoding).
    """

    family: str
    glue_task: str | None = None
    text_column: str | None = None
    pair_column: str | None = None
    label_column: str | None = "label"
    regression: bool = False
    has_pairs: bool = False
    both_orders: bool = False
    scheme: str | None = None
    tag_column: int = -1
    max_seq_length: int = 128
    squad_version: int | None = None
    doc_stride: int = 128
    max_query_length: int = 64
    max_answer_length: int = 30
    n_best_size: int = 20
    null_threshold: float = 0.0
    qa_metric: str | None = None
    text2text_task: str | None = None
    source_field: str = "input"
    target_field: str = "output"
    max_target_length: int | None = None
    num_beams: int = 1

    def save(self, directory: Path) -> None:
        write_text_atomic(Path(directory) / TASK_FILE, json.dumps(dataclasses.asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, directory: str | Path, config) -> "TaskSpec":
        """The spec saved with a checkpoint, or one inferred from config.json's architecture
        (a model fine-tuned elsewhere, e.g. with transformers)."""
        path = Path(directory) / TASK_FILE
        if path.is_file():
            try:
                values = json.loads(path.read_text(encoding="utf-8"))
                known = {f.name for f in dataclasses.fields(cls)}
                return cls(**{k: v for k, v in values.items() if k in known})
            except (json.JSONDecodeError, TypeError, UnicodeDecodeError) as exc:
                raise BertkitError(f"{path}: not a valid task description ({exc})") from None
        from bertkit.model.families import architecture_task_families

        known = architecture_task_families()  # e.g. BertForSequenceClassification -> classification
        architectures = config.extra.get("architectures") or []
        family = next((known[a] for a in architectures if a in known), None)
        if family is None:
            raise BertkitError(f"{directory}: not a fine-tuned model (config.json architectures: "
                               f"{', '.join(architectures) or 'none'}); {_expected_heads(config, known)}")
        from bertkit.tasks.registry import get_task_family

        entry = get_task_family(family)
        max_length = min(entry.max_seq_length or INFERRED_MAX_SEQ_LENGTH,
                         config.position_limit or INFERRED_MAX_SEQ_LENGTH)  # no limit: XLNet
        return cls(**{"family": family, "text_column": "text", "max_seq_length": max_length,
                      **entry.hook("spec_from_config")(config)})


# ---------------------------------------------------------------------------- data


@dataclass
class TaskData:
    """Examples of one file and their encoded features (feature k -> example via the family)."""

    path: str
    examples: list
    features: list[dict[str, Any]]
    scheme: str | None = None  # tagging: the file's own scheme (gold tags and output use it)
    stats: dict[str, int] = dataclasses.field(default_factory=dict)  # counts for the report (targets cut, ...)


def feature_length(feature: dict[str, Any]) -> int:
    """Tokens per sequence of a feature (the longest choice's for multiple choice)."""
    return int(np.shape(feature["input_ids"])[-1])


def call_model(model: nn.Module, inputs: dict[str, torch.Tensor], **targets):
    """The model on a batch's model inputs (`model_inputs`), targets and options by keyword: a
    task program's call unless it says otherwise (`TaskProgram.model_call`)."""
    return model(**inputs, **targets)


def both_orders_call(model: nn.Module, inputs: dict[str, torch.Tensor], labels: torch.Tensor | None = None,
                     **options):
    """A pair read in both orders (`TaskSpec.both_orders`). inputs (B, 2, T): each pair as (a, b)
    then (b, a) -> the model on the 2B sequences -> logits (B, K): the two orders' scores added,
    and the loss on them with `labels` (B,) (the config's problem type: MSE for a regression).
    With a classifier without bias (a recipe's that sets it, e.g. bertkit.model.gpt.finetuning)
    that is the classifier on the sum of the two sequences' states. Other outputs (hidden_states,
    for an auxiliary loss) are the 2B sequences', row-major as the inputs."""
    from bertkit.model.families import unwrap_model
    from bertkit.model.losses import problem_type, sequence_classification_loss

    out = model(**{name: value.flatten(0, 1) for name, value in inputs.items()}, **options)  # (2B, T) inputs
    logits = out.logits.view(-1, 2, out.logits.shape[-1]).sum(1)  # (B, K)
    loss = None
    if labels is not None:
        loss = sequence_classification_loss(logits, labels, problem_type(unwrap_model(model).config, labels))
    return dataclasses.replace(out, loss=loss, logits=logits)


def run_features(
    model: nn.Module,
    features: Sequence[dict[str, Any]],
    collate: Callable[[list[dict[str, Any]]], dict[str, torch.Tensor]],
    batch_size: int,
    progress: bool = False,
    desc: str = "eval",
    call: Callable[..., Any] = call_model,
) -> list[np.ndarray]:
    """The task scores of every feature, in input order, running batches sorted by length
    through `call` (the program's `model_call`); the scores are the output field the model's
    head names (bertkit.model.families `head_of_model`: `logits`, a double-heads model's `mc_logits`).

    Returns per feature: (K,) for sequence classification, (T_i, K) for tagging and
    (T_i, 2) start / end logits for QA (its own length, padding cut), (C,) for multiple
    choice; float32. Call under no_grad / inference_mode; the model's mode (eval) is the
    caller's business.
    """
    from tqdm.auto import tqdm

    order = np.argsort([feature_length(f) for f in features], kind="stable")[::-1]  # longest first
    device = next(model.parameters()).device
    scores = head_of_model(model).logits
    outputs: list[np.ndarray | None] = [None] * len(features)
    starts = range(0, len(order), batch_size)
    for start in tqdm(starts, desc=desc, unit="batch", leave=False, disable=not progress or None):
        rows = order[start : start + batch_size]
        batch = collate([features[i] for i in rows])
        out = call(model, model_inputs(model, batch, device))
        if getattr(out, "start_logits", None) is not None:  # QA: (B, T, 2)
            logits = torch.stack([out.start_logits, out.end_logits], dim=-1).float().cpu().numpy()
        else:
            logits = getattr(out, scores).float().cpu().numpy()
        for row, index in enumerate(rows):
            value = logits[row]
            if logits.ndim == 3:  # per token: (T, K), cut to the feature's own length
                value = value[: feature_length(features[index])]
            outputs[index] = value
    return outputs  # type: ignore[return-value]




# ---------------------------------------------------------------------------- base program


class TaskProgram(TrainingProgram):
    """What every family shares; subclasses give the family module, counts and metrics."""

    family = ""
    progress_keys = ("accuracy",)
    generates_text = False  # its models answer with generated text (text-to-text), not a head's scores

    def __init__(self, model: nn.Module, tokenizer, spec: TaskSpec, train_features: list[dict[str, Any]],
                 dev: TaskData | None, id2label: dict[int, str] | None, *, group_by_length: bool = False,
                 eval_batch_size: int = 64, progress: bool = True,
                 auxiliary_loss: AuxiliaryLoss | None = None):
        self.model = model
        self.tokenizer = tokenizer
        self.spec = spec
        self.train_features = train_features
        self.dev = dev
        self.id2label = id2label
        self.group_by_length = group_by_length
        self.eval_batch_size = eval_batch_size
        self.progress = progress
        self.auxiliary_loss = auxiliary_loss  # the model family's fine-tuning recipe's extra loss (None: none)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self._train_lengths = np.asarray([feature_length(f) for f in train_features])
        self.last_outputs: list[np.ndarray] | None = None
        self.best_outputs: list[np.ndarray] | None = None

    # ---- the family's module ------------------------------------------------------------
    @classmethod
    def task_family(cls):
        """The family's registry entry (bertkit.tasks.registry)."""
        from bertkit.tasks.registry import get_task_family

        return get_task_family(cls.family)

    @classmethod
    def module(cls):
        return cls.task_family().load_module()

    @classmethod
    def model_class(cls, config=None):
        """The head class for this task family: the config's model family's (BERT when no config)."""
        if config is None:
            return cls.module().model_class()
        from bertkit.model.families import task_model_class

        return task_model_class(config, cls.task_family().head_name)

    @classmethod
    def default_metric(cls, spec: TaskSpec) -> str:
        return "accuracy"

    # ---- data ---------------------------------------------------------------------------
    def num_train_examples(self) -> int:
        return len(self.train_features)

    def train_example(self, index: int, epoch: int) -> dict[str, Any]:
        return self.train_features[index]

    def collate(self, examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        return self.module().collate(examples, self.pad_id)

    def epoch_order(self, permutation: np.ndarray, epoch: int, global_batch: int) -> np.ndarray:
        if not self.group_by_length:
            return permutation
        chunk = LENGTH_GROUP_BATCHES * global_batch
        pieces = []
        for start in range(0, len(permutation), chunk):
            part = permutation[start : start + chunk]
            pieces.append(part[np.argsort(-self._train_lengths[part], kind="stable")])  # longest first
        return np.concatenate(pieces)

    # ---- loss ---------------------------------------------------------------------------
    @staticmethod
    def item_count(labels: torch.Tensor) -> float:
        """Labelled items in a micro-batch: sequences / questions, or tagged tokens."""
        if labels.is_floating_point():
            return float(labels.shape[0])
        return float((labels != IGNORE_INDEX).sum())

    def loss_counts(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        return {"task": self.item_count(batch["labels"])}

    @classmethod
    def model_call(cls, spec: TaskSpec) -> Callable[..., Any]:
        """How the family's model is called on a batch's model inputs for `spec`: `call_model`
        (a classification pair in both orders, ClassificationProgram)."""
        return call_model

    def forward(self, model, batch: dict[str, torch.Tensor], **targets):
        """The model's output on a collated batch (a program whose batches hold other
        inputs, e.g. cached features, overrides this)."""
        return self.model_call(self.spec)(model, model_inputs(model, batch), **targets)

    def compute_loss(self, model, batch, totals) -> tuple[torch.Tensor, dict[str, float]]:
        labels = batch["labels"]
        head = head_of_model(model)  # the head's target keyword and output fields (usually labels, loss, logits)
        extra = dict(self.auxiliary_loss.model_options) if self.auxiliary_loss else {}
        out = self.forward(model, batch, **{head.labels: labels}, **extra)
        task_loss, scores = getattr(out, head.loss), getattr(out, head.logits)
        count = self.item_count(labels)
        # task_loss is this micro-batch's mean over its items: times count / global count is its share
        loss = task_loss * (count / max(totals["task"], 1.0))
        stats = {"task_loss_sum": float(task_loss.detach()) * count, "task_count": count}
        if not labels.is_floating_point():
            valid = labels != IGNORE_INDEX
            stats["task_correct"] = float(((scores.detach().argmax(-1) == labels) & valid).sum())
        if self.auxiliary_loss:  # task + weight * extra (its mean per micro-batch, weighted as the task's)
            extra_loss, extra_count = self.auxiliary_loss.compute(model, out, batch)
            loss = loss + self.auxiliary_loss.weight * extra_loss * (count / max(totals["task"], 1.0))
            name = self.auxiliary_loss.name
            stats.update({f"{name}_loss_sum": float(extra_loss.detach()) * extra_count, f"{name}_count": extra_count})
        return loss, stats

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        count = stats.get("task_count", 0.0)
        if not count:
            return {}
        metrics = {"task_loss": stats["task_loss_sum"] / count}
        if self.auxiliary_loss and stats.get(f"{self.auxiliary_loss.name}_count"):
            name = self.auxiliary_loss.name
            metrics[f"{name}_loss"] = stats[f"{name}_loss_sum"] / stats[f"{name}_count"]
        if "task_correct" in stats:
            metrics["accuracy"] = percent(stats["task_correct"], count)
        return metrics

    # ---- evaluation ----------------------------------------------------------------------
    def evaluate(self, model: nn.Module, ctx, batch_size: int, max_batches: int | None) -> dict[str, float]:
        if self.dev is None:
            return {}
        show = self.progress and ctx.is_main
        self.last_outputs = run_features(model, self.dev.features, self.collate, self.eval_batch_size, show, "dev",
                                         self.model_call(self.spec))
        return self.metrics(self.dev, self.last_outputs)

    @classmethod
    def infer(cls, model: nn.Module, tokenizer, spec: TaskSpec, features: list[dict[str, Any]], batch_size: int,
              progress: bool = False) -> list:
        """The per-feature outputs the family's metrics and `predict` read: logits (`run_features`)
        here, generated text for a text-to-text family. Call under no_grad / inference_mode."""
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        return run_features(model, features, lambda batch: cls.module().collate(batch, pad_id), batch_size,
                            progress, "predict", cls.model_call(spec))

    def on_evaluate(self, step: int, metrics: dict[str, float], improved: bool) -> None:
        if improved:
            self.best_outputs = self.last_outputs

    def metrics(self, data: TaskData, outputs: list[np.ndarray]) -> dict[str, float]:
        """Official metrics of `outputs` (from `run_features`) against `data`'s labels."""
        return metrics_for(self.spec, data, outputs, self.id2label)

    # ---- saving -----------------------------------------------------------------------------
    def save_pretrained(self, model: nn.Module, directory: Path, state_dict=None) -> None:
        model.save_pretrained(directory, state_dict=state_dict)
        self.tokenizer.save_pretrained(directory)
        self.spec.save(directory)

    # ---- reading and encoding (class-level: evaluate and predict use them too) --------------
    @classmethod
    def read(cls, path: str, spec: TaskSpec, labels_path: str | None = None, training: bool = False) -> list:
        """Examples of a file (`training`: the training file; QA then checks answer offsets)."""
        raise NotImplementedError

    @classmethod
    def fit_spec(cls, spec: TaskSpec, train_examples: list) -> TaskSpec:
        """The spec completed from the training data (e.g. the tagging scheme)."""
        return spec

    @classmethod
    def label_names(cls, spec: TaskSpec, train: list, dev: list, checkpoint_label2id: dict[str, int] | None,
                    origin: str, train_path: str) -> list[str] | None:
        """Label names in id order (None: no label map, e.g. regression or multiple choice).

        A checkpoint label map (`checkpoint_label2id` from `origin`; None for none or
        LABEL_i placeholders) that covers the train and dev labels is kept, one that does
        not raises naming the first example it lacks. Otherwise the map comes from the
        task (GLUE's fixed lists) or the training examples, and a dev label outside it
        raises naming the dev file and line."""
        return None

    @classmethod
    def encode(cls, data_path: str, examples: list, tokenizer, spec: TaskSpec,
               label2id: dict[str, int] | None, progress: bool = False, training: bool = False) -> TaskData:
        """Features of `examples` (`training`: for the loss; QA's evaluation features differ)."""
        raise NotImplementedError

    @classmethod
    def check_labelled(cls, data: TaskData) -> None:
        if not data.features or "labels" not in data.features[0]:
            raise BertkitError(f"{data.path}: no labels (an unlabelled test file?); scoring needs a labelled file")


# ---------------------------------------------------------------------------- classification


class ClassificationProgram(TaskProgram):
    """Sequence classification / regression on [CLS]: GLUE and any labelled table."""

    family = CLASSIFICATION

    @classmethod
    def default_metric(cls, spec: TaskSpec) -> str:
        """The paper's headline metric: MCC (CoLA), F1 (MRPC, QQP), Spearman (STS-B), else accuracy."""
        if spec.glue_task:
            from bertkit.evaluation.metrics import glue_task_name

            return {"cola": "mcc", "ax": "mcc", "mrpc": "f1", "qqp": "f1", "stsb": "spearmanr"}.get(
                glue_task_name(spec.glue_task), "accuracy")
        return "pearson" if spec.regression else "accuracy"

    @property
    def progress_keys(self):  # type: ignore[override]
        return () if self.spec.regression else ("accuracy",)

    @classmethod
    def model_call(cls, spec: TaskSpec) -> Callable[..., Any]:
        """A pair encoded in both orders (`spec.both_orders`): the two orders' scores added."""
        if spec.both_orders:
            return both_orders_call
        return call_model

    @classmethod
    def read(cls, path: str, spec: TaskSpec, labels_path: str | None = None, training: bool = False) -> list:
        module = cls.module()
        if spec.glue_task:
            return module.read_examples(path, glue_task=spec.glue_task)
        return module.read_examples(path, text_column=spec.text_column, pair_column=spec.pair_column,
                                    label_column=spec.label_column, regression=spec.regression)

    @classmethod
    def fit_spec(cls, spec: TaskSpec, train_examples: list) -> TaskSpec:
        regression = spec.regression or any(isinstance(ex.label, float) for ex in train_examples)
        return dataclasses.replace(spec, has_pairs=train_examples[0].pair is not None, regression=regression)

    @classmethod
    def label_names(cls, spec, train, dev, checkpoint_label2id, origin, train_path):
        module = cls.module()
        if spec.regression:
            return None
        if spec.glue_task:
            checkpoint_label2id = module.glue_label_map(spec.glue_task, checkpoint_label2id)
        kept = module.check_label_map(checkpoint_label2id, train + dev, origin)
        if kept is not None:
            return [name for name, _ in sorted(kept.items(), key=lambda item: item[1])]
        if spec.glue_task:
            return module.glue_labels(spec.glue_task)
        label_map = module.build_label_map(train)
        module.check_labels(dev, label_map, f"the training file {train_path}")
        return list(label_map)

    @classmethod
    def encode(cls, data_path, examples, tokenizer, spec, label2id, progress=False, training=False) -> TaskData:
        features = cls.module().encode(examples, tokenizer, spec.max_seq_length, None if spec.regression else label2id,
                                       show_progress=progress, both_orders=spec.both_orders)
        return TaskData(data_path, examples, features)




# ---------------------------------------------------------------------------- tagging


class TaggingProgram(TaskProgram):
    """Token tagging (NER): the label of each word on its first sub-token."""

    family = TAGGING

    @classmethod
    def default_metric(cls, spec: TaskSpec) -> str:
        return "f1"

    @classmethod
    def read(cls, path: str, spec: TaskSpec, labels_path: str | None = None, training: bool = False) -> list:
        return cls.module().read_examples(path, tag_column=spec.tag_column)

    @classmethod
    def fit_spec(cls, spec: TaskSpec, train_examples: list) -> TaskSpec:
        return dataclasses.replace(spec, scheme=cls.module().detect_scheme(train_examples))

    @classmethod
    def label_names(cls, spec, train, dev, checkpoint_label2id, origin, train_path):
        module = cls.module()
        scheme = spec.scheme or "IOB2"
        kept = module.check_label_map(checkpoint_label2id, train, scheme, origin)
        if kept is not None and dev:
            module.check_label_map(checkpoint_label2id, dev, cls.file_scheme(dev, spec), origin)
        label_map = kept if kept is not None else module.build_label_map(train, scheme)
        if kept is None and dev:
            module._check_tags(dev, label_map, cls.file_scheme(dev, spec), f"the tags of the training file {train_path}")
        return [name for name, _ in sorted(label_map.items(), key=lambda item: item[1])]

    @classmethod
    def file_scheme(cls, examples: list, spec: TaskSpec) -> str:
        """A labelled file's own scheme (a model trained on IOB1 scores IOB2 files and the
        other way round); for unlabelled text the scheme the model was trained on."""
        if examples and examples[0].tags is not None:
            return cls.module().detect_scheme(examples)
        return spec.scheme or "IOB2"

    @classmethod
    def encode(cls, data_path, examples, tokenizer, spec, label2id, progress=False, training=False) -> TaskData:
        scheme = cls.file_scheme(examples, spec)
        features = cls.module().encode(examples, tokenizer, spec.max_seq_length, label2id, scheme=scheme,
                                       show_progress=progress)
        return TaskData(data_path, examples, features, scheme)




# ---------------------------------------------------------------------------- multiple choice


class MultipleChoiceProgram(TaskProgram):
    """One [CLS] score per (context, choice); softmax over the choices."""

    family = MULTIPLE_CHOICE

    @classmethod
    def read(cls, path: str, spec: TaskSpec, labels_path: str | None = None, training: bool = False) -> list:
        return cls.module().read_examples(path, labels_path=labels_path)

    @classmethod
    def encode(cls, data_path, examples, tokenizer, spec, label2id, progress=False, training=False) -> TaskData:
        features = cls.module().encode(examples, tokenizer, spec.max_seq_length, show_progress=progress)
        return TaskData(data_path, examples, features)

    @classmethod
    def check_labelled(cls, data: TaskData) -> None:
        if not data.features or "labels" not in data.features[0]:
            name = Path(data.path).name.split(".")[0]
            raise BertkitError(f"{data.path}: no labels (an unlabelled test file?); labels kept in a separate file "
                               f"(PIQA) go beside it as {name}-labels.lst, or give --train-labels / --dev-labels "
                               "(evaluate: --labels) FILE")



# ---------------------------------------------------------------------------- question answering


class QuestionAnsweringProgram(TaskProgram):
    """Extractive QA (SQuAD v1.1 / v2.0): start and end scores per token, windows over long passages."""

    family = QA
    progress_keys = ()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.last_threshold = self.spec.null_threshold

    @classmethod
    def default_metric(cls, spec: TaskSpec) -> str:
        return "f1"

    @classmethod
    def read(cls, path: str, spec: TaskSpec, labels_path: str | None = None, training: bool = False) -> list:
        return cls.module().read_examples(path, spec.squad_version or "auto", training=training)

    @classmethod
    def fit_spec(cls, spec: TaskSpec, train_examples: list) -> TaskSpec:
        version = spec.squad_version or (2 if any(ex.is_impossible for ex in train_examples) else 1)
        return dataclasses.replace(spec, squad_version=version)

    @classmethod
    def encode(cls, data_path, examples, tokenizer, spec, label2id, progress=False, training=False) -> TaskData:
        features = cls.module().encode(examples, tokenizer, spec.max_seq_length, doc_stride=spec.doc_stride,
                                       max_query_length=spec.max_query_length, training=training,
                                       show_progress=progress)
        return TaskData(data_path, examples, features)

    @classmethod
    def check_labelled(cls, data: TaskData) -> None:
        return None  # read_examples already requires answers (v1.1) or marks questions unanswerable (v2.0)

    def loss_counts(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        return {"task": float(batch["start_positions"].shape[0])}

    def compute_loss(self, model, batch, totals) -> tuple[torch.Tensor, dict[str, float]]:
        starts, ends = batch["start_positions"], batch["end_positions"]
        out = model(**model_inputs(model, batch), start_positions=starts, end_positions=ends)
        count = float(starts.shape[0])
        loss = out.loss * (count / max(totals["task"], 1.0))  # out.loss: mean over the micro-batch's windows
        both = (out.start_logits.detach().argmax(-1) == starts) & (out.end_logits.detach().argmax(-1) == ends)
        return loss, {"task_loss_sum": float(out.loss.detach()) * count, "task_count": count,
                      "task_correct": float(both.sum())}

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        metrics = super().summarize(stats)
        if "accuracy" in metrics:
            metrics["span_accuracy"] = metrics.pop("accuracy")  # windows whose start and end are both right
        return metrics

    def metrics(self, data: TaskData, outputs: list[np.ndarray]) -> dict[str, float]:
        values, threshold = qa_metrics(self.spec, data, outputs)
        self.last_threshold = threshold
        return values

    def save_pretrained(self, model: nn.Module, directory: Path, state_dict=None) -> None:
        model.save_pretrained(directory, state_dict=state_dict)
        self.tokenizer.save_pretrained(directory)
        # the threshold of the evaluation just made: best/ is written right after it
        dataclasses.replace(self.spec, null_threshold=float(self.last_threshold)).save(directory)





def get_program(family: str) -> type[TaskProgram]:
    """The program class of a task family (aliases too: glue, ner, ...; bertkit.tasks.registry)."""
    from bertkit.tasks.registry import get_task_family

    return get_task_family(family).program_class()


def metrics_for(spec: TaskSpec, data: TaskData, outputs: list[np.ndarray], id2label: dict[int, str] | None):
    """The family's official metrics of `outputs` on `data` (its `metrics` hook; `bertkit evaluate`)."""
    from bertkit.tasks.registry import get_task_family

    return get_task_family(spec.family).hook("metrics")(spec, data, outputs, id2label)


def _expected_heads(config, known: dict[str, str]) -> str:
    """What a fine-tuned checkpoint of `config`'s family would be, for the not-fine-tuned error: its own
    family's head classes (every family's when the model type is unknown), or, for a family without
    heads (ELMo), the frozen-features way."""
    from bertkit.model.families import MODEL_FAMILIES

    family = MODEL_FAMILIES.get(getattr(config, "model_type", None) or "")
    if family is not None and not family.tasks:
        return (f"{family.model_type} models have no task heads: their layers feed a task frozen "
                "(bertkit finetune ner or classify with --features scalar_mix)")
    heads = [family.task_head(task).class_name for task in family.tasks] if family is not None else list(known)
    return f"expected one of {', '.join(heads)} — fine-tune it first with `bertkit finetune`"
