"""A tiny random T5 checkpoint with a T5-like tokenizer (Unigram, <pad>=0 </s>=1 <unk>=2,
EOS appended to every text, sentinels <extra_id_0>..<extra_id_9>), for the generation
commands' tests."""

from __future__ import annotations

from pathlib import Path

import torch

SENTINELS = [f"<extra_id_{i}>" for i in range(10)]
CORPUS = ["The cute dog walks in the green park.", "A cat sat on the mat in the sun.",
          "Rain fell on the quiet town all day.", "They walked to the park and back home.",
          "The dog and the cat are friends now."] * 20


def build_t5_checkpoint(directory: Path, seed: int = 0) -> Path:
    from tokenizers import AddedToken, decoders, pre_tokenizers, processors, trainers
    from tokenizers import Tokenizer as RustTokenizer
    from tokenizers.models import Unigram

    from bertkit.model.t5 import T5Config, T5ForConditionalGeneration
    from bertkit.tokenization import Tokenizer

    backend = RustTokenizer(Unigram())
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.decoder = decoders.Metaspace()
    backend.train_from_iterator(CORPUS, trainers.UnigramTrainer(vocab_size=80, special_tokens=["<pad>", "</s>", "<unk>"],
                                                                unk_token="<unk>"))
    backend.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SENTINELS])
    backend.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    tokenizer = Tokenizer(backend)
    tokenizer.save_pretrained(directory)

    torch.manual_seed(seed)
    config = T5Config(vocab_size=backend.get_vocab_size(), d_model=16, d_kv=4, d_ff=32, num_layers=2, num_heads=4,
                      decoder_start_token_id=0, eos_token_id=1, pad_token_id=0)
    model = T5ForConditionalGeneration(config)
    with torch.no_grad():  # varied outputs rather than T5 init's near-uniform ones
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.6)
    model.save_pretrained(directory)
    return Path(directory)
