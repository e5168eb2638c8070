"""What every pre-training objective shares: data access, settings, batches, evaluation.

An objective is a `TrainingProgram` over a built data directory (bertkit.data). A new
objective subclasses `PretrainingObjective` (or `MaskedLMObjective`, which masks with a
`Masker`, for a masked-LM-style one) and declares, in its own file:
- `data_formats`: the instance formats it trains on (names of bertkit.data.formats);
- `settings_class`: its own settings (bertkit.objectives.settings), which it receives as
  `self.settings` and `build_model(config, settings=...)`;
- `example` (what one example holds) and `collate` (what a batch holds);
- its model (`model_class`, or `build_model` / `load_model`) and its loss
  (`loss_counts`, `compute_loss`, `summarize`);
then it gets one line in `bertkit.objectives.OBJECTIVES`.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from bertkit.model.bert.config import BertConfig
from bertkit.data.collate import collate
from bertkit.data.dataset import PretrainingDataset
from bertkit.data.masking import Masker, MaskingConfig, example_rng
from bertkit.errors import BertkitError
from bertkit.evaluation.metrics import percent
from bertkit.model.families import model_inputs
from bertkit.model.losses import IGNORE_INDEX
from bertkit.model.static_shapes import set_prediction_budget
from bertkit.objectives.settings import ObjectiveSettings
from bertkit.pretrained_config import PretrainedConfig
from bertkit.training.config import EVAL_SEED
from bertkit.training.distributed import DistContext, all_reduce_max, all_reduce_sum, all_reduce_tensor
from bertkit.training.program import TrainingProgram
from bertkit.training.step_sums import add_into, read_sums

BASELINE_EXAMPLES = 2_000  # training examples whose targets' frequencies make the unigram baseline
EVAL_EPOCH = 0  # held-out masks: the epoch-0 draw of the held-out split, the same at every evaluation


class PretrainingObjective(TrainingProgram):
    name = ""
    data_formats: tuple[str, ...] = ("nsp", "packed", "sop")  # instance formats this objective trains on
    settings_class: type[ObjectiveSettings] = ObjectiveSettings  # its own settings (none by default)
    config_class = BertConfig  # the model config a preset becomes (another family's config for other families)
    model_class: type[nn.Module] | None = None  # what the default build_model / load_model make
    # why the objective needs data built with --masking dynamic (it masks as it loads, or not at
    # all), completing "objective X ..."; None: static masks are fine
    needs_dynamic_masking: str | None = None

    def __init__(self, model: nn.Module, train: PretrainingDataset, eval_data: PretrainingDataset | None,
                 masking: MaskingConfig, seed: int, eval_seed: int = EVAL_SEED,
                 settings: ObjectiveSettings | None = None):
        """`seed` draws the training examples' random choices (masks); `eval_seed` the held-out
        ones (and any other random choice of an evaluation), so runs of different seeds or
        objectives score the same tokens. `masking` is the run's masking, for the objectives
        that mask; `settings` the objective's own (its `settings_class`; None: the defaults)."""
        self.model = model
        self.train = train
        self.eval_data = eval_data
        self.seed = seed
        self.eval_seed = eval_seed
        self.settings = settings if settings is not None else self.settings_class()
        if not isinstance(self.settings, self.settings_class):
            raise TypeError(f"objective {self.name!r} takes {self.settings_class.__name__}, "
                            f"got {type(self.settings).__name__}")
        self.tokenizer = train.tokenizer()
        self._baseline: dict[str, float] | None = None  # held_out_baseline, once counted
        self.check_data(train)
        self.pad_id = train.info.pad_token_id

    # ---- models -----------------------------------------------------------------------
    @classmethod
    def run_options(cls, run_config: Any) -> dict[str, Any]:
        """Keyword arguments from the run's PretrainConfig for `build_model` and the
        constructor: the objective's settings from `run_config.objective_settings`."""
        return {"settings": cls.settings_class().updated(run_config.objective_settings, cls.name)}

    @classmethod
    def model_family(cls, preset: str | None = None):
        """The model family this objective trains (its `config_class`'s; an objective whose family
        follows from the preset, as clm's, overrides this): its registry entry holds the recipes."""
        from bertkit.model.families import get_model_family

        model_type = next(f.default for f in dataclasses.fields(cls.config_class) if f.name == "model_type")
        return get_model_family(model_type)

    @classmethod
    def preset_names(cls) -> list[str]:
        """The sizes `--preset` offers this objective: its `config_class`'s presets (an objective
        whose family follows from the preset, as clm's, lists its families')."""
        return list(cls.config_class.presets)

    @classmethod
    def model_config(cls, preset: str, data: PretrainingDataset, overrides: dict[str, Any],
                     settings: ObjectiveSettings | None = None) -> PretrainedConfig:
        """The `config_class` config of a fresh run: the named `preset` sized for `data`'s
        tokenizer (vocabulary, pad id) and length, `overrides` (the run's `model` fields) on
        top. A family without a position table (XLNet), with options of its own, or whose
        model needs more of the tokenizer (T5's EOS) overrides this."""
        info = data.info
        return preset_config(preset, info.vocab_size, info.max_seq_length, info.pad_token_id, overrides,
                             config_class=cls.config_class)

    @classmethod
    def build_model(cls, config: BertConfig, settings: ObjectiveSettings | None = None) -> nn.Module:
        """A fresh `model_class` for `config`."""
        if cls.model_class is None:
            raise NotImplementedError
        return cls.model_class(config)

    @classmethod
    def load_model(cls, directory: Path) -> nn.Module:
        """The checkpoint at `directory` as `model_class`, in training mode."""
        if cls.model_class is None:
            raise NotImplementedError
        model = cls.model_class.from_pretrained(directory)
        model.train()
        return model

    def save_pretrained(self, model: nn.Module, directory: Path, state_dict=None) -> None:
        model.save_pretrained(directory, state_dict=state_dict)
        self.tokenizer.save_pretrained(directory)

    # ---- data ---------------------------------------------------------------------------
    @classmethod
    def check_data(cls, data: PretrainingDataset) -> None:
        fmt = data.info.instance_format
        if fmt not in cls.data_formats:
            raise BertkitError(
                f"{data.directory}: built as {fmt!r} instances, but objective {cls.name!r} needs "
                f"{' or '.join(repr(f) for f in cls.data_formats)} (rebuild it: its bertkit data build command "
                f"with --format {cls.data_formats[0]})"
            )
        if cls.needs_dynamic_masking is not None and data.info.masking != "dynamic":
            raise BertkitError(f"{data.directory}: masked at build time (static), but objective {cls.name!r} "
                               f"{cls.needs_dynamic_masking}: rebuild with bertkit data build --masking dynamic")

    def num_train_examples(self) -> int:
        return len(self.train)

    def example(self, data: PretrainingDataset, index: int, epoch: int, seed: int) -> dict[str, Any]:
        """Instance `index` of `data` as this objective trains on it in `epoch`: its inputs and
        targets, any random choice drawn from (seed, epoch, index) alone."""
        raise NotImplementedError

    def train_example(self, index: int, epoch: int) -> dict[str, Any]:
        return self.example(self.train, index, epoch, self.seed)

    def collate(self, examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """What a batch holds: the examples' arrays padded and stacked (bertkit.data.collate)."""
        return collate(examples, self.pad_id)

    # ---- evaluation ------------------------------------------------------------------------
    def evaluate(self, model: nn.Module, ctx: DistContext, batch_size: int, max_batches: int | None) -> dict[str, float]:
        """Held-out metrics on masks drawn from `eval_seed` (the same at every evaluation and in
        every run that shares it), each rank taking every world_size-th batch."""
        num_examples = self.num_eval_examples()
        if num_examples == 0:
            return {}
        starts = list(range(0, num_examples, batch_size))
        if max_batches is not None:
            starts = starts[:max_batches]
        stats: dict[str, Any] = {}
        counts = [] if self._baseline is None else None  # the held-out targets, counted once per run
        device = next(model.parameters()).device
        # every rank runs the same number of forwards (sharded models gather weights in each
        # one); a rank with no batch left repeats its last and does not count it
        rounds = -(-len(starts) // ctx.world_size)
        for round_index in range(rounds):
            position = round_index * ctx.world_size + ctx.rank
            start = starts[min(position, len(starts) - 1)]
            indices = range(start, min(start + batch_size, num_examples))
            batch = self.collate([self.eval_example(i) for i in indices])
            batch = {k: v.to(device) for k, v in batch.items()}
            _, batch_stats = self.compute_loss(model, batch, {k: 1.0 for k in self.loss_counts(batch)})
            if position < len(starts):
                add_into(stats, batch_stats)
                if counts is not None:
                    counts.append(self.held_out_targets(batch))
        metrics = self.summarize(all_reduce_sum(read_sums(stats), ctx))
        if counts is not None:
            self._baseline = held_out_baseline(self._training_targets(batch_size), counts, ctx)
        if metrics:
            metrics.update(self._baseline or {})
        return metrics

    def _training_targets(self, batch_size: int, examples: int = BASELINE_EXAMPLES) -> list[torch.Tensor | None]:
        """The targets of up to `examples` training examples spread evenly over the training data (epoch 0):
        the frequencies a model that learned only frequencies would have learnt."""
        total = self.num_train_examples()
        indices = sorted({int(i) for i in np.linspace(0, total - 1, num=min(examples, total))}) if total else []
        return [self.held_out_targets(self.collate([self.baseline_example(i) for i in indices[start:start + batch_size]]))
                for start in range(0, len(indices), batch_size)]

    def baseline_example(self, index: int) -> dict[str, Any]:
        """Training example `index` as the unigram baseline counts it: drawn from `eval_seed` (not the run's seed),
        so runs of different seeds report the same baseline."""
        return self.example(self.train, index, EVAL_EPOCH, self.eval_seed)

    def held_out_targets(self, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """The token ids a held-out batch's loss scores, (N,), for the unigram baseline
        (`unigram_loss`); the base: `labels` where set. None: the objective reports none."""
        labels = batch.get("labels")
        return None if labels is None else labels[labels != IGNORE_INDEX]

    def num_eval_examples(self) -> int:
        """Held-out examples (0 without a held-out split); an objective that cuts its own examples
        from the data (T5's raw chunks) counts those."""
        return 0 if self.eval_data is None else len(self.eval_data)

    def eval_example(self, index: int) -> dict[str, Any]:
        """Held-out example `index` as every evaluation scores it: masked from `eval_seed`, so the
        same in every run that shares it (NSP / SOP labels were fixed when the data were built)."""
        return self.example(self.eval_data, index, EVAL_EPOCH, self.eval_seed)

    def evaluation_details(self) -> dict[str, Any]:
        return {"eval_seed": self.eval_seed}

    def describe_masking(self, run_config: Any) -> str:
        """How training examples are masked or corrupted, for a run's report."""
        return f"{run_config.masking}, {run_config.mlm_probability:.0%}"

    def describe_eval_masks(self) -> str:
        """Where the held-out masks come from, for a run's report."""
        if self.eval_data is not None and self.eval_data.info.masking == "static":
            return "stored at build time"
        return f"drawn from eval_seed {self.eval_seed}"



class MaskedLMObjective(PretrainingObjective):
    """An objective that trains on masked text: the run's `Masker` is its tool. Dynamic data
    gets a fresh mask per (seed, epoch, index); data masked at build time keeps its labels."""

    def __init__(self, model: nn.Module, train: PretrainingDataset, eval_data: PretrainingDataset | None,
                 masking: MaskingConfig, seed: int, eval_seed: int = EVAL_SEED,
                 settings: ObjectiveSettings | None = None):
        super().__init__(model, train, eval_data, masking, seed, eval_seed, settings)
        self.masker = Masker.from_tokenizer(masking, self.tokenizer)

    def fix_shapes(self, model: nn.Module) -> None:
        """A compiled step reads a fixed `Masker.max_predictions(max_seq_length)` rows per
        sequence (20 of 128 at 15%); data masked at build time keeps the eager count (its
        masks were drawn by another masker)."""
        if self.train.info.masking != "static":
            set_prediction_budget(model, self.masker.max_predictions(self.train.info.max_seq_length))

    def example(self, data: PretrainingDataset, index: int, epoch: int, seed: int) -> dict[str, Any]:
        example = dict(data[index])
        if "labels" not in example:  # dynamic masking: a fresh mask per epoch
            example["input_ids"], example["labels"] = self.masker(example["input_ids"], example_rng(seed, epoch, index))
        return example


def held_out_baseline(training: list[torch.Tensor | None], held_out: list[torch.Tensor | None],
                      ctx: DistContext) -> dict[str, float]:
    """What a model that learned only the targets' frequencies scores on the held-out targets, counted over
    every rank's held-out batches: `unigram_loss`, their cross-entropy (nats per token) under the training
    targets' frequencies (add-one smoothed over the ids seen in either), and `majority_accuracy`, the share
    (%) of held-out targets equal to the most frequent training target. Empty when the objective names
    no targets. (The entropy of the held-out targets' own distribution would be an in-sample figure,
    ~1 nat too low on a 2,000-token held-out split.)"""
    if not training or not held_out or any(t is None for t in (*training, *held_out)):
        return {}
    seen = torch.cat([t.reshape(-1).long().cpu() for t in training])
    scored = torch.cat([t.reshape(-1).long().cpu() for t in held_out])
    size = int(max(seen.max(), scored.max())) + 1 if seen.numel() and scored.numel() else 1
    if ctx.enabled:  # every rank's vocabulary extent, then its held-out counts
        size = int(all_reduce_max(size, ctx))
    held_counts = torch.bincount(scored, minlength=size).double()
    if ctx.enabled:
        held_counts = all_reduce_tensor(held_counts, ctx)
    train_counts = torch.bincount(seen, minlength=size).double()
    total = float(held_counts.sum())
    if not total or not float(train_counts.sum()):
        return {}
    support = (train_counts + held_counts) > 0
    smoothed = (train_counts + 1.0) * support
    log_p = (smoothed / smoothed.sum()).clamp_min(1e-300).log()
    loss = float(-(held_counts * log_p).sum() / total)
    return {"unigram_loss": loss, "majority_accuracy": percent(float(held_counts[int(train_counts.argmax())]), total)}


def mlm_statistics(logits: torch.Tensor, labels: torch.Tensor, mean_loss: torch.Tensor) -> dict[str, Any]:
    """Summable MLM stats from sparse logits (N, V) at the labelled positions of `labels` (B, T):
    the count a number, the loss sum and correct count 0-d tensors on the device (read when
    logged, bertkit.training.step_sums)."""
    targets = labels[labels != IGNORE_INDEX]
    count = targets.numel()
    if not count:
        return {"mlm_loss_sum": 0.0, "mlm_correct": 0.0, "mlm_count": 0.0}
    # a compiled step's static rows (bertkit.model.static_shapes) hold the labelled ones first, then fillers
    correct = (logits.detach()[:count].argmax(dim=-1) == targets).sum()
    return {"mlm_loss_sum": mean_loss.detach().float() * count, "mlm_correct": correct, "mlm_count": float(count)}


def mlm_metrics(stats: dict[str, float]) -> dict[str, float]:
    count = stats.get("mlm_count", 0.0)
    if not count:
        return {}
    mean = stats["mlm_loss_sum"] / count
    return {"mlm_loss": mean, "mlm_accuracy": percent(stats["mlm_correct"], count), "mlm_perplexity": math.exp(min(mean, 50.0))}


def preset_config(preset: str, vocab_size: int, max_seq_length: int, pad_token_id: int, overrides: dict[str, Any],
                  config_class: type[PretrainedConfig] = BertConfig) -> PretrainedConfig:
    """A named size for a tokenizer's vocabulary; `overrides` are fields of `config_class`.
    The vocabulary size, position-table size and padding id are set where the config has
    such a field (XLNet's relative encodings need no position table)."""
    values = {"vocab_size": vocab_size, "max_position_embeddings": max(512, max_seq_length), "pad_token_id": pad_token_id}
    fields = {f.name for f in dataclasses.fields(config_class)}
    values = {name: value for name, value in values.items() if name in fields}
    return config_class.from_preset(preset, **{**values, **overrides})


def sequence_counts(labels: torch.Tensor) -> float:
    return float((labels != IGNORE_INDEX).sum())


class TargetTokensLoss:
    """The loss of an encoder-decoder objective (T5's span corruption, BART's denoising): the
    model's mean cross-entropy over the target tokens (`labels` != -100, fed to the decoder
    shifted right), weighted by the batch's share of the step's targets; token accuracy and
    perplexity as metrics. A mixin beside `PretrainingObjective`."""

    progress_keys = ("token_accuracy",)
    plot_panels = [("Loss", ["loss", "eval_loss"]), ("Target token accuracy", ["token_accuracy", "eval_token_accuracy"])]

    def loss_counts(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        return {"targets": sequence_counts(batch["labels"])}

    def compute_loss(self, model, batch, totals) -> tuple[torch.Tensor, dict[str, Any]]:
        labels = batch["labels"]
        out = model(**model_inputs(model, batch), labels=labels)  # shifted right into the decoder's inputs
        target = labels != IGNORE_INDEX
        count = target.sum()  # statistics stay on the device until logged (bertkit.training.step_sums)
        correct = ((out.logits.detach().argmax(dim=-1) == labels) & target).sum()
        stats = {"target_loss_sum": out.loss.detach().float() * count, "target_correct": correct, "target_count": count}
        return out.loss * (count / max(totals["targets"], 1.0)), stats

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        count = stats.get("target_count", 0.0)
        if not count:
            return {}
        loss = stats["target_loss_sum"] / count
        return {"loss": loss, "token_accuracy": percent(stats["target_correct"], count),
                "perplexity": math.exp(min(loss, 50.0))}
