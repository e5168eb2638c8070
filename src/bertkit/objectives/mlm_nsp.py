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
from bertkit.model.families import model_inputs
from bertkit.objectives.base import MaskedLMObjective, mlm_metrics, mlm_statistics, sequence_counts


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
        stats = mlm_statistics(getattr(out, self.logits_field), labels, out.loss)
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
        elif isinstance(model, DistributedDataParallel):  # MLM only under DDP, which stops on parameters without
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
