"""Benchmark: one RoBERTa pre-training step (masked LM) of bertkit vs transformers, same process.

Step = zero_grad + forward + backward + optimizer step on one batch of 32 x 128 tokens:
packed rows `<s> text </s> text </s>` (RoBERTa's FULL-SENTENCES, a document break inside),
random non-special ids, MLM labels from bertkit's Masker (15%, 80/10/10, -100
elsewhere); RoBERTa's vocabulary (50,265), one token type, 514 positions, dropout 0.1
(training mode), fp32.

- bertkit: `bertkit.model.roberta.RobertaForMaskedLM` (the MLM head only at the masked
  positions, fused decoder + loss) and the shared loop's optimizer (fused AdamW,
  beta2 0.98 as the `roberta` objective).
- reference: transformers `RobertaForMaskedLM` (attn_implementation="sdpa", its MLM
  head over all B x T positions) and `torch.optim.AdamW(betas=(0.9, 0.98))` ("transformers"),
  or bertkit's optimizer ("transformers-eq"): both ratios printed, on the run's one clock.

Both hold the same weights; a sanity check compares their losses in eval mode. Timing:
best of `--repeats` interleaved rounds (bench.common.interleaved_best); the ratio
transformers / bertkit step time is the figure to read (> 1: bertkit faster).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_pretrain_step import sanity_check, step_function  # noqa: E402
from common import (add_step_arguments, compare_steps, reference_optimizers, step_clock,  # noqa: E402
                    with_references)

VOCAB = 50265
BOS, PAD, EOS, UNK, MASK = 0, 1, 2, 3, VOCAB - 1  # roberta-base's special ids


def make_batch(batch_size: int, seq_len: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Full-length packed rows with a document break (`</s>`) inside, masked by bertkit's Masker."""
    from bertkit.data.masking import Masker, MaskingConfig

    rng = np.random.default_rng(seed)
    masker = Masker(MaskingConfig(), vocab_size=VOCAB, mask_token_id=MASK, special_ids=[BOS, PAD, EOS, UNK, MASK])
    ids, labels = [], []
    for _ in range(batch_size):
        row = rng.integers(1000, VOCAB - 1, size=seq_len)
        row[0], row[int(rng.integers(seq_len // 4, 3 * seq_len // 4))], row[-1] = BOS, EOS, EOS
        masked, label = masker(row, rng)
        ids.append(masked)
        labels.append(label)
    return {"input_ids": torch.from_numpy(np.stack(ids)),
            "attention_mask": torch.ones(batch_size, seq_len, dtype=torch.int64),
            "labels": torch.from_numpy(np.stack(labels))}


def build_pair(preset: str, device: str):
    import transformers

    from bertkit.model.roberta import RobertaConfig, RobertaForMaskedLM
    from bertkit.training.config import TrainingConfig
    from bertkit.training.optim import build_optimizer

    config = RobertaConfig.from_preset(preset, vocab_size=VOCAB, max_position_embeddings=514, type_vocab_size=1,
                                       layer_norm_eps=1e-5)
    torch.manual_seed(0)
    ours = RobertaForMaskedLM(config).to(device)
    fields = {k: v for k, v in config.to_dict().items() if k != "pre_layer_norm"}
    ref = transformers.RobertaForMaskedLM(transformers.RobertaConfig(**fields, attn_implementation="sdpa")).to(device)
    assert ref.config._attn_implementation == "sdpa", ref.config._attn_implementation
    missing, unexpected = ref.load_state_dict(ours.state_dict(), strict=False)
    assert not unexpected and all(k.startswith("lm_head.decoder.") for k in missing), (missing, unexpected)
    ref.tie_weights()  # decoder weight = word embeddings, decoder bias = lm_head.bias, as in bertkit
    training = dataclasses.replace(TrainingConfig(), adam_beta2=0.98)
    ours_opt = build_optimizer(ours, training)
    return config, ours, ours_opt, ref, reference_optimizers(ref, training=training, betas=(0.9, 0.98))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_step_arguments(parser)
    args = parser.parse_args()
    clock, header = step_clock(parser, args)
    print(f"{header}; batch {args.batch_size} x "
          f"{args.seq_len}, vocab {VOCAB}, dropout 0.1; best of {args.repeats} interleaved rounds")
    for preset in args.sizes:
        config, ours, ours_opt, ref, ref_opts = build_pair(preset, args.device)
        batch = {k: v.to(args.device) for k, v in make_batch(args.batch_size, args.seq_len).items()}
        diff = sanity_check(ours, ref, batch)
        print(f"\n== {preset}: L{config.num_hidden_layers}/H{config.hidden_size}/A{config.num_attention_heads}, "
              f"{ours.num_parameters() / 1e6:.2f}M parameters, eval-mode |loss difference| {diff:.1e}")
        steps = with_references(step_function(ours, ours_opt, batch), ref_opts, lambda opt: step_function(ref, opt, batch))
        compare_steps(steps,
                      args.device, args.repeats, clock, args.batch_size * args.seq_len)


if __name__ == "__main__":
    main()
