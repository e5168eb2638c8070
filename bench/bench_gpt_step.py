"""Benchmark: one causal-LM (clm) training step of bertkit's GPT-2 vs transformers', same process.

Step = zero_grad + forward + backward + optimizer step on one batch of `packed` data as
GPT-2 trains on it: rows of `--seq-len` tokens cut from documents joined by EOS, every
position a target (labels = input_ids, shifted inside the model). Ids are random; lengths,
not values, set the cost. Vocabulary 32,000 (the issue's `tokenizer train --vocab-size
32000`), fp32, the presets' dropout (0.1 on embeddings, attention and residuals),
preset gpt-mini (4 x 256, 4 heads) by default.

- bertkit: `GPT2LMHeadModel.causal_lm_loss` (the vocabulary head and the loss fused,
  bertkit.model.heads.decoder_cross_entropy, no (B, T, V) logits kept) and the shared
  training loop's optimizer (`build_optimizer`: fused AdamW, decay on matrices only);
  "bertkit-forward" is the same model through `forward(labels=...)` (transformers'
  contract: full logits, then the loss), for where the time goes.
- reference: transformers' `GPT2LMHeadModel` (attn_implementation="sdpa") on the same
  weights (loaded from the checkpoint bertkit saves), with `torch.optim.AdamW` as it ships
  ("transformers") and with bertkit's optimizer ("transformers-eq"): both ratios printed.

A sanity check compares the two losses in eval mode. Timing: best of `--repeats`
interleaved rounds (bench.common), steps and floor on the run's one clock. Printed beside the transformers / bertkit ratio: the
step's matmul FLOPs (FlopCounterMode) as a fraction of the best fp32 GEMM rate measured
in the same run on the step's own shapes (target: >= 70%).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import (add_clock_argument, compare_steps, gemm_rate, load_average, matmul_flops,  # noqa: E402
                    reference_optimizers, report_floor, step_clock)

VOCAB = 32000
FLOOR_TARGET = 0.70


def packed_batch(batch_size: int, length: int, seed: int = 0) -> torch.Tensor:
    """(B, T) random token ids with an EOS (id 0) between documents every ~100 tokens."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, VOCAB, (batch_size, length), generator=generator)
    ids[torch.rand(batch_size, length, generator=generator) < 0.01] = 0
    return ids


def build_pair(preset: str, device: str):
    import transformers

    from bertkit import GPT2Config, GPT2LMHeadModel
    from bertkit.training.config import TrainingConfig
    from bertkit.training.optim import build_optimizer

    config = GPT2Config.from_preset(preset, vocab_size=VOCAB, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    ours = GPT2LMHeadModel(config)
    with tempfile.TemporaryDirectory() as directory:
        ours.save_pretrained(directory)
        ref = transformers.GPT2LMHeadModel.from_pretrained(directory, attn_implementation="sdpa")
    ours, ref = ours.to(device).train(), ref.to(device).train()
    return config, ours, build_optimizer(ours, TrainingConfig()), ref, reference_optimizers(ref)


def training_step(model, optimizer, loss_of):
    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(model)
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["gpt-mini"], choices=["gpt-tiny", "gpt-mini", "gpt2"])
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (fp32 on both sides)")
    add_clock_argument(parser)
    args = parser.parse_args()
    clock, header = step_clock(parser, args)
    ids = packed_batch(args.batch_size, args.seq_len).to(args.device)
    print(f"{header}; batch {args.batch_size} x {args.seq_len} packed tokens, vocab {VOCAB}, dropout 0.1; "
          f"best of {args.repeats} interleaved rounds; {load_average()}")
    for preset in args.sizes:
        config, ours, ours_opt, ref, ref_opts = build_pair(preset, args.device)
        ours.eval(), ref.eval()
        with torch.no_grad():
            diff = abs(float(ours.causal_lm_loss(ids)) - float(ref(input_ids=ids, labels=ids).loss))
        ours.train(), ref.train()
        print(f"\n== {preset}: L{config.n_layer}/d{config.n_embd}/h{config.n_head}, "
              f"{ours.num_parameters() / 1e6:.2f}M parameters, eval-mode |loss difference| {diff:.1e}")
        ours_step = training_step(ours, ours_opt, lambda m: m.causal_lm_loss(ids))
        steps = {"bertkit": ours_step,
                 "bertkit-forward": training_step(ours, ours_opt, lambda m: m(input_ids=ids, labels=ids).loss),
                 **{name: training_step(ref, opt, lambda m: m(input_ids=ids, labels=ids).loss)
                    for name, opt in ref_opts.items()}}
        times = compare_steps(steps, args.device, args.repeats, clock, args.batch_size * args.seq_len)
        if args.device == "cpu":  # the FFN and the vocabulary head: the step's largest products
            rows = args.batch_size * args.seq_len
            shapes = [(rows, config.n_embd, config.intermediate_size), (rows, config.n_embd, VOCAB)]
            flops, rate = matmul_flops(ours_step), gemm_rate(shapes, clock)
            report_floor(flops, rate, times, None, clock)
            share = flops / rate / times["bertkit"]
            print(f"  matmul FLOPs at {share:.0%} of the best fp32 GEMM rate, both in {clock.label} (target >= {FLOOR_TARGET:.0%}: "
                  f"{'PASS' if share >= FLOOR_TARGET else 'MISS'}); {load_average()}")


if __name__ == "__main__":
    main()
