"""General distillation (DistilBERT / TinyBERT) on a `bertkit data build` directory: the
objective's dynamic masking, then soft targets at the masked positions, the hard MLM
loss, and optionally the cosine, hidden-state and attention losses (see the package
docstring)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from bertkit.atomic import atomic_path
from bertkit.distillation.config import GENERAL_PATH_FIELDS, DistillConfig, build_config
from bertkit.distillation.losses import attention_mse, cosine_loss, hidden_mse, soft_target_loss
from bertkit.distillation.student import (
    attention_layer_map,
    describe_student,
    hidden_layer_map,
    init_student_from_teacher,
    student_config,
    student_layer_sources,
)
from bertkit.distillation.teacher import check_general_teacher, load_teacher
from bertkit.distillation.teacher_cache import TeacherCache, general_cache_key
from bertkit.errors import BertkitError, ConfigError
from bertkit.labels import IGNORE_INDEX
from bertkit.model.families import model_inputs
from bertkit.objectives.base import MaskedLMObjective, mlm_metrics, mlm_statistics, sequence_counts
from bertkit.training.config import RUN_CONFIG_FILE
from bertkit.training.resume import absolute_paths

PROJECTION_FILE = "distill_projection.safetensors"


class DistillationModel(nn.Module):
    """What general distillation trains: the student and, when its hidden size differs
    from the teacher's and a hidden-state loss is on, a projection H_s -> H_t (W_h)."""

    def __init__(self, student: nn.Module, teacher_hidden_size: int | None = None):
        super().__init__()
        self.student = student
        self.projection = None
        if teacher_hidden_size is not None and teacher_hidden_size != student.config.hidden_size:
            self.projection = nn.Linear(student.config.hidden_size, teacher_hidden_size)
            nn.init.normal_(self.projection.weight, 0.0, student.config.initializer_range)
            nn.init.zeros_(self.projection.bias)

    @property
    def config(self):
        """The student's config: its family names the inputs (bertkit.model.families.model_inputs)."""
        return self.student.config

    def forward(self, input_ids, token_type_ids, attention_mask, labels, output_hidden_states=False,
                output_attentions=False):
        """The student's BertForPreTrainingOutput and its hidden states (L+1 of (B, T, H_t),
        projected when widths differ; None unless asked for)."""
        out = self.student(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                           labels=labels, output_hidden_states=output_hidden_states,
                           output_attentions=output_attentions)
        hidden = out.hidden_states
        if hidden is not None and self.projection is not None:
            hidden = tuple(self.projection(h) for h in hidden)
        return out, hidden


def teacher_on_device(teacher: nn.Module, device: torch.device) -> nn.Module:
    if next(teacher.parameters()).device != device:
        teacher.to(device)
    return teacher


class GeneralDistillation(MaskedLMObjective):
    """DistilBERT / TinyBERT distillation on a built pre-training data directory."""

    name = "distill"
    data_formats = ("nsp", "packed", "sop")
    progress_keys = ("mlm_accuracy", "soft_loss")
    plot_panels = [
        ("Loss", ["loss", "eval_loss"]),
        ("Soft-target loss", ["soft_loss", "eval_soft_loss"]),
        ("MLM accuracy", ["mlm_accuracy", "eval_mlm_accuracy"]),
    ]

    def __init__(self, model: DistillationModel, teacher: nn.Module, train, eval_data, masking, config: DistillConfig,
                 cache: TeacherCache | None = None):
        super().__init__(model, train, eval_data, masking, config.seed, config.eval_seed)
        self.teacher = teacher
        self.config = config
        self.cache = cache
        teacher_layers = teacher.config.num_hidden_layers
        student_layers = model.student.config.num_hidden_layers
        self.hidden_map = hidden_layer_map(teacher_layers, student_layers) if config.alpha_hidden > 0 else []
        self.attention_map = attention_layer_map(teacher_layers, student_layers) if config.alpha_attention > 0 else []
        self.want_hidden = config.alpha_cos > 0 or config.alpha_hidden > 0

    # ---- data: the example's identity travels with it (the cache's key) ----------
    def train_example(self, index: int, epoch: int) -> dict[str, Any]:
        example = super().train_example(index, epoch)
        example["example_index"], example["epoch"] = index, epoch
        return example

    def save_pretrained(self, model: nn.Module, directory: Path, state_dict=None) -> None:
        state = model.state_dict() if state_dict is None else state_dict
        student = {k.removeprefix("student."): v for k, v in state.items() if k.startswith("student.")}
        model.student.save_pretrained(directory, state_dict=student)
        self.tokenizer.save_pretrained(directory)
        projection = {k.removeprefix("projection."): v for k, v in state.items() if k.startswith("projection.")}
        if projection:
            from safetensors.torch import save_file

            with atomic_path(Path(directory) / PROJECTION_FILE) as tmp:
                save_file({k: v.detach().contiguous().cpu() for k, v in projection.items()}, str(tmp))

    # ---- the teacher ------------------------------------------------------------
    def _run_teacher(self, batch: dict[str, torch.Tensor]) -> dict[str, Any]:
        """Teacher outputs for a batch: logits (N, V) at the masked positions, the last
        hidden state and the mapped hidden states / attention maps, as ordinary tensors."""
        teacher = teacher_on_device(self.teacher, batch["input_ids"].device)
        with torch.inference_mode():
            out = teacher.bert(**model_inputs(teacher, batch),
                               output_hidden_states=bool(self.hidden_map),
                               output_attentions=bool(self.attention_map))
            result: dict[str, Any] = {}
            if self.config.alpha_soft > 0:
                labels = batch["labels"]
                positions = (labels != IGNORE_INDEX).nonzero(as_tuple=False)  # (N, 2), row-major as the student's
                result["logits"] = teacher.mlm_logits(out.last_hidden_state[positions[:, 0], positions[:, 1]])
            if self.config.alpha_cos > 0:
                result["last"] = out.last_hidden_state
            if self.hidden_map:
                result["hidden"] = [out.hidden_states[t] for _, t in self.hidden_map]
            if self.attention_map:
                result["attentions"] = [out.attentions[t] for _, t in self.attention_map]
        return {k: [t.clone() for t in v] if isinstance(v, list) else v.clone() for k, v in result.items()}

    def teacher_outputs(self, batch: dict[str, torch.Tensor]) -> dict[str, Any]:
        if self.cache is None or "example_index" not in batch:
            return self._run_teacher(batch)
        indices, epochs = batch["example_index"].tolist(), batch["epoch"].tolist()
        rows = [self.cache.load(e, i) for e, i in zip(epochs, indices, strict=True)]
        if any(row is None for row in rows):
            outputs = self._run_teacher(batch)
            for b, (e, i) in enumerate(zip(epochs, indices, strict=True)):
                self.cache.save(e, i, self._row(outputs, batch, b))
            return outputs
        device = batch["input_ids"].device
        return self._assemble([{k: v.to(device) for k, v in row.items()} for row in rows], batch)

    def _row(self, outputs: dict[str, Any], batch: dict[str, torch.Tensor], b: int) -> dict[str, torch.Tensor]:
        """Row b of a batch's teacher outputs, cut to its real length."""
        length = int(batch["attention_mask"][b].sum())
        row = {}
        if "logits" in outputs:
            masked = batch["labels"] != IGNORE_INDEX  # (B, T)
            start = int(masked[:b].sum())
            row["logits"] = outputs["logits"][start : start + int(masked[b].sum())]
        if "last" in outputs:
            row["last"] = outputs["last"][b, :length]
        for k, hidden in enumerate(outputs.get("hidden", [])):
            row[f"hidden.{k}"] = hidden[b, :length]
        for k, attention in enumerate(outputs.get("attentions", [])):
            row[f"attention.{k}"] = attention[b, :, :length, :length]
        return row

    def _assemble(self, rows: list[dict[str, torch.Tensor]], batch: dict[str, torch.Tensor]) -> dict[str, Any]:
        """Cached rows -> the batch's teacher outputs, zero-padded to its width T."""
        width = batch["input_ids"].shape[1]

        def pad(key: str) -> torch.Tensor:
            first = rows[0][key]
            if first.ndim == 2:  # (T_i, H) -> (B, T, H)
                out = first.new_zeros(len(rows), width, first.shape[1])
                for b, row in enumerate(rows):
                    out[b, : row[key].shape[0]] = row[key]
                return out
            out = first.new_zeros(len(rows), first.shape[0], width, width)  # (B, heads, T, T)
            for b, row in enumerate(rows):
                n = row[key].shape[1]
                out[b, :, :n, :n] = row[key]
            return out

        result: dict[str, Any] = {}
        if self.config.alpha_soft > 0:
            result["logits"] = torch.cat([row["logits"] for row in rows])
        if self.config.alpha_cos > 0:
            result["last"] = pad("last")
        if self.hidden_map:
            result["hidden"] = [pad(f"hidden.{k}") for k in range(len(self.hidden_map))]
        if self.attention_map:
            result["attentions"] = [pad(f"attention.{k}") for k in range(len(self.attention_map))]
        return result

    # ---- loss ---------------------------------------------------------------------
    def loss_counts(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        return {"mlm": sequence_counts(batch["labels"]), "tokens": float(batch["attention_mask"].sum())}

    def compute_loss(self, model, batch, totals) -> tuple[torch.Tensor, dict[str, float]]:
        cfg = self.config
        labels, mask = batch["labels"], batch["attention_mask"]
        out, hidden = model(**model_inputs(model, batch), labels=labels,
                            output_hidden_states=self.want_hidden, output_attentions=bool(self.attention_map))
        teacher = self.teacher_outputs(batch)
        masked, tokens = max(totals["mlm"], 1.0), max(totals["tokens"], 1.0)
        mask = mask.to(torch.float32)
        stats = mlm_statistics(out.prediction_logits, labels, out.loss)
        stats["token_count"] = float(mask.sum())
        # out.loss: this micro-batch's mean over its masked positions -> its share of the global mean
        loss = cfg.alpha_hard * out.loss * (stats["mlm_count"] / masked)
        terms: dict[str, torch.Tensor] = {}
        if cfg.alpha_soft > 0:
            terms["soft"] = soft_target_loss(out.prediction_logits, teacher["logits"], cfg.temperature,
                                             cfg.soft_loss)
        if cfg.alpha_cos > 0:
            terms["cos"] = cosine_loss(hidden[-1], teacher["last"], mask)
        if self.hidden_map:
            terms["hidden"] = sum(hidden_mse(hidden[s], t, mask)
                                  for (s, _), t in zip(self.hidden_map, teacher["hidden"], strict=True))
        if self.attention_map:
            terms["attention"] = sum(attention_mse(out.attentions[s], t, mask)
                                     for (s, _), t in zip(self.attention_map, teacher["attentions"], strict=True))
        for name, value in terms.items():
            total = masked if name == "soft" else tokens
            loss = loss + getattr(cfg, f"alpha_{name}") * value / total
            stats[f"{name}_loss_sum"] = float(value.detach())
        return loss, stats

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        metrics = mlm_metrics(stats)
        if not metrics:
            return {}
        cfg = self.config
        total = cfg.alpha_hard * metrics["mlm_loss"]
        for name in ("soft", "cos", "hidden", "attention"):
            if f"{name}_loss_sum" in stats:
                count = stats["mlm_count"] if name == "soft" else stats.get("token_count", 0.0)
                metrics[f"{name}_loss"] = stats[f"{name}_loss_sum"] / max(count, 1.0)
                total += getattr(cfg, f"alpha_{name}") * metrics[f"{name}_loss"]
        metrics["loss"] = total
        return metrics


def _open_data(config: DistillConfig):
    from bertkit.data.dataset import PretrainingDataset

    train = PretrainingDataset.open(config.data, "train")
    try:
        eval_data = PretrainingDataset.open(config.data, "eval")
    except BertkitError:
        eval_data = None
    return train, eval_data


def check_teacher_vocabulary(teacher_dir: str | Path, teacher_config, train) -> None:
    """The teacher must speak the data's vocabulary: same size and, when the teacher folder
    has a tokenizer, the same tokenizer fingerprint."""
    from bertkit.data.dataset import tokenizer_fingerprint
    from bertkit.tokenization import Tokenizer

    info = train.info
    if teacher_config.vocab_size != info.vocab_size:
        raise BertkitError(f"{train.directory}: built with a tokenizer of {info.vocab_size} tokens, but the teacher "
                           f"at {teacher_dir} has vocab_size {teacher_config.vocab_size}; rebuild the data with the "
                           "teacher's tokenizer")
    try:
        tokenizer = Tokenizer.from_pretrained(teacher_dir)
    except BertkitError:
        return  # weights only: the vocabulary size is all there is to check
    if tokenizer_fingerprint(tokenizer) != info.tokenizer_fingerprint:
        raise BertkitError(f"{train.directory}: built with another tokenizer than the teacher's at {teacher_dir} "
                           "(same size, different vocabulary or normalisation); rebuild the data with the teacher's "
                           "tokenizer")


def prepare_general(config: DistillConfig, checkpoint: Path | None = None):
    """Teacher, student and program for `config`, every check made before training.
    `checkpoint`: resume the student (and projection) from it. Returns (program, model, fresh keys)."""
    from bertkit.data.masking import MaskingConfig
    from bertkit.model.bert import BertForPreTraining

    check_general_teacher(config.teacher)
    train, eval_data = _open_data(config)
    teacher = load_teacher(BertForPreTraining, config.teacher)
    check_teacher_vocabulary(config.teacher, teacher.config, train)
    if teacher.config.max_position_embeddings < train.info.max_seq_length:
        raise BertkitError(f"{config.data}: max_seq_length {train.info.max_seq_length} exceeds the teacher's "
                           f"max_position_embeddings {teacher.config.max_position_embeddings}")
    no_mlm_head = any(k.startswith("cls.predictions.") for k in teacher.loading_info["missing_keys"])
    if no_mlm_head and config.alpha_soft > 0:
        raise BertkitError(f"{config.teacher}: the teacher has no MLM head (cls.predictions), so there are no soft "
                           "targets; use a BertForPreTraining / BertForMaskedLM checkpoint, or distil from hidden "
                           "states only with --set alpha_soft=0")
    s_config = student_config(teacher.config, config.student_layers, config.student, config.teacher)
    if config.alpha_attention > 0 and s_config.num_attention_heads != teacher.config.num_attention_heads:
        raise ConfigError(f"field 'alpha_attention': the attention loss compares heads one to one, but the student "
                          f"has {s_config.num_attention_heads} heads and the teacher {teacher.config.num_attention_heads}")
    torch.manual_seed(config.seed)
    if checkpoint is not None:
        student = BertForPreTraining.from_pretrained(checkpoint)
        fresh: list[str] = []
    else:
        student = BertForPreTraining(s_config)
        fresh = init_student_from_teacher(
            student, teacher, student_layer_sources(teacher.config.num_hidden_layers, s_config.num_hidden_layers))
    student.train()
    wants_hidden = config.alpha_cos > 0 or config.alpha_hidden > 0
    model = DistillationModel(student, teacher.config.hidden_size if wants_hidden else None)
    if checkpoint is not None and model.projection is not None:
        from safetensors.torch import load_file

        path = checkpoint / PROJECTION_FILE
        if not path.is_file():
            raise BertkitError(f"{checkpoint}: no {PROJECTION_FILE} (the hidden-state projection) to resume from")
        model.projection.load_state_dict(load_file(path))
    cache = None
    if config.cache_teacher:
        cache = TeacherCache(config.teacher_cache_root() / general_cache_key(config, teacher, train))
    masking = MaskingConfig(mlm_probability=config.mlm_probability, strategy=config.masking,
                            max_predictions_per_seq=config.max_predictions_per_seq)
    program = GeneralDistillation(model, teacher, train, eval_data, masking, config, cache)
    return program, model, fresh


def distill_general(config: DistillConfig, *, overwrite: bool = False, on_start=None):
    """Run general distillation (`bertkit distill --data DIR`); returns the loop's TrainResult.
    `on_start(config)` runs once every check has passed, just before the first step."""
    from bertkit.training import checkpoints as ckpt

    ckpt.refuse_existing_run(Path(config.output_dir), overwrite)
    return _run_general(absolute_paths(config, GENERAL_PATH_FIELDS), None, on_start)


def resume_general_distillation(output_dir: str | Path, values: dict[str, Any] | None = None,
                                overrides: dict[str, str] | None = None, *, notify=None):
    """Continue the general distillation in `output_dir` from its newest readable
    checkpoint; `values` and `overrides` must match the saved run except where
    bertkit.training.resume allows a change (as `bertkit pretrain --resume`)."""
    from bertkit.training.resume import resume_run

    resumption = resume_run(output_dir, lambda v, o, source: build_config(DistillConfig, v, o, source=source),
                            values or {}, overrides or {}, GENERAL_PATH_FIELDS)
    return _run_general(resumption.config, resumption, None, notify)


def _run_general(config: DistillConfig, resumption, on_start, notify=None):
    from bertkit.training.run import run_training

    program, model, fresh = prepare_general(config, resumption.checkpoint if resumption is not None else None)
    return run_training(
        config, program, model, config.training_fields(), config.output_dir, resumption=resumption, notify=notify,
        on_start=on_start,
        report=lambda run: _write_general_report(config, program, model, fresh, run.result, run.seconds, resumption),
    ).result


def _write_general_report(config: DistillConfig, program, model, fresh, result, seconds: float,
                          resumption=None) -> Path:
    from bertkit.training.reporting import plot_curves, write_report

    output_dir = Path(config.output_dir)
    plots = plot_curves(result.records, output_dir, program.plot_panels)
    final = {}
    details = program.evaluation_details()
    for record in result.records:
        final.update({k: v for k, v in record.items() if k != "step" and k not in details})
    student = model.student
    weights = {name: getattr(config, name) for name in config.loss_weights()}
    sections = [
        ("Distillation", {**describe_student(program.teacher.config, student.config, config.teacher, fresh),
                          "temperature": config.temperature, "soft loss": config.soft_loss,
                          "loss weights": ", ".join(f"{k.removeprefix('alpha_')} {v:g}" for k, v in weights.items()),
                          "hidden projection": "yes (W_h, saved as " + PROJECTION_FILE + ")"
                          if model.projection is not None else "no (same width)",
                          "teacher cache": str(program.cache.directory) if program.cache is not None else "off"}),
        ("Run", {"steps": result.step, "global batch": config.batch_size,
                 **({"batch ramp": config.describe_batch_ramp()} if config.batch_ramp_start is not None else {}),
                 "lr (peak), warm-up":
                 f"{config.lr:g}, {config.describe_warmup()}", "masking": f"{config.masking}, {config.mlm_probability:.0%}",
                 "seed": config.seed, "held-out masks": program.describe_eval_masks(),
                 **({"resumed from": resumption.report_entry()} if resumption is not None else {}),
                 "data": f"{config.data} ({program.train.info.num_instances} instances)",
                 "wall time (s)": round(seconds, 1), "training tokens/s": round(result.tokens_per_second, 1)}),
        ("Final metrics", final or "no metrics logged"),
        ("Files", "`final/` (the student: HF BertForPreTraining layout + tokenizer), `checkpoint-*`, `metrics.jsonl`, "
                  f"`{RUN_CONFIG_FILE}`"),
    ]
    return write_report(output_dir, f"Distillation run: {output_dir.name}", sections, plots)
