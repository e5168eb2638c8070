"""Causal language modelling on a decoder-only family (GPT-1, GPT-2): next-token prediction.

Each example is one `packed` instance: documents joined by the end-of-text token, as
GPT-2 trains (`bertkit data build --format packed` with a decoder's tokenizer: its EOS
separates documents; an instance that ends inside a document ends with it too, as every
packed instance does). `labels` are the input ids themselves (transformers' convention):
position t predicts token t + 1, so the loss runs over every real token after the first
of each sequence (padding excluded) — the shift happens in the loss, not in the data.

The model is the family's language model (its `generator`: GPT2LMHeadModel,
OpenAIGPTLMHeadModel), so `final/` loads in transformers as that class and generates with
`bertkit generate`. The family follows from the preset: `--preset gpt-mini` (GPT-2's
shape) or `--preset gpt1-mini` (GPT-1's: post-LN, no final LayerNorm); a preset of an
encoder or an encoder-decoder is an error naming the decoder presets. Held-out metrics:
loss, perplexity and next-token accuracy.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.data.dataset import TOKENIZER_DIR, PretrainingDataset
from bertkit.errors import BertkitError, ConfigError
from bertkit.evaluation.metrics import percent
from bertkit.model.losses import IGNORE_INDEX
from bertkit.model.families import MODEL_FAMILIES, ModelFamily, family_for_config, family_of, model_inputs
from bertkit.objectives.base import PretrainingObjective, preset_config
from bertkit.objectives.settings import ObjectiveSettings
from bertkit.pretrained_config import PretrainedConfig


def decoder_presets() -> dict[str, ModelFamily]:
    """Preset name -> its decoder-only family, over every registered family."""
    return {name: family for family in MODEL_FAMILIES.values() if family.decoder_only
            for name in family.config_class().presets}


def decoder_family(preset: str) -> ModelFamily:
    """The decoder-only family that owns `preset`; a field-named error otherwise."""
    presets = decoder_presets()
    if preset not in presets:
        raise ConfigError(f"field 'preset': objective 'clm' trains a decoder-only model, and {preset!r} is not a "
                          f"decoder preset (choose one of {', '.join(presets) or 'none registered'})")
    return presets[preset]


def causal_lm_class(family: ModelFamily, source: str | Path = "the model") -> type[nn.Module]:
    """The family's language model (its generator), after checking the family is decoder-only."""
    if not family.decoder_only:
        raise BertkitError(f"{source}: objective 'clm' trains a decoder-only model, not a {family.model_type} model")
    return family.generator_class(source)


def end_of_text_id(data: PretrainingDataset) -> int:
    """The tokenizer's EOS, which must be what joins the documents of `data`; one line naming
    the tokenizer (no EOS) or the data (documents joined by another token) otherwise."""
    eos = data.tokenizer().eos_token_id
    if eos is None:
        raise BertkitError(f"{data.directory / TOKENIZER_DIR}: the tokenizer has no end-of-text token (eos_token, "
                           "e.g. <|endoftext|> or </s>) that objective 'clm' joins documents with and generation "
                           "stops at (train one with bertkit tokenizer train --algorithm bbpe --layout gpt2)")
    if data.info.sep_token_id != eos:
        raise BertkitError(f"{data.directory}: documents are joined by token id {data.info.sep_token_id} (the "
                           f"tokenizer's separator), not its eos_token (id {eos}) that objective 'clm' learns to end "
                           "texts with; use a decoder's tokenizer (--layout gpt2 or kogpt2)")
    return int(eos)


def next_token_statistics(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
    """(mean loss, summable stats) of next-token prediction: logits (B, T, V) at every position,
    labels (B, T) the input ids with -100 on padding; position t is scored on labels[t + 1]."""
    shifted_logits = logits[:, :-1].float()  # (B, T-1, V)
    targets = labels[:, 1:]  # (B, T-1)
    scored = targets != IGNORE_INDEX
    count = int(scored.sum())
    if count == 0:
        return shifted_logits.sum() * 0.0, {"lm_loss_sum": 0.0, "lm_correct": 0.0, "lm_count": 0.0}
    picked = shifted_logits[scored]  # (N, V)
    loss = F.cross_entropy(picked, targets[scored])
    correct = float((picked.argmax(dim=-1) == targets[scored]).sum())
    return loss, {"lm_loss_sum": float(loss.detach()) * count, "lm_correct": correct, "lm_count": float(count)}


class ClmObjective(PretrainingObjective):
    name = "clm"
    data_formats = ("packed",)  # one stream of documents joined by EOS: paired (nsp / sop) data is refused
    needs_dynamic_masking = "reads unmasked text"
    config_defaults: dict[str, Any] = {"preset": "gpt-mini"}
    progress_keys = ("lm_accuracy",)
    plot_panels = [("Loss", ["loss", "eval_loss"]), ("Next-token accuracy", ["lm_accuracy", "eval_lm_accuracy"])]

    # ---- models -------------------------------------------------------------------------------
    @classmethod
    def model_family(cls, preset: str | None = None) -> ModelFamily:
        """The decoder family of `preset` (GPT-2's for a preset of none)."""
        return decoder_presets().get(preset or "", MODEL_FAMILIES["gpt2"])

    @classmethod
    def preset_names(cls) -> list[str]:
        return list(decoder_presets())

    @classmethod
    def model_config(cls, preset: str, data: PretrainingDataset, overrides: dict[str, Any],
                     settings: ObjectiveSettings | None = None) -> PretrainedConfig:
        """The decoder preset sized for `data`'s tokenizer and length (a position table of at
        least max_seq_length); BOS and EOS are the tokenizer's end-of-text token (GPT-2's
        <|endoftext|>, KoGPT2's </s>)."""
        family = decoder_family(preset)
        info = data.info
        eos = end_of_text_id(data)
        config_class = family.config_class()
        ids = {"bos_token_id": eos, "eos_token_id": eos}
        positions = config_class.presets[preset].get("n_positions")
        if positions is not None and positions < info.max_seq_length:  # a table long enough for the data
            ids["n_positions"] = info.max_seq_length
        ids = {k: v for k, v in ids.items() if k in {f.name for f in dataclasses.fields(config_class)}}
        return preset_config(preset, info.vocab_size, info.max_seq_length, info.pad_token_id,
                             {**ids, **overrides}, config_class=config_class)

    @classmethod
    def build_model(cls, config: PretrainedConfig, settings: ObjectiveSettings | None = None) -> nn.Module:
        return causal_lm_class(family_for_config(config))(config)

    @classmethod
    def load_model(cls, directory: Path) -> nn.Module:
        model = causal_lm_class(family_of(directory), directory).from_pretrained(directory)
        model.train()
        return model

    @classmethod
    def check_data(cls, data: PretrainingDataset) -> None:
        """The format and masking (base), then the tokenizer's EOS, before any model is built."""
        super().check_data(data)
        end_of_text_id(data)

    def describe_masking(self, run_config: Any) -> str:
        return "none (next-token prediction on packed documents joined by EOS)"

    def describe_eval_masks(self) -> str:
        return "none (every held-out token is scored)"

    # ---- examples and batches ------------------------------------------------------------------
    def example(self, data: PretrainingDataset, index: int, epoch: int, seed: int) -> dict[str, Any]:
        """Instance `index` as it is (no random choice): input_ids (T,) and labels = input_ids."""
        input_ids = data[index]["input_ids"]
        return {"input_ids": input_ids, "labels": input_ids.astype("int64")}

    # ---- loss ------------------------------------------------------------------------------------
    def loss_counts(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        return {"lm": float((batch["labels"][:, 1:] != IGNORE_INDEX).sum())}

    def compute_loss(self, model, batch, totals) -> tuple[torch.Tensor, dict[str, Any]]:
        out = model(**model_inputs(model, batch))
        loss, stats = next_token_statistics(out.logits, batch["labels"])
        return loss * (stats["lm_count"] / max(totals["lm"], 1.0)), stats

    def held_out_targets(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        targets = batch["labels"][:, 1:]  # position t is scored on token t + 1
        return targets[targets != IGNORE_INDEX]

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        count = stats.get("lm_count", 0.0)
        if not count:
            return {}
        mean = stats["lm_loss_sum"] / count
        return {"loss": mean, "lm_loss": mean, "lm_accuracy": percent(stats["lm_correct"], count),
                "lm_perplexity": math.exp(min(mean, 50.0))}

