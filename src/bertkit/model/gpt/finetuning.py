"""GPT-1's fine-tuning recipe (Radford et al. 2018, section 3.3): how GPT-1 and GPT-2 fine-tune
on the task families, registered as their families' `FINETUNING` (bertkit.model.gpt.recipes;
the contract: bertkit.model.recipes.FinetuningRecipe).

Input transformations. Three tokens are added to the tokenizer and to the embedding table
(new rows drawn N(0, initializer_range) = N(0, 0.02), as the model initialises embeddings):

    classification   <start> text <extract>
    entailment/pairs <start> premise <delim> hypothesis <extract>
    similarity       <start> a <delim> b <extract>  and  <start> b <delim> a <extract>
    multiple choice  <start> context <delim> answer_i <extract>, one sequence per answer

They are the tokenizer's input template (tokenizer.json's post-processor), so every caller
that encodes text — fine-tuning, evaluation, `predict`, the server — and transformers'
`PreTrainedTokenizerFast` on the saved folder frame inputs the same way. The classifier is a
linear layer (`score`, transformers' `GPT2ForSequenceClassification` /
`OpenAIGPTForSequenceClassification`) on the final state of the last real token, which is
`<extract>`; padding is the tokenizer's pad token, else its EOS, never inside an input.

Similarity (the paper's STS-B, MRPC, QQP; any regression on pairs; `--set both_orders=`
overrides): each pair is encoded in both orders, and the two extract states are added
before the linear layer. `score` has no bias, so that is the sum of the two orders'
logits (the task programs' `both_orders_call`); best/ is a plain *ForSequenceClassification folder whose
bertkit_task.json says `both_orders`, which bertkit's evaluate, predict and server read.
Outside bertkit, transformers' class gives the same score as the sum of its logits over
the two orders.

Multiple choice: transformers' `GPT2DoubleHeadsModel` / `OpenAIGPTDoubleHeadsModel` (the
model families' `multiple_choice` head): the LM and `multiple_choice_head` (a linear layer
H -> 1 with bias) on each choice's state at `mc_token_ids` (its <extract>), a softmax over
the choices; the task loss is `mc_loss`, the auxiliary LM loss runs over every choice's
sequence, as OpenAI's ROCStories code does. Its classifier dropout is the head's own
`summary_first_dropout`, set to `classifier_dropout`.

Loss: task + lm_coef * LM, the auxiliary language-modelling loss over the input tokens (each
real token after the first predicted from the states before it, through the tied embeddings).
Defaults (`FINETUNE_DEFAULTS`, each overridable with --set / flags): lr 6.25e-5, batch 32,
3 epochs, warm-up 0.2% of the steps then linear decay, classifier dropout 0.1, lm_coef 0.5.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.errors import BertkitError, ConfigError
from bertkit.labels import IGNORE_INDEX
from bertkit.model.families import GPT1_FINETUNING_DEFAULTS
from bertkit.model.heads import decoder_cross_entropy
from bertkit.model.recipes import AuxiliaryLoss, FinetuningRecipe

START, DELIM, EXTRACT = "<start>", "<delim>", "<extract>"
GPT1_TOKENS = (START, DELIM, EXTRACT)
# the paper's fine-tuning hyper-parameters, as FinetuneConfig fields: written in the GPT families' registry
# lines (torch-free, so `bertkit finetune --help` lists them), read from there
FINETUNE_DEFAULTS: Mapping[str, Any] = GPT1_FINETUNING_DEFAULTS


def with_gpt1_tokens(tokenizer, source: str | Path):
    """`tokenizer` with <start> <delim> <extract> added as special tokens and its template set
    (a tokenizer that already carries them, as a GPT fine-tuned here does, is returned as is).
    A vocabulary holding some of them already (learned, or added for another purpose) is an
    error naming the file: their embeddings mean something else than GPT-1's markers."""
    from tokenizers import AddedToken, processors

    from bertkit.tokenization import Tokenizer

    added = {t.content for t in tokenizer.backend.get_added_tokens_decoder().values() if t.special}
    if all(token in added for token in GPT1_TOKENS) and tokenizer.pad_token is not None:
        return tokenizer
    vocab = tokenizer.get_vocab()
    learned = [token for token in GPT1_TOKENS if token in vocab]
    if learned:
        raise BertkitError(f"{Path(source) / 'tokenizer.json'}: the vocabulary already holds {', '.join(learned)} as "
                           "a token of its own, which GPT-1's fine-tuning adds as a new input marker "
                           "(<start> <delim> <extract>); use a tokenizer without it")
    if tokenizer.eos_token is None and tokenizer.pad_token is None:
        raise BertkitError(f"{Path(source) / 'tokenizer_config.json'}: the tokenizer has neither a pad_token nor an "
                           "eos_token to pad GPT-1's inputs with (set eos_token)")
    from tokenizers import Tokenizer as RustTokenizer

    backend = RustTokenizer.from_str(tokenizer.backend.to_str())
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in GPT1_TOKENS])
    ids = [(t, backend.token_to_id(t)) for t in GPT1_TOKENS]
    template = processors.TemplateProcessing(single=f"{START} $A:0 {EXTRACT}",
                                             pair=f"{START} $A:0 {DELIM} $B:0 {EXTRACT}", special_tokens=ids)
    old = json.loads(tokenizer.backend.to_str()).get("post_processor") or {}
    byte_level = old.get("type") == "ByteLevel" or any(p.get("type") == "ByteLevel" for p in old.get("processors", []))
    backend.post_processor = (processors.Sequence([processors.ByteLevel(trim_offsets=True), template])
                              if byte_level else template)
    config = dataclasses.replace(
        tokenizer.config,
        pad_token=tokenizer.pad_token or tokenizer.eos_token,
        bos_token=tokenizer.bos_token, eos_token=tokenizer.eos_token, unk_token=tokenizer.unk_token,
        mask_token=tokenizer.mask_token,
        additional_special_tokens=tuple(dict.fromkeys((*tokenizer.config.additional_special_tokens, *GPT1_TOKENS))),
    )
    return Tokenizer(backend, config)


def task_config(config, tokenizer):
    """The checkpoint's config sized for the grown tokenizer, its pad id the tokenizer's (the
    classifier reads each row's last token that is not padding: <extract>)."""
    values = {"vocab_size": max(config.vocab_size, len(tokenizer)), "pad_token_id": tokenizer.pad_token_id}
    return type(config).from_dict({**config.to_dict(), **values}, source="GPT-1 fine-tuning")


SIMILARITY_GLUE_TASKS = ("stsb", "mrpc", "qqp")  # the paper's semantic-similarity tasks (its Table 4)


def uses_both_orders(setting: bool | None, spec) -> bool:
    """Whether a classification task reads each pair in both orders: `setting` when given
    (`--set both_orders=true|false`), else the paper's rule: its similarity tasks and any
    regression on pairs. Only pairs can be read in both orders (a field-named error)."""
    if setting is None:
        return bool(spec.has_pairs and (spec.glue_task in SIMILARITY_GLUE_TASKS
                                        or (spec.regression and not spec.glue_task)))
    if setting and not spec.has_pairs:
        raise ConfigError("field 'both_orders': reads a text pair in both orders, but this task's inputs are not "
                          "text pairs (classification with --pair-column, or a GLUE pair task)")
    return setting


def add_classifier_dropout(model: nn.Module, probability: float) -> None:
    """Dropout on the classifier's input while training (the paper's 0.1; transformers' `score`
    has none, and at evaluation there is none either, so the saved function is the same). The
    double-heads model's multiple-choice head has its own (`summary_first_dropout`): set to it."""
    summary = getattr(model, "multiple_choice_head", None)
    if summary is not None:
        summary.first_dropout.p = probability
        model.config.summary_first_dropout = probability
        return
    head = getattr(model, "score", None)
    if head is None or not probability:
        return
    head.register_forward_pre_hook(lambda module, args: (F.dropout(args[0], probability, module.training),))


def auxiliary_lm_loss(model: nn.Module, final_states: torch.Tensor, input_ids: torch.Tensor,
                      attention_mask: torch.Tensor | None) -> tuple[torch.Tensor, float]:
    """(mean next-token CE, count) over the real tokens of `input_ids` (..., T) from the final
    states (..., T, H) through the tied input embeddings: position t predicts token t + 1."""
    weight = model.get_input_embeddings().weight  # (V, H)
    hidden = final_states[..., :-1, :].reshape(-1, final_states.shape[-1])  # (N, H)
    targets = input_ids[..., 1:].reshape(-1)
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[..., 1:].reshape(-1) == 0, IGNORE_INDEX)
    keep = targets != IGNORE_INDEX
    count = float(keep.sum())
    if not count:
        return final_states.sum() * 0.0, 0.0
    # the head and the loss fused (under autocast it falls back to F.linear + F.cross_entropy itself)
    loss, _ = decoder_cross_entropy(hidden[keep], weight, None, targets[keep])
    return loss, count


def _lm_loss_of_outputs(model: nn.Module, outputs, batch) -> tuple[torch.Tensor, float]:
    return auxiliary_lm_loss(model, outputs.hidden_states[-1], batch["input_ids"], batch.get("attention_mask"))


class Gpt1Finetuning(FinetuningRecipe):
    """The recipe above as the families' registration."""

    name = "gpt1"
    defaults = FINETUNE_DEFAULTS
    fields = ("lm_coef", "classifier_dropout", "both_orders")

    def prepare(self, tokenizer, config, source):
        tokenizer = with_gpt1_tokens(tokenizer, source)  # <start> <delim> <extract>, new embedding rows
        return tokenizer, task_config(config, tokenizer)

    def fit_spec(self, spec, settings):
        return dataclasses.replace(spec, both_orders=uses_both_orders(settings.both_orders, spec))

    def prepare_model(self, model, settings) -> None:
        if settings.classifier_dropout is not None:
            add_classifier_dropout(model, settings.classifier_dropout)

    def auxiliary_loss(self, settings) -> AuxiliaryLoss | None:
        if not settings.lm_coef:
            return None
        return AuxiliaryLoss("lm", settings.lm_coef, _lm_loss_of_outputs, {"output_hidden_states": True})


FINETUNING = Gpt1Finetuning()
