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

from torch import nn

from bertkit.model.bert.config import BertConfig
from bertkit.model.roberta import RobertaConfig, RobertaForMaskedLM
from bertkit.objectives.mlm_nsp import MlmObjective


class RobertaObjective(MlmObjective):
    name = "roberta"
    data_formats = ("packed",)
    config_class = RobertaConfig
    model_class = RobertaForMaskedLM
    logits_field = "logits"  # RobertaForMaskedLM's MaskedLMOutput
    # RoBERTa's optimiser and model shape; 514 positions = 512 tokens past padding_idx 1
    config_defaults: dict[str, Any] = {
        "adam_beta2": 0.98,
        "model": {"type_vocab_size": 1, "layer_norm_eps": 1e-5, "max_position_embeddings": 514},
    }

    @classmethod
    def build_model(cls, config: BertConfig, settings=None) -> nn.Module:
        if not isinstance(config, RobertaConfig):
            config = RobertaConfig.from_dict({**config.to_dict(), "model_type": "roberta"})
        return RobertaForMaskedLM(config)
