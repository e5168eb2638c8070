"""BERT's objective: masked LM (15%, 80/10/10) + next-sentence prediction; and MLM alone.

Loss = mean cross-entropy over the masked positions + mean cross-entropy of IsNext /
NotNext over the pairs (SPEC section 4). "mlm" is the paper's Table 5 ablation arm
without NSP: it trains on any instance format and ignores the sentence label.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from bertkit.evaluation.metrics import percent
from bertkit.model.bert import BertForPreTraining
from bertkit.data.dataset import PretrainingDataset
from bertkit.labels import IGNORE_INDEX
from bertkit.model.bert.config import BertConfig
from bertkit.model.families import MODEL_FAMILIES, ModelFamily, family_for_config, family_of, model_inputs
from bertkit.objectives.base import MaskedLMObjective, mlm_metrics, mlm_statistics, preset_config, sequence_counts


def masked_lm_presets() -> dict[str, ModelFamily]:
    """Preset name -> its family, for the fill-mask families whose presets carry their own names
    (`modernbert-mini`, `bigbird-tiny`, ...): objective mlm trains those families' masked LMs. The
    families sized by BERT's plain names (RoBERTa, ELECTRA, ALBERT) have objectives of their own."""
    plain = set(BertConfig.presets)
    return {name: family for family in MODEL_FAMILIES.values() if family.can_fill_mask
            for name in family.config_class().presets if name not in plain}


def masked_logits(out, field: str, labels: torch.Tensor) -> torch.Tensor:
    """(N, V) logits at the labelled positions: a model's sparse rows as they are, a (B, T, V) output
    indexed by `labels` (B, T) != -100."""
    logits = getattr(out, field, None)
    if logits is None:
        logits = out.logits
    return logits[labels != IGNORE_INDEX] if logits.dim() == 3 else logits


class MlmNspObjective(MaskedLMObjective):
    name = "mlm_nsp"
    data_formats = ("nsp",)
    use_nsp = True
    model_class = BertForPreTraining
    logits_field = "prediction_logits"  # the model output's (N, V) MLM logits at the masked positions
    progress_keys = ("mlm_accuracy", "nsp_accuracy")
    plot_panels = [
        ("Loss", ["loss", "eval_loss"]),
        ("MLM accuracy", ["mlm_accuracy", "eval_mlm_accuracy"]),
        ("NSP accuracy", ["nsp_accuracy", "eval_nsp_accuracy"]),
    ]

    def loss_counts(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        counts = {"mlm": sequence_counts(batch["labels"])}
        if self.use_nsp:
            counts["nsp"] = sequence_counts(batch["next_sentence_label"])
        return counts

    def compute_loss(self, model, batch, totals) -> tuple[torch.Tensor, dict[str, Any]]:
        labels = batch["labels"]
        out = model(**model_inputs(model, batch), labels=labels)
        stats = mlm_statistics(masked_logits(out, self.logits_field, labels), labels, out.loss)
        # out.loss is this micro-batch's mean over its masked positions: times its count over
        # the global count gives its share of the global mean
        loss = out.loss * (stats["mlm_count"] / max(totals["mlm"], 1.0))
        if self.use_nsp:
            nsp_labels = batch["next_sentence_label"]
            logits = out.seq_relationship_logits
            nsp_sum = F.cross_entropy(logits.float(), nsp_labels, ignore_index=-100, reduction="sum")
            loss = loss + nsp_sum / max(totals["nsp"], 1.0)
            valid = nsp_labels != -100
            stats.update(nsp_loss_sum=nsp_sum.detach(), nsp_count=valid.sum(),  # on the device until logged
                         nsp_correct=((logits.detach().argmax(-1) == nsp_labels) & valid).sum())
        elif isinstance(model, DistributedDataParallel) and hasattr(out, "seq_relationship_logits"):  # MLM only under DDP, which stops on parameters without
            loss = loss + 0.0 * out.seq_relationship_logits.sum()  # a gradient: the NSP head joins at weight 0
        return loss, stats

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        metrics = mlm_metrics(stats)
        if stats.get("nsp_count"):
            metrics["nsp_loss"] = stats["nsp_loss_sum"] / stats["nsp_count"]
            metrics["nsp_accuracy"] = percent(stats["nsp_correct"], stats["nsp_count"])
        if "mlm_loss" in metrics:
            metrics["loss"] = metrics["mlm_loss"] + metrics.get("nsp_loss", 0.0)
        return metrics


class MlmObjective(MlmNspObjective):
    """Masked LM only (no NSP): RoBERTa's finding and BERT's Table 5 'No NSP' arm."""

    name = "mlm"
    data_formats = ("nsp", "packed", "sop")
    use_nsp = False
    progress_keys = ("mlm_accuracy",)
    plot_panels = MlmNspObjective.plot_panels[:2]

    # ---- models: BERT's (or a subclass's) by default, another fill-mask family's when the preset names one
    @classmethod
    def model_family(cls, preset: str | None = None) -> ModelFamily:
        return masked_lm_presets().get(preset or "") or super().model_family(preset)

    @classmethod
    def preset_names(cls) -> list[str]:
        return super().preset_names() + list(masked_lm_presets())

    @classmethod
    def model_config(cls, preset: str, data: PretrainingDataset, overrides: dict[str, Any], settings=None):
        family = masked_lm_presets().get(preset)
        if family is None:
            return super().model_config(preset, data, overrides, settings)
        info = data.info
        return preset_config(preset, info.vocab_size, info.max_seq_length, info.pad_token_id, overrides,
                             config_class=family.config_class())

    @classmethod
    def build_model(cls, config, settings=None) -> torch.nn.Module:
        family = family_for_config(config)
        if family not in masked_lm_presets().values():
            return super().build_model(config, settings)
        return family.masked_lm().model_class()(config)

    @classmethod
    def load_model(cls, directory) -> torch.nn.Module:
        family = family_of(directory)
        if family not in masked_lm_presets().values():
            return super().load_model(directory)
        model = family.masked_lm(directory).model_class().from_pretrained(directory)
        model.train()
        return model
