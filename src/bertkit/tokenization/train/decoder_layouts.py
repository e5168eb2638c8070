"""Byte-level BPE layouts of decoder-only models (`--algorithm bbpe --layout gpt2|kogpt2`).

A decoder's tokenizer frames nothing: no [CLS]/[SEP] template, the text is the input as
it is, and one end-of-text token separates documents (packed pre-training data) and ends
generation. The layouts below fix the special tokens, their ids and their roles as the
published tokenizers have them:

  gpt2    <|endoftext|>=0, which is BOS, EOS and UNK (GPT-2 puts it last, 50256; here it
          opens the vocabulary like every bertkit special); no pad, no mask
  kogpt2  <s>=0 </s>=1 <usr>=2 <pad>=3 <sys>=4 <unk>=5 <mask>=6 <d>=7 </d>=8
          <unused0>=9 .. <unused99>=108; </s> is BOS and EOS (KoGPT2's model card)

Without `--layout`, bbpe keeps RoBERTa's <s> <pad> </s> <unk> <mask> and its
`<s> A </s>` template (options.ROBERTA_SPECIALS). Decoder layouts are cased by default,
as GPT-2 and KoGPT2 are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from tokenizers import AddedToken, Tokenizer, processors

GPT2_EOS = "<|endoftext|>"
KOGPT2_UNUSED = 100


@dataclass(frozen=True)
class DecoderLayout:
    """One decoder family's special tokens (in id order) and their roles (HF config names)."""

    name: str
    tokens: tuple[str, ...]  # the special tokens opening the vocabulary, ids 0, 1, ...
    roles: Mapping[str, str]  # "bos_token" -> "</s>", ... (tokenizer_config.json keys)

    @property
    def additional_special_tokens(self) -> list[str]:
        """The layout's tokens that play no role (KoGPT2's <usr> <sys> <d> </d> <unusedN>)."""
        roles = set(self.roles.values())
        return [t for t in self.tokens if t not in roles]

    def finish(self, tokenizer: Tokenizer, extra: tuple[str, ...] = ()) -> Tokenizer:
        """Register the specials (never split, skipped when decoding); no input template,
        only byte-level offsets without the leading-space symbol (GPT-2's post-processor)."""
        tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                      for t in self.reserved_tokens(extra)])
        tokenizer.post_processor = processors.ByteLevel(trim_offsets=True)
        return tokenizer

    def reserved_tokens(self, extra: tuple[str, ...] = ()) -> list[str]:
        """The layout's tokens, then `extra` special tokens it does not have, in id order."""
        return list(self.tokens) + [t for t in extra if t not in self.tokens]

    def config(self) -> dict:
        """tokenizer_config.json keys (PreTrainedTokenizerFast conventions: roles by name)."""
        return {
            "tokenizer_class": "PreTrainedTokenizerFast",
            **self.roles,
            "additional_special_tokens": self.additional_special_tokens,
            "padding_side": "right",
        }


DECODER_LAYOUTS = {
    "gpt2": DecoderLayout(
        "gpt2", (GPT2_EOS,), {"bos_token": GPT2_EOS, "eos_token": GPT2_EOS, "unk_token": GPT2_EOS}
    ),
    "kogpt2": DecoderLayout(
        "kogpt2",
        ("<s>", "</s>", "<usr>", "<pad>", "<sys>", "<unk>", "<mask>", "<d>", "</d>",
         *(f"<unused{i}>" for i in range(KOGPT2_UNUSED))),
        {"bos_token": "</s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "<mask>"},
    ),
}
BBPE_LAYOUTS = ("roberta", *DECODER_LAYOUTS)


def decoder_layout(name: str | None) -> DecoderLayout | None:
    """The named decoder layout; None for RoBERTa's (the bbpe default)."""
    return DECODER_LAYOUTS.get(name) if name else None
