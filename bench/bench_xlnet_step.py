"""Benchmark: one XLNet permutation-LM pre-training step of bertkit vs transformers, same process.

Step = zero_grad + forward + backward + AdamW step on one batch of full-length rows
`A <sep> B <sep> <cls>` (random non-special ids, XLNet's vocabulary of 32,000) whose
targets and factorization order come from bertkit's xlnet objective's own functions
(bertkit.data.permutation: span targets, about 1/6 of the tokens, n-grams of 1..5 words;
then `bertkit.objectives.xlnet.xlnet_inputs` makes perm_mask (B, T, T), target_mapping
(B, P, T) and labels (B, P)). Both models get the very same tensors. fp32, dropout
`--dropout` (XLNet's 0.1 by default), no memory (the objective's default mem_len 0).

- bertkit: `XLNetLMHeadModel` and the shared training loop's optimizer
  (`bertkit.training.optim.build_optimizer`: fused AdamW, decay on matrices only).
- reference: transformers' `XLNetLMHeadModel` on the same weights (loaded from the
  checkpoint bertkit saves), with `torch.optim.AdamW` as it ships ("transformers") and with
  bertkit's optimizer ("transformers-eq"): both ratios printed.

A sanity check compares the two losses in eval mode. Timing: one warm-up step each, then
the median of `--repeats` interleaved rounds (bench.common), steps and floor on the run's
one clock, the load average printed
with it; the ratio transformers / bertkit step time is the figure to read (target >= 3
at mini).

  python bench/bench_xlnet_step.py                                  # tiny and mini
  python bench/bench_xlnet_step.py --sizes tiny --batch-size 4 --repeats 1   # smoke run
  OMP_NUM_THREADS=1 python bench/bench_xlnet_step.py --threads 1 --cpu-time  # on a shared machine
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_pretrain_step import sanity_check, step_function  # noqa: E402
from common import (add_step_arguments, compare_medians, gemm_rate, matmul_flops,  # noqa: E402
                    reference_optimizers, report_floor, report_target, step_clock,
                    with_references)

VOCAB = 32000
UNK, BOS, EOS, CLS, SEP, PAD, MASK = range(7)  # XLNet's special ids (xlnet-base-cased)
TARGETS = {"mini": 3.0}


def permutation_batch(batch_size: int, seq_len: int, seed: int = 0, prediction_k: float = 6.0,
                      max_gram: int = 5) -> dict[str, torch.Tensor]:
    """Full-length `A <sep> B <sep> <cls>` rows of random ids with the xlnet objective's
    targets and ranks (`XLNetObjective.example` on a tokenizer whose pieces start a word
    two times in three), made into the model's inputs by `xlnet_inputs`."""
    from bertkit.data.permutation import factorization_ranks, sample_targets, target_goal
    from bertkit.objectives.xlnet import CLS_SEGMENT, XLNetSettings, xlnet_inputs

    num_predict = XLNetSettings(prediction_k=prediction_k).resolved_num_predict(seq_len)
    rng = np.random.default_rng(seed)
    ids, types, ranks = [], [], []
    for _ in range(batch_size):
        cut = int(rng.integers(seq_len // 4, 3 * seq_len // 4))  # A's length
        row = rng.integers(MASK + 1, VOCAB, size=seq_len)
        row[cut], row[-2], row[-1] = SEP, SEP, CLS
        segments = np.zeros(seq_len, dtype=np.int64)
        segments[cut + 1:] = 1
        segments[-1] = CLS_SEGMENT
        candidates = row > MASK
        starts = rng.random(seq_len) < 2 / 3
        starts[0] = True
        starts[1:] |= ~candidates[:-1]
        goal = target_goal(seq_len, num_predict, seq_len, int(candidates.sum()))
        ranks.append(factorization_ranks(sample_targets(starts, candidates, goal, rng, max_gram), rng))
        ids.append(row), types.append(segments)
    batch = {"input_ids": torch.tensor(np.stack(ids)), "token_type_ids": torch.tensor(np.stack(types)),
             "attention_mask": torch.ones(batch_size, seq_len, dtype=torch.long),
             "perm_rank": torch.tensor(np.stack(ranks))}
    return xlnet_inputs(batch)


def reference_copy(ours, reference_class, directory: str):
    """transformers' `reference_class` loaded from the checkpoint `ours` saves in `directory`."""
    ours.save_pretrained(directory)
    return reference_class.from_pretrained(directory)


def build_pair(preset: str, dropout: float, device: str):
    import transformers

    from bertkit.model.xlnet import XLNetLMHeadModel
    from bertkit.model.xlnet.config import XLNetConfig
    from bertkit.training.config import TrainingConfig
    from bertkit.training.optim import build_optimizer

    config = XLNetConfig.from_preset(preset, vocab_size=VOCAB, pad_token_id=PAD, mem_len=None, dropout=dropout)
    torch.manual_seed(0)
    ours = XLNetLMHeadModel(config)
    with tempfile.TemporaryDirectory() as directory:
        ref = reference_copy(ours, transformers.XLNetLMHeadModel, directory)
    ours, ref = ours.to(device).train(), ref.to(device).train()
    return config, ours, build_optimizer(ours, TrainingConfig()), ref, reference_optimizers(ref)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_step_arguments(parser)
    parser.add_argument("--dropout", type=float, default=0.1, help="dropout (XLNet's 0.1)")
    args = parser.parse_args()
    clock, header = step_clock(parser, args)
    batch = permutation_batch(args.batch_size, args.seq_len)
    predicted = int((batch["labels"] != -100).sum())
    print(f"{header}; batch {args.batch_size} x {args.seq_len} tokens, {predicted} targets "
          f"({batch['target_mapping'].shape[1]} query rows a row), vocab {VOCAB}, dropout {args.dropout}; "
          f"median of {args.repeats} interleaved rounds after one warm-up step")
    batch = {k: v.to(args.device) for k, v in batch.items()}
    for preset in args.sizes:
        config, ours, ours_opt, ref, ref_opts = build_pair(preset, args.dropout, args.device)
        diff = sanity_check(ours, ref, batch)
        print(f"\n== {preset}: L{config.n_layer}/d{config.d_model}/ff{config.d_inner}/h{config.n_head}, "
              f"{ours.num_parameters() / 1e6:.2f}M parameters, eval-mode |loss difference| {diff:.1e}")
        ours_step = step_function(ours, ours_opt, batch)
        times = compare_medians(with_references(ours_step, ref_opts, lambda opt: step_function(ref, opt, batch)),
                                args.device, args.repeats, clock, "tokens", args.batch_size * args.seq_len)
        report_target(times, TARGETS.get(preset))
        if args.device == "cpu":  # the content stream's FFN and the head at the targets: the largest products
            shapes = [(args.batch_size * args.seq_len, config.d_model, config.d_inner), (predicted, config.d_model, VOCAB)]
            report_floor(matmul_flops(ours_step), gemm_rate(shapes, clock), times, TARGETS.get(preset), clock)


if __name__ == "__main__":
    main()
