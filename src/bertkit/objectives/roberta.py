"""RoBERTa's objective: masked LM only, on full sentences packed across documents.

What RoBERTa changed against BERT (Liu et al. 2019), and where it lives:
- no NSP; FULL-SENTENCES input: `packed` data (`bertkit data build --format packed`);
  any other format is refused before training;
- dynamic masking: a new mask every epoch (the shared loader's default);
- byte-level BPE (`bertkit tokenizer train --algorithm bbpe`: `<s> </s> <pad> <mask>`);
- Adam beta2 0.98 (`config_defaults`: `--set adam_beta2=...` still wins), large batches
  through accumulation (`batch_size` is global, `micro_batch_size` per forward);
- the model is `RobertaForMaskedLM` (positions past the padding id, one token type), so
  `final/` loads in transformers as `RobertaForMaskedLM` and fine-tunes as RoBERTa.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from bertkit.config import BertConfig
from bertkit.model.roberta import RobertaConfig, RobertaForMaskedLM
from bertkit.objectives.base import mlm_statistics
from bertkit.objectives.mlm_nsp import MlmObjective


class RobertaObjective(MlmObjective):
    name = "roberta"
    data_formats = ("packed",)
    config_class = RobertaConfig
    model_class = RobertaForMaskedLM
    # RoBERTa's optimiser and model shape; 514 positions = 512 tokens past padding_idx 1
    config_defaults: dict[str, Any] = {
        "adam_beta2": 0.98,
        "model": {"type_vocab_size": 1, "layer_norm_eps": 1e-5, "max_position_embeddings": 514},
    }

    @classmethod
    def build_model(cls, config: BertConfig, **options: Any) -> nn.Module:
        if not isinstance(config, RobertaConfig):
            config = RobertaConfig.from_dict({**config.to_dict(), "model_type": "roberta"})
        return RobertaForMaskedLM(config)

    def compute_loss(self, model, batch, totals) -> tuple[torch.Tensor, dict[str, Any]]:
        labels = batch["labels"]
        out = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], labels=labels)
        stats = mlm_statistics(out.logits, labels, out.loss)
        # this micro-batch's mean over its masked positions, weighted to its share of the global mean
        return out.loss * (stats["mlm_count"] / max(totals["mlm"], 1.0)), stats
