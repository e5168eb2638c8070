"""A tiny random BART checkpoint with a BART-like tokenizer (byte-level BPE, <s>=0 <pad>=1
</s>=2 <unk>=3, every text as <s> ... </s>), for the generation and serving tests."""

from __future__ import annotations

from pathlib import Path

import torch

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]
CORPUS = ["The cute dog walks in the green park.", "A cat sat on the mat in the sun.",
          "Rain fell on the quiet town all day.", "They walked to the park and back home."] * 20


def build_bart_checkpoint(directory: Path, seed: int = 0) -> Path:
    from tokenizers import decoders, pre_tokenizers, processors, trainers
    from tokenizers import Tokenizer as RustTokenizer
    from tokenizers.models import BPE

    from bertkit.model.bart import BartConfig, BartForConditionalGeneration
    from bertkit.tokenization import Tokenizer

    backend = RustTokenizer(BPE(unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=300, special_tokens=SPECIALS,
                                                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    backend.post_processor = processors.TemplateProcessing(single="<s> $A </s>",
                                                           special_tokens=[("<s>", 0), ("</s>", 2)])
    Tokenizer(backend).save_pretrained(directory)

    torch.manual_seed(seed)
    config = BartConfig(vocab_size=backend.get_vocab_size(), d_model=16, encoder_layers=2, decoder_layers=2,
                        encoder_ffn_dim=32, decoder_ffn_dim=32, encoder_attention_heads=4, decoder_attention_heads=4,
                        max_position_embeddings=64, dropout=0.0)
    model = BartForConditionalGeneration(config)
    with torch.no_grad():  # varied outputs; the layer norms as they are (random ones make every output alike)
        for name, parameter in model.named_parameters():
            if "norm" not in name:
                parameter.normal_(0.0, 0.6)
    model.save_pretrained(directory)
    return Path(directory)
