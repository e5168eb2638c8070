"""ELECTRA's objective (Clark et al., 2020): replaced-token detection with a small MLM generator.

Per batch: mask 15% of the tokens (ELECTRA's corruption: 85% [MASK], 15% unchanged, no
random tokens); the generator (an `ElectraForMaskedLM` whose hidden size, heads and FFN
are `generator_size` times the discriminator's) predicts the masked positions and each
is replaced by a sample from its output distribution; the discriminator (an
`ElectraForPreTraining`, the model kept) labels every real (non-padding) token of the
result as original (0) or replaced (1). A sample equal to the original token counts as
original. Sampling is outside the graph, so no gradient flows from the discriminator's
loss into the generator except through the shared embeddings.

    loss = L_MLM(generator) + disc_weight * L_disc      (disc_weight = lambda = 50)

Both terms are means over the global batch: masked positions for the MLM loss, real
tokens for the discriminator's binary cross-entropy. The embedding module (word,
position and token-type embeddings and their LayerNorm, as the paper's tied embeddings)
is one module shared by both networks.

A checkpoint folder holds the discriminator (HF layout, loads with transformers'
`ElectraForPreTraining`) and the generator in `generator/` (`ElectraForMaskedLM`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.data.masking import MaskingConfig
from bertkit.errors import BertkitError, ConfigError
from bertkit.evaluation.metrics import percent
from bertkit.model.bert.modeling import IGNORE_INDEX
from bertkit.model.electra.config import generator_config
from bertkit.model.electra import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining
from bertkit.model.families import model_inputs
from bertkit.model.outputs import ModelOutput
from bertkit.objectives.base import MaskedLMObjective, mlm_metrics, mlm_statistics, sequence_counts
from bertkit.objectives.settings import ObjectiveSettings, setting
from bertkit.training.config import EVAL_SEED

GENERATOR_DIR = "generator"
MASK_TOKEN_RATIO = 0.85  # ELECTRA's corruption of the selected positions: 85% [MASK], 15% kept


def sample_tokens(logits: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One token per row from softmax(logits): (N, V) float -> (N,) int64. No gradient.

    Inverse-CDF sampling: u ~ U(0, total) per row, the first index whose running sum of
    exp(logits - max) exceeds it. One uniform per row instead of `torch.multinomial`'s V
    exponential draws (~40% of a tiny ELECTRA step on CPU), and rows are processed in
    chunks through one small reused buffer rather than new (N, V) tensors (whose first
    touch page-faults, see bertkit.model.memory).
    """
    n, vocab = logits.shape
    if n == 0:
        return torch.zeros(0, dtype=torch.long, device=logits.device)
    with torch.no_grad():
        logits = logits.detach()
        draws = torch.rand(n, 1, generator=generator, device=logits.device, dtype=torch.float32)  # (N, 1)
        rows = n if logits.device.type != "cpu" else max(1, (1 << 19) // vocab)  # ~2 MB of float32 per chunk
        scratch = torch.empty(min(rows, n), vocab, device=logits.device, dtype=torch.float32)
        out = torch.empty(n, dtype=torch.long, device=logits.device)
        for start in range(0, n, rows):
            stop = min(n, start + rows)
            chunk, cdf = logits[start:stop], scratch[: stop - start]
            torch.sub(chunk, chunk.amax(dim=-1, keepdim=True), out=cdf)
            cdf.exp_().cumsum_(dim=-1)  # running sums of the unnormalised probabilities, the total last
            threshold = draws[start:stop] * cdf[:, -1:]  # (rows, 1) uniform in [0, total)
            out[start:stop] = torch.searchsorted(cdf, threshold, right=True).squeeze(1)  # first sum > threshold
        return out.clamp_(max=vocab - 1)


def replace_tokens(
    input_ids: torch.Tensor, labels: torch.Tensor, sampled: torch.Tensor, attention_mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The discriminator's input and targets.

    input_ids: (B, T) the masked input; labels: (B, T) original ids at the N masked
    positions, -100 elsewhere; sampled: (N,) the generator's tokens for those positions in
    row-major order. Returns replaced ids (B, T) — the input with the samples written in —
    and targets (B, T) int64: 1 where the token differs from the original text, 0 where it
    equals it (a sample equal to the original is original), -100 at padding.
    """
    masked = labels != IGNORE_INDEX  # (B, T)
    original = torch.where(masked, labels, input_ids)  # (B, T) the uncorrupted text
    replaced = input_ids.clone()
    replaced[masked] = sampled.to(replaced.dtype)  # boolean indexing is row-major, as nonzero()
    targets = (replaced != original).long()
    if attention_mask is not None:
        targets = targets.masked_fill(~attention_mask.bool(), IGNORE_INDEX)
    return replaced, targets


def electra_loss(
    out: "ElectraStepOutput", labels: torch.Tensor, mlm_total: float, disc_total: float, disc_weight: float
) -> tuple[torch.Tensor, dict[str, float]]:
    """L_MLM + disc_weight * L_disc, each a sum over this batch divided by its global count
    (`mlm_total` masked positions, `disc_total` real tokens), and summable statistics:
    the generator's MLM loss/correct/count and the discriminator's loss, accuracy and
    replaced-token confusion counts (for precision and recall)."""
    stats = mlm_statistics(out.mlm_logits, labels, out.mlm_loss)
    loss = out.mlm_loss * (stats["mlm_count"] / max(mlm_total, 1.0))
    active = out.disc_labels != IGNORE_INDEX  # (B, T) real tokens
    logits, targets = out.disc_logits[active].float(), out.disc_labels[active]
    disc_sum = F.binary_cross_entropy_with_logits(logits, targets.float(), reduction="sum")
    loss = loss + disc_weight * disc_sum / max(disc_total, 1.0)
    predicted, actual = logits > 0, targets.bool()
    stats.update(  # on the device until logged (bertkit.training.step_sums)
        disc_loss_sum=disc_sum.detach(), disc_count=float(targets.numel()),
        disc_correct=(predicted == actual).sum(), disc_replaced=actual.sum(),
        disc_predicted=predicted.sum(), disc_true_positive=(predicted & actual).sum(),
    )
    return loss, stats


@dataclass
class ElectraStepOutput(ModelOutput):
    """mlm_loss: the generator's mean CE over the N masked positions; mlm_logits: (N, V);
    disc_logits: (B, T) replaced-token logits; disc_labels: (B, T) 1 replaced, 0 original,
    -100 padding; replaced_ids: (B, T) the discriminator's input."""

    mlm_loss: torch.Tensor
    mlm_logits: torch.Tensor
    disc_logits: torch.Tensor
    disc_labels: torch.Tensor
    replaced_ids: torch.Tensor


class ElectraPretrainingModel(nn.Module):
    """Generator + discriminator with one shared embedding module; `config` is the discriminator's."""

    def __init__(self, discriminator: ElectraForPreTraining, generator: ElectraForMaskedLM):
        super().__init__()
        disc, gen = discriminator.config, generator.config
        if gen.hidden_size > disc.hidden_size:
            raise BertkitError(f"the generator (hidden size {gen.hidden_size}) is larger than the discriminator "
                               f"(hidden size {disc.hidden_size}); ELECTRA needs a generator no larger")
        for name in ("vocab_size", "embedding_size", "max_position_embeddings", "type_vocab_size"):
            if getattr(gen, name) != getattr(disc, name):
                raise BertkitError(f"generator and discriminator must share embeddings, but their {name} differ "
                                   f"({getattr(gen, name)} vs {getattr(disc, name)})")
        self.discriminator = discriminator
        self.generator = generator
        self.generator.electra.embeddings = self.discriminator.electra.embeddings  # shared (one module)
        self.config = disc

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None,
        attention_mask: torch.Tensor | None,
        labels: torch.Tensor,
        sampler: torch.Generator | None = None,
    ) -> ElectraStepOutput:
        """input_ids: (B, T) masked input; labels: (B, T) original ids at masked positions,
        -100 elsewhere; `sampler` draws the replacements."""
        # only the masked positions are projected onto the vocabulary (fused with the loss): (N, V)
        generated = self.generator(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                                   labels=labels)
        sampled = sample_tokens(generated.logits, sampler)  # (N,) row-major, as the logits
        replaced, disc_labels = replace_tokens(input_ids, labels, sampled, attention_mask)
        disc_logits = self.discriminator(input_ids=replaced, token_type_ids=token_type_ids,
                                         attention_mask=attention_mask).logits  # (B, T)
        return ElectraStepOutput(generated.loss, generated.logits, disc_logits, disc_labels, replaced)


@dataclass(frozen=True)
class ElectraSettings(ObjectiveSettings):
    generator_size: float = setting(0.25, "electra: generator hidden size as a fraction of the discriminator's, in (0, 1]")
    disc_weight: float = setting(50.0, "electra: lambda, the weight of the discriminator's loss")

    def check(self) -> None:
        if not 0.0 < self.generator_size <= 1.0:
            raise ConfigError(f"field 'generator_size' must be in (0, 1] (a fraction of the discriminator's hidden "
                              f"size; a generator larger than the discriminator is not allowed), got {self.generator_size}")
        if not self.disc_weight > 0.0:
            raise ConfigError(f"field 'disc_weight' must be positive, got {self.disc_weight}")


class ElectraObjective(MaskedLMObjective):
    name = "electra"
    data_formats = ("nsp", "packed", "sop")  # segments are read as text; sentence labels are ignored
    settings_class = ElectraSettings
    config_class = ElectraConfig
    progress_keys = ("mlm_accuracy", "disc_accuracy")
    plot_panels = [
        ("Loss", ["loss", "eval_loss"]),
        ("Generator MLM accuracy", ["mlm_accuracy", "eval_mlm_accuracy"]),
        ("Discriminator accuracy", ["disc_accuracy", "eval_disc_accuracy"]),
        ("Replaced tokens: precision / recall", ["disc_precision", "disc_recall", "eval_disc_precision", "eval_disc_recall"]),
    ]

    def __init__(self, model, train, eval_data, masking: MaskingConfig, seed: int, eval_seed: int = EVAL_SEED,
                 settings: ElectraSettings | None = None):
        masking = dataclasses.replace(masking, mask_token_ratio=MASK_TOKEN_RATIO, random_token_ratio=0.0)
        super().__init__(model, train, eval_data, masking, seed, eval_seed, settings)
        self.disc_weight = float(self.settings.disc_weight)

    # ---- models -----------------------------------------------------------------------
    @classmethod
    def build_model(cls, config: ElectraConfig, settings: ElectraSettings | None = None) -> ElectraPretrainingModel:
        discriminator = ElectraForPreTraining(config)
        generator = ElectraForMaskedLM(generator_config(config, (settings or ElectraSettings()).generator_size))
        return ElectraPretrainingModel(discriminator, generator)

    # the run's parts: a subclass with other models (DeBERTa-v3's) names its own
    discriminator_class = ElectraForPreTraining
    generator_class = ElectraForMaskedLM
    pretraining_model_class = ElectraPretrainingModel

    @classmethod
    def load_model(cls, directory: Path) -> ElectraPretrainingModel:
        """A run's folder: the discriminator, and the generator in generator/."""
        from bertkit.model.families import read_model_type

        directory = Path(directory)
        model_type, expected = read_model_type(directory), cls.model_family().model_type
        if model_type != expected or not (directory / GENERATOR_DIR).is_dir():
            what = f"a {model_type} checkpoint" if model_type != expected else f"a checkpoint without {GENERATOR_DIR}/"
            raise BertkitError(f"{directory}: {what}; --objective {cls.name} continues from the folder of an "
                               f"--objective {cls.name} run (the discriminator plus its generator in {GENERATOR_DIR}/)")
        try:
            model = cls.pretraining_model_class(cls.discriminator_class.from_pretrained(directory),
                                                cls.generator_class.from_pretrained(directory / GENERATOR_DIR))
        except BertkitError as exc:
            raise BertkitError(f"{directory}: {exc}") from None
        model.train()
        return model

    def save_pretrained(self, model: ElectraPretrainingModel, directory: Path, state_dict=None) -> None:
        """The discriminator in `directory`, the generator in `directory/generator/`, the tokenizer in both."""
        state = model.state_dict() if state_dict is None else state_dict
        parts = {}
        for part in ("discriminator", "generator"):
            prefix = f"{part}."
            parts[part] = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
        for key, value in parts["discriminator"].items():  # shared embeddings, in case a gatherer dropped the alias
            if key.startswith("electra.embeddings."):
                parts["generator"].setdefault(key, value)
        model.discriminator.save_pretrained(directory, state_dict=parts["discriminator"])
        model.generator.save_pretrained(Path(directory) / GENERATOR_DIR, state_dict=parts["generator"])
        self.tokenizer.save_pretrained(directory)
        self.tokenizer.save_pretrained(Path(directory) / GENERATOR_DIR)

    # ---- loss -----------------------------------------------------------------------------
    def loss_counts(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        return {"mlm": sequence_counts(batch["labels"]), "disc": float(batch["attention_mask"].sum())}

    def compute_loss(self, model, batch, totals) -> tuple[torch.Tensor, dict[str, Any]]:
        labels = batch["labels"]
        device = labels.device
        sampler = torch.Generator(device=device)
        if model.training:  # from the loop's per-micro-batch seeded stream: reproducible, resumable
            sampler.manual_seed(int(torch.randint(2**62, (1,))))
        else:  # evaluation: the same samples at every evaluation and in every run sharing the eval seed
            sampler.manual_seed(self.eval_seed)
        out = model(**model_inputs(model, batch), labels=labels, sampler=sampler)
        return electra_loss(out, labels, totals["mlm"], totals["disc"], self.disc_weight)

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        metrics = mlm_metrics(stats)
        count = stats.get("disc_count", 0.0)
        if count:
            metrics["disc_loss"] = stats["disc_loss_sum"] / count
            metrics["disc_accuracy"] = percent(stats["disc_correct"], count)
            metrics["replaced_fraction"] = stats["disc_replaced"] / count
            if stats["disc_predicted"]:
                metrics["disc_precision"] = percent(stats["disc_true_positive"], stats["disc_predicted"])
            if stats["disc_replaced"]:
                metrics["disc_recall"] = percent(stats["disc_true_positive"], stats["disc_replaced"])
        if "mlm_loss" in metrics and "disc_loss" in metrics:
            metrics["loss"] = metrics["mlm_loss"] + self.disc_weight * metrics["disc_loss"]
        return metrics
