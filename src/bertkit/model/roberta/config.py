"""`RobertaConfig`: BertConfig's fields with RoBERTa's defaults."""

from __future__ import annotations

from dataclasses import dataclass

from bertkit.model.bert.config import BertConfig

@dataclass
class RobertaConfig(BertConfig):
    """HF `RobertaConfig`: BertConfig's fields with RoBERTa's defaults (`model_type` "roberta", pad id 1)."""

    vocab_size: int = 50265
    pad_token_id: int = 1
    model_type: str = "roberta"
