"""Benchmark: one T5 span-corruption training step of bertkit vs transformers, same process.

Step = zero_grad + forward + backward + optimizer step on one batch shaped as T5's span
corruption makes it at max_seq_length 128 (T5's `compute_input_and_target_lengths`: 141
raw tokens -> 128 input tokens, 29 target tokens): each input row is non-noise runs
alternating with one sentinel per noise span (sentinels from the top of the vocabulary
down) and EOS; each target row lists the sentinels with their spans and EOS. Ids are
random; lengths, not values, set the cost. Vocabulary 32,128 (T5's), fp32, dropout
`--dropout` (the presets' 0.1 by default), presets t5-tiny and t5-mini (v1.1: gated-GELU,
untied head).

- bertkit: `T5ForConditionalGeneration` and the shared training loop's optimizer
  (`bertkit.training.optim.build_optimizer`: fused AdamW, decay on matrices only).
- reference: transformers' `T5ForConditionalGeneration` (attn_implementation="sdpa") on
  the same weights (loaded from the checkpoint bertkit saves), with `torch.optim.AdamW` as it
  ships ("transformers") and with bertkit's optimizer ("transformers-eq"): both ratios printed.

A sanity check compares the two losses in eval mode. Timing: best of `--repeats`
interleaved rounds (bench.common), steps and floor on the run's one clock; the ratio transformers / bertkit step time is the
figure to read (target >= 2 at t5-mini).
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
from common import (add_clock_argument, compare_steps, gemm_rate, matmul_flops, reference_optimizers,  # noqa: E402
                    report_floor, report_target, step_clock, with_references)

VOCAB = 32128
EOS, PAD = 1, 0
TARGETS = {"t5-mini": 2.0}
NOISE_DENSITY, MEAN_SPAN = 0.15, 3.0


def span_corruption_batch(batch_size: int, raw_length: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Rows of `raw_length` random tokens with round(raw_length * 0.15) noise tokens in
    round(noise / 3) spans, alternating with the non-noise runs (non-noise first), as
    T5's `random_spans_noise_mask` lays them out: (input_ids, labels) of fixed lengths."""
    rng = np.random.default_rng(seed)
    noise = int(round(raw_length * NOISE_DENSITY))
    spans = max(1, int(round(noise / MEAN_SPAN)))
    inputs, targets = [], []
    for _ in range(batch_size):
        tokens = rng.integers(2, VOCAB - 100, size=raw_length)
        noise_lengths = _split(noise, spans, rng)
        keep_lengths = _split(raw_length - noise, spans, rng)
        source, target, position = [], [], 0
        for span, (keep, drop) in enumerate(zip(keep_lengths, noise_lengths)):
            sentinel = VOCAB - 1 - span
            source += [*tokens[position:position + keep], sentinel]
            target += [sentinel, *tokens[position + keep:position + keep + drop]]
            position += keep + drop
        inputs.append(source + [EOS])
        targets.append(target + [EOS])
    return {"input_ids": torch.tensor(inputs), "attention_mask": torch.ones(len(inputs), len(inputs[0]), dtype=torch.long),
            "labels": torch.tensor(targets)}


def _split(total: int, parts: int, rng: np.random.Generator) -> list[int]:
    """`total` items in `parts` non-empty segments, uniformly at random."""
    cuts = np.sort(rng.choice(np.arange(1, total), size=parts - 1, replace=False))
    return np.diff(np.r_[0, cuts, total]).tolist()


def raw_length_for(input_length: int) -> int:
    """The raw chunk length whose corrupted input is exactly `input_length` tokens with EOS
    (T5's compute_input_and_target_lengths): 128 -> 141."""
    raw = input_length
    while True:
        noise = int(round((raw + 1) * NOISE_DENSITY))
        spans = max(1, int(round(noise / MEAN_SPAN)))
        if raw + 1 - noise + spans + 1 > input_length:
            return raw
        raw += 1


def build_pair(preset: str, dropout: float, device: str):
    import transformers

    from bertkit.model.t5 import T5Config, T5ForConditionalGeneration
    from bertkit.training.config import TrainingConfig
    from bertkit.training.optim import build_optimizer

    config = T5Config.from_preset(preset, vocab_size=VOCAB, dropout_rate=dropout)
    torch.manual_seed(0)
    ours = T5ForConditionalGeneration(config)
    with tempfile.TemporaryDirectory() as directory:  # transformers unties the v1.1 head on load
        ours.save_pretrained(directory)
        ref = transformers.T5ForConditionalGeneration.from_pretrained(directory, attn_implementation="sdpa")
    ours, ref = ours.to(device).train(), ref.to(device).train()
    ours_opt = build_optimizer(ours, TrainingConfig())
    return config, ours, ours_opt, ref, reference_optimizers(ref)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["t5-tiny", "t5-mini"],
                        choices=["t5-tiny", "t5-mini", "t5-small", "t5-base"])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128, help="encoder input length (the data's max_seq_length)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (fp32 on both sides)")
    add_clock_argument(parser)
    parser.add_argument("--dropout", type=float, default=0.1, help="dropout_rate (the presets' 0.1)")
    args = parser.parse_args()
    clock, header = step_clock(parser, args)
    raw = raw_length_for(args.seq_len)
    batch = span_corruption_batch(args.batch_size, raw)
    source, target = batch["input_ids"].shape[1], batch["labels"].shape[1]
    assert source == args.seq_len, (source, args.seq_len)
    print(f"{header}; batch {args.batch_size}: {raw} raw -> {source} input / {target} target tokens, "
          f"vocab {VOCAB}, dropout {args.dropout}; best of {args.repeats} interleaved rounds")
    batch = {k: v.to(args.device) for k, v in batch.items()}
    for preset in args.sizes:
        config, ours, ours_opt, ref, ref_opts = build_pair(preset, args.dropout, args.device)
        diff = sanity_check(ours, ref, batch)
        print(f"\n== {preset}: L{config.num_layers}+{config.num_decoder_layers}/d{config.d_model}/ff{config.d_ff}/"
              f"h{config.num_heads}, {config.feed_forward_proj}, {ours.num_parameters() / 1e6:.2f}M parameters, "
              f"eval-mode |loss difference| {diff:.1e}")
        ours_step = step_function(ours, ours_opt, batch)
        times = compare_steps(with_references(ours_step, ref_opts, lambda opt: step_function(ref, opt, batch)),
                              args.device, args.repeats, clock, args.batch_size * (source + target))
        report_target(times, TARGETS.get(preset))
        if args.device == "cpu":  # the encoder's FFN and the head: the step's largest products
            rows = args.batch_size * source
            shapes = [(rows, config.d_model, config.d_ff), (args.batch_size * target, config.d_model, VOCAB)]
            report_floor(matmul_flops(ours_step), gemm_rate(shapes, clock), times, TARGETS.get(preset), clock)


if __name__ == "__main__":
    main()
