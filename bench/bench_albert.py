"""Benchmark: one ALBERT pre-training step (MLM + SOP) of bertkit vs transformers, same process.

Step = zero_grad + forward + backward + optimizer step on one batch of 32 x 128 tokens:
`[CLS] A [SEP] B [SEP]` rows of random ids, MLM labels from bertkit's Masker (15%,
80/10/10, -100 elsewhere) and random sentence-order labels; vocabulary 30,000,
embedding size E = 128, all layers sharing one set of weights (ALBERT's defaults:
gelu_new, dropout 0 unless `--dropout`), fp32. The batch is bench_pretrain_step's.

- bertkit: `bertkit.model.albert.AlbertForPreTraining` (MLM head only at the masked
  positions, fused decoder + loss) and the shared loop's optimizer (fused AdamW).
- reference: transformers `AlbertForPreTraining` (attn_implementation="sdpa", its MLM
  head over all B x T positions) and `torch.optim.AdamW` with default settings ("transformers"),
  or with bertkit's optimizer ("transformers-eq"): both ratios printed, on the run's one clock.

Both hold the same weights; a sanity check compares their losses in eval mode. Timing:
best of `--repeats` interleaved rounds (bench.common.interleaved_best); the ratio
transformers / bertkit step time is the figure to read (> 1: bertkit faster).
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_pretrain_step import make_batch, sanity_check, step_function  # noqa: E402
from common import (add_step_arguments, compare_steps, reference_optimizers, step_clock,  # noqa: E402
                    with_references)

VOCAB = 30000


def build_pair(preset: str, embedding_size: int, share_layers: str, dropout: float, device: str):
    import transformers

    from bertkit.model.albert import AlbertConfig, AlbertForPreTraining
    from bertkit.training.config import TrainingConfig
    from bertkit.training.optim import build_optimizer

    config = AlbertConfig.from_preset(preset, vocab_size=VOCAB, embedding_size=embedding_size, share_layers=share_layers,
                                      hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    torch.manual_seed(0)
    ours = AlbertForPreTraining(config).to(device)
    fields = {k: v for k, v in config.to_dict().items() if k not in ("pre_layer_norm", "share_layers")}
    ref = transformers.AlbertForPreTraining(transformers.AlbertConfig(**fields, attn_implementation="sdpa")).to(device)
    assert ref.config._attn_implementation == "sdpa", ref.config._attn_implementation
    ref.load_state_dict(ours.state_dict(), strict=False)  # the decoder is tied to the word embeddings in both
    ref.tie_weights()
    ours_opt = build_optimizer(ours, TrainingConfig())
    return config, ours, ours_opt, ref, reference_optimizers(ref)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_step_arguments(parser)
    parser.add_argument("--embedding-size", type=int, default=128)
    parser.add_argument("--share-layers", default="all", choices=["all", "none", "attention", "ffn"])
    parser.add_argument("--dropout", type=float, default=0.0, help="hidden and attention dropout (ALBERT's default 0)")
    args = parser.parse_args()
    clock, header = step_clock(parser, args)
    print(f"{header}; batch {args.batch_size} x "
          f"{args.seq_len}, vocab {VOCAB}, E {args.embedding_size}, share {args.share_layers}, dropout {args.dropout}; "
          f"best of {args.repeats} interleaved rounds")
    for preset in args.sizes:
        config, ours, ours_opt, ref, ref_opts = build_pair(preset, args.embedding_size, args.share_layers, args.dropout,
                                                          args.device)
        batch = make_batch(VOCAB, args.batch_size, args.seq_len)
        batch["sentence_order_label"] = batch.pop("next_sentence_label")
        batch = {k: v.to(args.device) for k, v in batch.items()}
        diff = sanity_check(ours, ref, batch)
        print(f"\n== {preset}: L{config.num_hidden_layers}/H{config.hidden_size}/A{config.num_attention_heads}/"
              f"E{config.embedding_size}, {ours.num_parameters() / 1e6:.2f}M parameters, "
              f"eval-mode |loss difference| {diff:.1e}")
        steps = with_references(step_function(ours, ours_opt, batch), ref_opts, lambda opt: step_function(ref, opt, batch))
        compare_steps(steps,
                      args.device, args.repeats, clock, args.batch_size * args.seq_len)


if __name__ == "__main__":
    main()
