"""A tiny random GPT checkpoint (GPT-2 or GPT-1 shape) with a GPT-2-like tokenizer (byte-level
BPE, <|endoftext|> as BOS and EOS, no pad, no template), for the generation commands' tests."""

from __future__ import annotations

from pathlib import Path

import torch

ENDOFTEXT = "<|endoftext|>"
CORPUS = ["It is a truth universally acknowledged, that a single man in possession of a good fortune.",
          "The cute dog walks in the green park.", "A cat sat on the mat in the sun.",
          "Rain fell on the quiet town all day.", "They walked to the park and back home."] * 20


def build_gpt_checkpoint(directory: Path, model_type: str = "gpt2", seed: int = 0, n_positions: int = 64) -> Path:
    from tokenizers import decoders, pre_tokenizers, trainers
    from tokenizers import Tokenizer as RustTokenizer
    from tokenizers.models import BPE

    from bertkit import GPT2Config, GPT2LMHeadModel, OpenAIGPTConfig, OpenAIGPTLMHeadModel
    from bertkit.tokenization import Tokenizer

    backend = RustTokenizer(BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=300, special_tokens=[ENDOFTEXT],
                                                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    Tokenizer(backend).save_pretrained(directory)
    eos = backend.token_to_id(ENDOFTEXT)

    torch.manual_seed(seed)
    config_class, model_class = (GPT2Config, GPT2LMHeadModel) if model_type == "gpt2" else \
        (OpenAIGPTConfig, OpenAIGPTLMHeadModel)
    config = config_class(vocab_size=backend.get_vocab_size(), n_positions=n_positions, n_embd=16, n_layer=2,
                          n_head=4, bos_token_id=eos, eos_token_id=eos)
    model = model_class(config)
    with torch.no_grad():  # varied outputs rather than the init's near-uniform ones
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.5)
    model.save_pretrained(directory)
    return Path(directory)
