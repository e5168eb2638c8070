"""A fine-tuning run: a task family's data + a BERT checkpoint + the shared loop.

`finetune(config)` is what `bertkit finetune` calls. It reads and checks all the data
before anything is written (a bad row, a label outside the label set or a checkpoint
whose label map disagrees with the data fail in one line naming file and line), builds
the task model from any bertkit or Hugging Face BERT checkpoint (a head that the
checkpoint lacks, or whose labels differ, is initialised fresh and reported), trains
with evaluation every epoch, keeps the best dev model in `best/` and writes the report.

The recipe is the paper's (SPEC section 5): batch 32, lr 3e-5 (of 5e-5 / 3e-5 / 2e-5),
3 epochs, linear warm-up over the first 10% of steps then linear decay, dropout 0.1
(the checkpoint's config), weight decay 0.01, AdamW. An epoch is ceil(N / batch_size)
steps of the loop's endless stream, so the last batch of an epoch is filled from the
next epoch's permutation rather than being short. `grid_lrs` / `grid_epochs`
(`--grid`) run the paper's search — every lr in {5e-5, 3e-5, 2e-5} with every epoch
count in {2, 3, 4}, 9 runs, each with its own warm-up and decay — and keep the run
with the best dev score; the others keep their reports and metrics but not weights.

Run folder: `best/` (HF layout: config.json with id2label / label2id, model.safetensors,
tokenizer files, bertkit_task.json, best_metrics.json), `final/` (the last step),
`metrics.jsonl`, `loss.png`, `dev_<metric>.png`, `confusion_matrix.png`
(classification), `report.md`, `run_config.json`; with a grid, `grid/<run>/` per run
and `grid.jsonl`. Fine-tuning writes no `checkpoint-N` folders by default (runs are
short; `--set save_checkpoints=true` keeps them), and there is no --resume.

`features` (NER only) is the feature-based approach of the paper's Table 7: the encoder
stays frozen, its features are cached once in `prepare`, and a BiLSTM tagger trains on
them (bertkit.tasks.feature_tagger; best/ then holds the tagger and names the encoder).
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertkit.atomic import write_text_atomic
from bertkit.errors import BertkitError, ConfigError
from bertkit.model.recipes import PLAIN_FINETUNING, FinetuningRecipe
from bertkit.evaluation.metrics import axis_label, format_metric
from bertkit.tasks.registry import CLASSIFICATION
from bertkit.training.config import (
    RUN_CONFIG_FILE,
    TrainingConfig,
    apply_overrides,
    check_choice,
    parse_value,
    resolve_warmup_steps,
    validate_types,
)

GRID_FILE = "grid.jsonl"
PAPER_GRID_LRS = [5e-5, 3e-5, 2e-5]
PAPER_GRID_EPOCHS = [2, 3, 4]
FEATURE_BASED_LR = 1e-3  # `bertkit finetune ner --features`: the default lr of a fresh BiLSTM tagger
FEATURE_BASED_GRID_LRS = [2e-3, 1e-3, 5e-4]
_RUN_MARKERS = ("best", "final", "metrics.jsonl", "grid", "report.md")


@dataclass
class FinetuneConfig(TrainingConfig):
    """A fine-tuning run: the loop's fields (with the paper's defaults) plus data and task.

    `max_steps`, `warmup_steps`, `eval_steps` and `save_steps` left None are derived:
    epochs x steps per epoch, `warmup_ratio` of that, and one epoch. `metric_for_best`
    None is the task's headline metric. `model` holds BertConfig overrides
    (`--set model.hidden_dropout_prob=0.2`)."""

    # loop fields with fine-tuning defaults
    max_steps: int | None = None
    batch_size: int = 32
    lr: float = 3e-5
    warmup_steps: int | None = None
    eval_steps: int | None = None
    save_steps: int | None = None
    save_total_limit: int = 1
    save_checkpoints: bool = False
    # task and data
    family: str = CLASSIFICATION  # a task family of bertkit.tasks.registry
    init_from: str = ""
    output_dir: str = ""
    train: str = ""
    dev: str | None = None
    glue_task: str | None = None
    text_column: str | None = None
    pair_column: str | None = None
    label_column: str | None = "label"
    regression: bool = False
    tag_column: int = -1
    train_labels: str | None = None  # multiple choice: labels in a separate file (PIQA)
    dev_labels: str | None = None
    squad_version: int | None = None  # QA: 1 or 2; None: from the training file
    doc_stride: int = 128  # QA: tokens shared by consecutive windows of a long passage
    max_query_length: int = 64  # QA: questions are cut to this many tokens
    max_answer_length: int = 30  # QA: longest answer span in tokens
    n_best_size: int = 20  # QA: candidate spans kept per question
    text2text_task: str | None = None  # text-to-text: glue / squad / ner / pairs (bertkit.tasks.text2text)
    source_field: str = "input"  # text-to-text pairs: the fields (columns) of source and target
    target_field: str = "output"
    max_target_length: int | None = None  # text-to-text: target tokens (EOS included); None: the longest target
    num_beams: int = 1  # text-to-text: dev decoding (1: greedy)
    # recipe
    epochs: int = 3
    warmup_ratio: float = 0.1
    max_seq_length: int = 128
    max_train_samples: int | None = None  # the first N training examples only (transformers' example scripts' flag)
    max_eval_samples: int | None = None  # the first N dev examples only
    group_by_length: bool = False  # True: length-grouped batches (costs quality; see tasks/programs.py)
    eval_batch_size: int = 64
    reinit_head: bool = False  # ignore the checkpoint's head and label map: always a fresh head
    grid_lrs: list | None = None
    grid_epochs: list | None = None
    # read by a model family's fine-tuning recipe (bertkit.model.recipes.FinetuningRecipe, whose
    # `defaults` a run of the family starts from; set for a family whose recipe reads none: an error):
    # an auxiliary LM loss's weight, dropout on the classifier's input (None: the model's own), and
    # each pair read in both orders with the two scores added (None: the recipe's rule)
    lm_coef: float = 0.0
    classifier_dropout: float | None = None
    both_orders: bool | None = None
    model: dict = field(default_factory=dict)
    # the feature-based approach (tagging only, bertkit.tasks.feature_tagger): a frozen encoder's
    # `features` (a bertkit.embed layer choice) feed a BiLSTM tagger; set lr too (the CLI's default is 1e-3)
    features: str | None = None
    lstm_hidden_size: int = 256
    lstm_num_layers: int = 2
    feature_cache: str = "auto"  # memory | disk (a memmap under the run folder) | auto (memory up to 2 GiB)
    feature_cache_dtype: str = "float16"

    def __post_init__(self) -> None:
        validate_types(self)
        from bertkit.tasks.registry import get_task_family, task_family_names

        check_choice("family", self.family, task_family_names())
        for name in ("epochs", "max_seq_length", "eval_batch_size", "max_query_length", "max_answer_length",
                     "n_best_size", "num_beams", "max_target_length", "max_train_samples", "max_eval_samples"):
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                raise ConfigError(f"field {name!r} must be positive, got {getattr(self, name)}")
        if self.max_seq_length < 8:
            raise ConfigError(f"field 'max_seq_length' must be at least 8, got {self.max_seq_length}")
        for name, number in (("grid_lrs", float), ("grid_epochs", int)):
            values = getattr(self, name)
            if values is None:
                continue
            if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values):
                raise ConfigError(f"field {name!r} must be a non-empty list of positive numbers, got {values!r}")
            if number is int and not all(float(v).is_integer() for v in values):
                raise ConfigError(f"field {name!r} must list whole numbers of epochs, got {values!r}")
        if self.features is not None:
            from bertkit.feature_choices import LAYER_CHOICES

            check_choice("features", self.features, LAYER_CHOICES)
            if get_task_family(self.family).feature_program is None:
                raise ConfigError(f"field 'features': the feature-based approach is for NER (tagging) and "
                                  f"classification, not {self.family}")
        if self.text2text_task is not None:
            from bertkit.tasks.registry import TEXT2TEXT_TASKS as TASKS

            check_choice("text2text_task", self.text2text_task, TASKS)
        check_choice("feature_cache", self.feature_cache, ("auto", "memory", "disk"))
        check_choice("feature_cache_dtype", self.feature_cache_dtype, ("float16", "float32"))
        if self.lm_coef < 0:
            raise ConfigError(f"field 'lm_coef' must be >= 0, got {self.lm_coef}")
        if self.classifier_dropout is not None and not 0.0 <= self.classifier_dropout < 1.0:
            raise ConfigError(f"field 'classifier_dropout' must be in [0, 1), got {self.classifier_dropout}")
        for name in ("lstm_hidden_size", "lstm_num_layers"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"field {name!r} must be positive, got {getattr(self, name)}")
        self.training_fields(steps_per_epoch=1, metric_for_best="task")  # the loop's own checks, naming the field

    @property
    def grid(self) -> list[tuple[float, int]]:
        """(lr, epochs) of every run: one run without a grid."""
        if self.grid_lrs is None and self.grid_epochs is None:
            return [(self.lr, self.epochs)]
        lrs = [float(v) for v in (self.grid_lrs or [self.lr])]
        epochs = [int(v) for v in (self.grid_epochs or [self.epochs])]
        return [(lr, e) for lr in lrs for e in epochs]

    def total_steps(self, steps_per_epoch: int) -> int:
        return self.max_steps or self.epochs * steps_per_epoch

    def training_fields(self, steps_per_epoch: int, metric_for_best: str | None = None) -> TrainingConfig:
        """The loop's configuration for a training set of `steps_per_epoch` batches."""
        names = {f.name for f in dataclasses.fields(TrainingConfig)}
        values = {k: v for k, v in dataclasses.asdict(self).items() if k in names}
        total = self.total_steps(steps_per_epoch)
        values.update(
            max_steps=total,
            warmup_steps=resolve_warmup_steps(self.warmup_steps, self.warmup_ratio, total),
            eval_steps=self.eval_steps or steps_per_epoch,
            save_steps=self.save_steps or steps_per_epoch,
        )
        if self.metric_for_best is None and metric_for_best is not None:
            values["metric_for_best"] = metric_for_best
        try:
            return TrainingConfig(**values)
        except ConfigError as exc:
            raise ConfigError(str(exc)) from None


def build_config(values: dict[str, Any], overrides: dict[str, str]) -> FinetuneConfig:
    """Defaults <- `values` (YAML and flags) <- `--set` overrides; `model.X` keys go to `model`."""
    model_overrides = {k.removeprefix("model."): v for k, v in overrides.items() if k.startswith("model.")}
    plain = {k: v for k, v in overrides.items() if not k.startswith("model.")}
    base = apply_overrides(FinetuneConfig(), model_family_defaults(values.get("init_from")), source="defaults")
    base = apply_overrides(base, values, source="config")
    config = apply_overrides(base, plain)
    if model_overrides:
        parsed = {k: parse_value(v, Any) for k, v in model_overrides.items()}
        config = dataclasses.replace(config, model={**config.model, **parsed})
    for name, flag in (("init_from", "--model DIR"), ("output_dir", "--output-dir DIR"), ("train", "--train FILE")):
        if not getattr(config, name):
            raise ConfigError(f"field {name!r} is required ({flag})")
    return config


def model_family_defaults(init_from: str | None) -> dict[str, Any]:
    """The fine-tuning defaults of the starting checkpoint's model family's recipe (none when the
    checkpoint cannot be read yet: `prepare` names the problem)."""
    from bertkit.model.families import family_of

    if not init_from or not (Path(init_from) / "config.json").is_file():
        return {}
    try:
        family = family_of(init_from)
    except BertkitError:
        return {}
    return dict(family.finetuning_recipe().defaults)


GLUE_DEV_FILES = {"mnli": "dev_matched.tsv", "mnli-mm": "dev_mismatched.tsv"}


def glue_file(data: str | Path, task: str, split: str) -> str:
    """The `split` ("train" / "dev") file of a GLUE task folder (or `data` itself if a file)."""
    from bertkit.evaluation.metrics import glue_task_name

    path = Path(data)
    if path.is_file():
        return str(path)
    if not path.is_dir():
        raise BertkitError(f"{path}: no such GLUE task directory or file")
    name = "train.tsv" if split == "train" else GLUE_DEV_FILES.get(glue_task_name(task), "dev.tsv")
    if not (path / name).is_file():
        raise BertkitError(f"{path}: no {name} (expected the GLUE layout: train.tsv, dev.tsv)")
    return str(path / name)


# ---------------------------------------------------------------------------- preparation


@dataclass
class PreparedTask:
    """Everything read and checked before a run writes anything."""

    program_cls: type
    spec: Any  # TaskSpec
    tokenizer: Any
    base_config: Any  # the checkpoint's BertConfig with `model` overrides
    labels: list[str] | None
    train: Any  # TaskData
    dev: Any  # TaskData | None
    keep_head: bool
    feature_cache: Any = None  # feature-based tagging: bertkit.tasks.feature_tagger.FeatureCache
    recipe: FinetuningRecipe = PLAIN_FINETUNING  # the model family's

    @property
    def family(self):
        """The task family's registry entry (its hooks: bertkit.tasks.hooks)."""
        return self.program_cls.task_family()


def check_recipe_fields(config: FinetuneConfig, recipe, model_type: str, source) -> None:
    """A field of another family's fine-tuning recipe set on this run: an error naming it."""
    from bertkit.model.families import recipe_fields

    defaults = FinetuneConfig.__dataclass_fields__
    for name, model_types in recipe_fields().items():
        if name not in recipe.fields and getattr(config, name) != defaults[name].default:
            hint = " (its classifier dropout is model.hidden_dropout_prob or the like)" \
                if name == "classifier_dropout" else ""
            raise ConfigError(f"field {name!r} belongs to the fine-tuning recipe of {' and '.join(model_types)} "
                              f"models; {source} is a {model_type} model{hint}")


LABEL_MAP_ADVICE = "to train a new head instead add --set reinit_head=true"


def prepare(config: FinetuneConfig, progress: bool | None = None,
            label_map_advice: str = LABEL_MAP_ADVICE) -> PreparedTask:
    """Read, check and encode the data for `config` against its starting checkpoint.
    `label_map_advice` ends the error for a checkpoint whose label map does not cover the data."""
    from bertkit.model.families import load_config, task_model_class
    from bertkit.tasks.programs import TaskSpec
    from bertkit.tasks.registry import get_task_family
    from bertkit.tokenization import Tokenizer

    progress = config.progress if progress is None else progress
    source = Path(config.init_from)
    base = load_config(source)  # BertConfig, or the config class of the checkpoint's model family
    if config.model:
        base = type(base).from_dict({**base.to_dict(), **config.model}, source="--set model.*")
    if config.features is None:  # first: the model family must have this task's head (a BERT cannot generate)
        task_model_class(base, get_task_family(config.family).head_name, f"{source}/config.json")
    if base.position_limit is not None and config.max_seq_length > base.position_limit:
        raise ConfigError(f"field 'max_seq_length' ({config.max_seq_length}) exceeds the model's "
                          f"max_position_embeddings ({base.position_limit}) in {source}/config.json")
    tokenizer = Tokenizer.from_pretrained(source)
    from bertkit.model.families import family_for_config

    recipe = family_for_config(base).finetuning_recipe()
    check_recipe_fields(config, recipe, base.model_type, source)
    tokenizer, base = recipe.prepare(tokenizer, base, source)
    if tokenizer.vocab_size > getattr(base, "vocab_size", tokenizer.vocab_size):  # ELMo reads characters: no vocab
        raise BertkitError(f"{source}: the tokenizer has {tokenizer.vocab_size} tokens but the model's vocab_size "
                           f"is {base.vocab_size}")
    family = get_task_family(config.family)
    program_cls = family.program_class()
    if config.features is not None:
        from bertkit.tasks.feature_tagger import check_encoder_depth

        check_encoder_depth(config.features, base.num_hidden_layers, f"{source}/config.json")
        program_cls = family.feature_program_class()
    spec = TaskSpec(family=program_cls.family, glue_task=config.glue_task, text_column=config.text_column,
                    pair_column=config.pair_column, label_column=config.label_column, regression=config.regression,
                    tag_column=config.tag_column, max_seq_length=config.max_seq_length,
                    squad_version=config.squad_version, doc_stride=config.doc_stride,
                    max_query_length=config.max_query_length, max_answer_length=config.max_answer_length,
                    n_best_size=config.n_best_size, text2text_task=config.text2text_task,
                    source_field=config.source_field, target_field=config.target_field,
                    max_target_length=config.max_target_length, num_beams=config.num_beams)
    if spec.glue_task:
        from bertkit.evaluation.metrics import REGRESSION_TASKS, glue_task_name

        spec.glue_task = glue_task_name(spec.glue_task)
        spec.regression = spec.glue_task in REGRESSION_TASKS
    train_examples = program_cls.read(config.train, spec, config.train_labels, training=True)[:config.max_train_samples]
    dev_examples = program_cls.read(config.dev, spec, config.dev_labels)[:config.max_eval_samples] if config.dev else None
    spec = program_cls.fit_spec(spec, train_examples)
    spec = recipe.fit_spec(spec, config)
    same_architecture = program_cls.model_class(base).__name__ in (base.extra.get("architectures") or [])
    checkpoint_map = base.label2id if (same_architecture and base.has_label_names and not config.reinit_head) else None
    try:
        labels = program_cls.label_names(spec, train_examples, dev_examples or [], checkpoint_map,
                                         f"{source}/config.json", config.train)
    except BertkitError as exc:
        if checkpoint_map is None:
            raise
        raise BertkitError(f"{exc}; {label_map_advice}") from None
    keep_head = same_architecture and not config.reinit_head and (
        labels is None if spec.regression or not family.label_names else checkpoint_map is not None)
    if spec.regression and same_architecture and base.num_labels != 1:
        keep_head = False
    label2id = None if labels is None else {name: i for i, name in enumerate(labels)}
    train = program_cls.encode(config.train, train_examples, tokenizer, spec, label2id, progress, training=True)
    dev = program_cls.encode(config.dev, dev_examples, tokenizer, spec, label2id, progress) if dev_examples else None
    if dev is not None:
        program_cls.check_labelled(dev)
    program_cls.check_labelled(train)
    cache = None
    if config.features is not None:  # the frozen encoder runs once here, not every epoch
        from bertkit.tasks.feature_tagger import build_feature_cache

        cache = build_feature_cache(source, base, tokenizer, config.features,
                                    {"train": train, **({"dev": dev} if dev is not None else {})},
                                    cache=config.feature_cache, dtype=config.feature_cache_dtype,
                                    run_dir=config.output_dir, batch_size=config.eval_batch_size, progress=progress)
    return PreparedTask(program_cls, spec, tokenizer, base, labels, train, dev, keep_head, cache, recipe)


def task_model_config(prepared: PreparedTask):
    """The checkpoint's config with the task's label map (or regression's single output)."""
    return prepared.family.hook("head_config")(prepared.base_config, prepared.spec, prepared.labels)


def load_task_model(model_cls, source: Path, config, keep_head: bool):
    """`model_cls` on the checkpoint at `source`: (model, keys initialised fresh).

    keep_head: the checkpoint's head fits (same class and label map) and is loaded too;
    otherwise the backbone alone is loaded and the head (and a pooler the checkpoint
    lacks) start from BERT's initialisation (seed torch first for a repeatable head).
    """
    if keep_head:
        model = model_cls.from_pretrained(source, config=config)
        return model, list(model.loading_info["missing_keys"])
    from bertkit.model.families import family_for_config

    family = family_for_config(config)
    model = model_cls(config)
    backbone = family.backbone_class().from_pretrained(source)
    encoder = getattr(model, family.backbone_attribute)  # HF's attribute: bert / roberta / electra / albert
    own = encoder.state_dict()
    loaded = {k: v for k, v in backbone.state_dict().items() if k in own}
    grown = {k: _grown_rows(own[k], v) for k, v in loaded.items() if own[k].shape != v.shape}
    loaded.update({k: v for k, v in grown.items() if v is not None})
    missing = encoder.load_state_dict(loaded, strict=False).missing_keys
    never_trained = set(backbone.loading_info["missing_keys"]) | set(missing)
    prefix = f"{family.backbone_attribute}."
    fresh = [k for k in model.state_dict() if not k.startswith(prefix)]
    fresh += [f"{prefix}{k}" for k in own if k in never_trained]
    fresh += [f"{prefix}{k} (rows {loaded_rows}+)" for k, loaded_rows in
              ((k, backbone.state_dict()[k].shape[0]) for k, v in grown.items() if v is not None)]
    return model, sorted(fresh)


def _grown_rows(initialised, trained):
    """A table grown by new rows (a tokenizer given tokens, as a fine-tuning recipe may add): the
    trained rows, then the new rows as the model initialised them; None for another mismatch."""
    if initialised.dim() != trained.dim() or initialised.shape[1:] != trained.shape[1:] or (
            initialised.shape[0] < trained.shape[0]):
        return None
    table = initialised.clone()
    table[: trained.shape[0]] = trained
    return table


# ---------------------------------------------------------------------------- runs


@dataclass
class RunOutcome:
    """One training run of a (possibly grid) fine-tuning."""

    lr: float
    epochs: int
    output_dir: Path
    result: Any  # TrainResult
    metric: str | None
    steps_per_epoch: int
    fresh_keys: list[str]
    best_outputs: list | None
    seconds: float


@dataclass
class FinetuneResult:
    output_dir: Path
    best_dir: Path | None
    metric: str | None
    best_metric: float | None
    best_step: int | None
    runs: list[RunOutcome]
    fresh_keys: list[str]


def check_output_dir(output_dir: str | Path, overwrite: bool) -> Path:
    """The run folder, unless it already holds a fine-tuning run and `overwrite` is off (one line)."""
    output_dir = Path(output_dir)
    found = [name for name in _RUN_MARKERS if (output_dir / name).exists()]
    if found and not overwrite:
        raise BertkitError(f"{output_dir}: already holds a fine-tuning run ({found[0]}); "
                           "pass --overwrite to replace it or choose another --output-dir")
    return output_dir


def finetune(config: FinetuneConfig, *, overwrite: bool = False,
             notify: Callable[[str], None] | None = None) -> FinetuneResult:
    """Run fine-tuning (one run, or the grid's runs); `notify` receives one-line notes
    (e.g. which weights start fresh)."""
    from bertkit.training.distributed import setup, teardown

    output_dir = check_output_dir(config.output_dir, overwrite)
    if len(config.grid) > 1 and not config.dev:
        raise ConfigError("a grid search picks the run with the best dev score: give --dev FILE")
    prepared = prepare(config)
    ctx = setup()
    try:
        if prepared.feature_cache is not None and ctx.world_size > 1:
            raise ConfigError("field 'features': the feature-based tagger trains in one process")
        grid = config.grid
        if len(grid) == 1:
            run = _train_once(config, prepared, output_dir, ctx, notify)
            return _result(output_dir, run, [run])
        return _grid_search(config, prepared, output_dir, ctx, grid, notify)
    finally:
        teardown()
        if prepared.feature_cache is not None:
            for data in (prepared.train, prepared.dev):
                for feature in data.features if data is not None else ():
                    feature.pop("hidden", None)  # drop the views before the memmap files go
            prepared.feature_cache.remove()


def _result(output_dir: Path, winner: RunOutcome, runs: list[RunOutcome]) -> FinetuneResult:
    best_dir = output_dir / "best" if (output_dir / "best").is_dir() and winner.result.best_step is not None else None
    return FinetuneResult(output_dir, best_dir, winner.metric, winner.result.best_metric, winner.result.best_step,
                          runs, winner.fresh_keys)


def _train_once(config: FinetuneConfig, prepared: PreparedTask, output_dir: Path, ctx,
                notify: Callable[[str], None] | None) -> RunOutcome:
    """One training run (the whole fine-tuning, or a grid point) in the caller's process
    group, its report written; the caller keeps or removes its best/ and final/."""
    import torch

    from bertkit.training.reporting import fresh_weights_note
    from bertkit.training.run import run_training

    torch.manual_seed(config.seed)  # the same fresh head on every rank and every run
    if prepared.feature_cache is not None:
        model, fresh = prepared.program_cls.build_model(prepared.feature_cache, prepared.base_config, prepared.labels,
                                                        config.lstm_hidden_size, config.lstm_num_layers)
        name = f"feature-based tagger ({config.features})"
    else:
        model_cls = prepared.program_cls.model_class(prepared.base_config)
        model, fresh = load_task_model(model_cls, Path(config.init_from), task_model_config(prepared),
                                       prepared.keep_head)
        name = model_cls.__name__
        prepared.recipe.prepare_model(model, config)
    model.train()
    id2label = None if prepared.labels is None else dict(enumerate(prepared.labels))
    program = prepared.program_cls(model, prepared.tokenizer, prepared.spec, prepared.train.features, prepared.dev,
                                   id2label, group_by_length=config.group_by_length,
                                   eval_batch_size=config.eval_batch_size, progress=config.progress,
                                   auxiliary_loss=prepared.recipe.auxiliary_loss(config))
    steps_per_epoch = math.ceil(len(prepared.train.features) / config.batch_size)
    metric = program.default_metric(prepared.spec) if prepared.dev is not None else None
    training = config.training_fields(steps_per_epoch, metric)

    def outcome(run) -> RunOutcome:
        return RunOutcome(config.lr, config.epochs, output_dir, run.result, training.metric_for_best, steps_per_epoch,
                          fresh, program.best_outputs, run.seconds)

    finished = run_training(config, program, model, training, output_dir, ctx=ctx,
                            notes=[fresh_weights_note(name, config.init_from, fresh)], notify=notify,
                            report=lambda run: write_run_report(output_dir, config, prepared, outcome(run)))
    return outcome(finished)


def _grid_search(config: FinetuneConfig, prepared: PreparedTask, output_dir: Path, ctx, grid,
                 notify: Callable[[str], None] | None) -> FinetuneResult:
    """Every (lr, epochs) of the grid in its own folder; the best dev score wins best/."""
    from bertkit.training import checkpoints as ckpt

    runs: list[RunOutcome] = []
    leader: RunOutcome | None = None
    for lr, epochs in grid:
        run_config = dataclasses.replace(config, lr=lr, epochs=epochs, grid_lrs=None, grid_epochs=None,
                                         output_dir=str(output_dir / "grid" / f"lr{lr:g}_epochs{epochs}"))
        if notify is not None and ctx.is_main:
            notify(f"grid run {len(runs) + 1}/{len(grid)}: lr {lr:g}, {epochs} epochs")
        run = _train_once(run_config, prepared, Path(run_config.output_dir), ctx, notify)
        runs.append(run)
        if ctx.is_main:  # the run's report is written; the winner's best/ is what is kept
            shutil.rmtree(run.output_dir / "final", ignore_errors=True)
        greater = training_greater(run_config, run.metric)
        if run.result.best_metric is not None and (
            leader is None or leader.result.best_metric is None
            or (run.result.best_metric > leader.result.best_metric if greater
                else run.result.best_metric < leader.result.best_metric)
        ):
            if leader is not None and ctx.is_main:
                shutil.rmtree(leader.output_dir / "best", ignore_errors=True)
            leader = run
        elif ctx.is_main:
            shutil.rmtree(run.output_dir / "best", ignore_errors=True)
    winner = leader or runs[0]
    if ctx.is_main:
        source = winner.output_dir / "best"
        if source.is_dir():
            ckpt.write_directory_atomic(output_dir / "best",
                                        lambda tmp: shutil.copytree(source, tmp, dirs_exist_ok=True))
            shutil.rmtree(source, ignore_errors=True)
        lines = [json.dumps({"lr": r.lr, "epochs": r.epochs, "metric": r.metric, "best": r.result.best_metric,
                             "best_step": r.result.best_step, "dir": str(r.output_dir), "seconds": round(r.seconds, 1)})
                 + "\n" for r in runs]
        write_text_atomic(output_dir / GRID_FILE, "".join(lines))
        write_grid_report(output_dir, config, prepared, runs, winner)
    return _result(output_dir, winner, runs)


def training_greater(config: FinetuneConfig, metric: str | None) -> bool:
    if config.greater_is_better is not None:
        return config.greater_is_better
    return not (metric or "").endswith("loss")


# ---------------------------------------------------------------------------- reports


def _describe_run(config: FinetuneConfig, prepared: PreparedTask, run: RunOutcome) -> dict[str, Any]:
    spec, mc = prepared.spec, prepared.base_config
    task = prepared.family.hook("describe")(spec)
    head_dropout = getattr(prepared.program_cls.model_class(mc), "head_dropout", None)  # the head class says
    dropout = head_dropout(mc) if head_dropout is not None else getattr(
        mc, "hidden_dropout_prob", getattr(mc, "dropout_rate", float("nan")))  # a t5-shaped config: dropout_rate
    if config.classifier_dropout is not None:  # a fine-tuning recipe's, set on the head by prepare_model
        dropout = config.classifier_dropout
    total = config.total_steps(run.steps_per_epoch)
    warmup = resolve_warmup_steps(config.warmup_steps, config.warmup_ratio, total)
    features = {}
    if prepared.feature_cache is not None:
        features = {"feature-based (frozen encoder)": f"{config.features} -> {config.lstm_num_layers}-layer BiLSTM "
                                                      f"(hidden {config.lstm_hidden_size} per direction) -> linear",
                    "feature cache": prepared.feature_cache.describe()}
    return {
        "task": task,
        **report_details(prepared),
        "model": f"{config.init_from} ({mc.num_hidden_layers} layers, hidden {mc.hidden_size})",
        **features,
        "initialised fresh": ", ".join(run.fresh_keys) or "nothing (the checkpoint's head was kept)",
        "labels": ", ".join(prepared.labels) if prepared.labels else "none",
        "train": f"{config.train}: {len(prepared.train.examples)} examples, {len(prepared.train.features)} sequences",
        "dev": f"{config.dev}: {len(prepared.dev.examples)} examples" if prepared.dev is not None else "none",
        "epochs x steps per epoch": f"{run.epochs} x {run.steps_per_epoch} (ran {run.result.step} steps"
                                    + (", stopped early)" if run.result.stopped_early else ")"),
        "batch size, max_seq_length": f"{config.batch_size}, {config.max_seq_length}",
        "lr (peak), warm-up, decay": f"{run.lr:g}, {warmup} steps, linear to 0",
        "weight decay, dropout": f"{config.weight_decay:g}, {dropout:g}",
        "training order": "length-grouped random (chunks of 50 batches sorted by length)"
                          if config.group_by_length else "random permutation per epoch",
        "early stopping": f"after {config.early_stopping_patience} evaluations without improvement"
                          if config.early_stopping_patience else "off",
        "seed": config.seed,
        "wall time (s)": round(run.seconds, 1),
    }


def _epoch_table(run: RunOutcome) -> str:
    evals = [r for r in run.result.records if any(k.startswith("eval_") for k in r)]
    if not evals:
        return "no evaluation (no dev set)"
    keys = [k for k in evals[-1] if k.startswith("eval_")]
    lines = ["| epoch | step | " + " | ".join(k.removeprefix("eval_") for k in keys) + " |",
             "|---" * (len(keys) + 2) + "|"]
    for record in evals:
        epoch = record["step"] / run.steps_per_epoch
        mark = " **best**" if record["step"] == run.result.best_step else ""
        values = " | ".join(format_metric(k, record[k]) if k in record else "" for k in keys)
        lines.append(f"| {epoch:.3g}{mark} | {record['step']} | {values} |")
    return "\n".join(lines)


def write_run_report(output_dir: Path, config: FinetuneConfig, prepared: PreparedTask, run: RunOutcome) -> Path:
    from bertkit.training.reporting import plot_curves, write_report

    metric = run.metric or "accuracy"
    plots = plot_curves(run.result.records, output_dir, [("Loss", ["loss", "eval_loss"]),
                                                         (f"Dev {metric}", [f"eval_{metric}"])])
    plots += dev_plots(prepared, run.best_outputs, output_dir)
    write_dev_predictions(prepared, run.best_outputs, output_dir)
    return write_report(output_dir, f"Fine-tuning run: {output_dir.name}", _sections(config, prepared, run), plots)


def _sections(config: FinetuneConfig, prepared: PreparedTask, run: RunOutcome) -> list[tuple[str, Any]]:
    best: dict[str, Any] | str = "no dev set: no best model (use final/)"
    if run.result.best_step is not None:
        best = {"metric for best": run.metric, "best value": format_metric(run.metric or "", run.result.best_metric),
                "step": run.result.best_step,
                "epoch": round(run.result.best_step / run.steps_per_epoch, 3), "model": "best/"}
    return [
        ("Run", _describe_run(config, prepared, run)),
        ("Best dev model", best),
        ("Dev metrics per evaluation", _epoch_table(run)),
        ("Files", ("`best/` (feature-based tagger: feature_tagger.json naming the encoder and its layers, "
                   "feature_tagger.safetensors, tokenizer, bertkit_task.json, best_metrics.json)"
                   if prepared.feature_cache is not None else
                   "`best/` (HF layout: config.json with id2label/label2id, model.safetensors, tokenizer, "
                   "bertkit_task.json, best_metrics.json)")
                  + f", `final/` (last step), `metrics.jsonl`, `{RUN_CONFIG_FILE}`"
                  + prepared.family.hook("report_files")(prepared.spec, prepared.dev, run.best_outputs)),
        *report_sections(prepared),
    ]


def report_details(prepared: PreparedTask) -> dict[str, str]:
    """The family's extra lines of the run description (QA: the answer rule that scored dev),
    and the counts its data recorded (text-to-text: targets cut to the limit)."""
    counts = {f"{name} {what}": str(count) for name, data in (("train", prepared.train), ("dev", prepared.dev))
              if data is not None for what, count in data.stats.items()}
    return {**prepared.family.hook("report_details")(prepared.spec, prepared.dev), **counts}


def report_sections(prepared: PreparedTask) -> list[tuple[str, Any]]:
    """The family's extra report sections (SQuAD v2.0: the unit of the no-answer thresholds)."""
    return prepared.family.hook("report_sections")(prepared.spec, prepared.dev)


def write_grid_report(output_dir: Path, config: FinetuneConfig, prepared: PreparedTask, runs: list[RunOutcome],
                      winner: RunOutcome) -> Path:
    from bertkit.plots import new_figure, save_png
    from bertkit.training.reporting import series, write_report

    metric = winner.metric or "accuracy"
    rows = ["| lr | epochs | best " + metric + " | at step | report |", "|---|---|---|---|---|"]
    for r in runs:
        value = "-" if r.result.best_metric is None else format_metric(metric, r.result.best_metric)
        mark = " **winner**" if r is winner else ""
        rows.append(f"| {r.lr:g} | {r.epochs}{mark} | {value} | {r.result.best_step} | "
                    f"[report]({r.output_dir.relative_to(output_dir)}/report.md) |")
    fig = new_figure(6, 4, dpi=110)
    ax = fig.subplots()
    for r in runs:
        steps, values = series(r.result.records, f"eval_{metric}")
        if steps:
            ax.plot([s / r.steps_per_epoch for s in steps], values, marker="o", markersize=3,
                    label=f"lr {r.lr:g}, {r.epochs} ep")
    ax.set_xlabel("epoch")
    if axis_label([metric]):
        ax.set_ylabel(axis_label([metric]))
    ax.set_title(f"Dev {metric} per grid run")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    plots = [save_png(fig, output_dir / f"dev_{metric}.png")]
    plots += dev_plots(prepared, winner.best_outputs, output_dir)
    write_dev_predictions(prepared, winner.best_outputs, output_dir)
    sections = [("Grid search", "\n".join(rows)), *_sections(config, prepared, winner)]
    sections[1] = ("Winner's run", _describe_run(config, prepared, winner))
    return write_report(output_dir, f"Fine-tuning grid search: {output_dir.name}", sections, plots)


def write_dev_predictions(prepared: PreparedTask, outputs: list | None, output_dir: Path) -> None:
    """The family's files of the best model's dev predictions (QA: dev_predictions.json, dev_na_probs.json)."""
    prepared.family.hook("write_dev_predictions")(prepared.spec, prepared.dev, outputs, output_dir)


def dev_plots(prepared: PreparedTask, outputs: list | None, output_dir: Path) -> list[Path]:
    """The family's plots of the best model's dev predictions (classification: confusion_matrix.png)."""
    return prepared.family.hook("dev_plots")(prepared.spec, prepared.dev, prepared.labels, outputs, output_dir)
