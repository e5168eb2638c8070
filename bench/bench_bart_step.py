"""Benchmark: BART's denoising training step and its generation, bertkit vs transformers, same process.

Step = zero_grad + forward + backward + optimizer step on one batch shaped as BART's
denoising makes it from `--seq-len`-token documents: infilling masks 30% of the tokens
in Poisson(3) spans, one <mask> each, so a source is ~0.8 x the target (`<s> ... </s>`)
and the target is the whole document. Ids are random; lengths, not values, set the
cost. Vocabulary 32,000 (`tokenizer train --vocab-size 32000`), fp32, dropout 0.1
(the presets'), preset bart-mini (4+4 x 256) by default.

- bertkit: `BartForConditionalGeneration` and the training loop's optimizer
  (`bertkit.training.optim.build_optimizer`: fused AdamW, decay on matrices only).
- reference: transformers' `BartForConditionalGeneration` (attn_implementation="sdpa") on
  the same weights (loaded from the checkpoint bertkit saves), with `torch.optim.AdamW` as it
  ships ("transformers") and with bertkit's optimizer ("transformers-eq").

Reported: step times and both ratios; the step's matmul FLOPs (FlopCounterMode) as a
fraction of the best fp32 GEMM rate measured in the same run on the same clock as the
step (target: >= 70%). Generation is timed on that clock too.

Generation (`--generate`, on by default): `model.generate` vs transformers' `generate` on
the same random bart-mini (weights drawn wider so outputs vary and end at different
steps), greedy and beam-4 with the KV cache, BART's defaults (EOS start, forced EOS);
generated tokens per second (up to each row's EOS) and the ratio (target >= 1.5), with
the outputs checked equal token for token.

  flock /tmp/bertkit-timing.lock python bench/bench_bart_step.py
  python bench/bench_bart_step.py --repeats 1 --batch-size 4 --seq-len 32 --batches 1 --max-new-tokens 4   # smoke
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_generate import generated_tokens, random_batches  # noqa: E402
from bench_pretrain_step import sanity_check, step_function  # noqa: E402
from common import (add_clock_argument, compare_steps, gemm_rate, interleaved_best, matmul_flops,  # noqa: E402
                    reference_optimizers, report_floor, step_clock, synchronized, with_references)

VOCAB = 32000
BOS, PAD, EOS = 0, 1, 2
FLOOR_TARGET = 0.70  # matmul FLOPs at >= 70% of the best fp32 GEMM rate measured in the run
GENERATE_TARGET = 1.5


def denoising_batch(batch_size: int, length: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """(input_ids, attention_mask, labels): targets of `length` tokens `<s> ... </s>`; sources of
    round(0.8 * length) (30% of the tokens in spans of ~3, each one <mask>)."""
    rng = np.random.default_rng(seed)
    source_length = round(0.8 * length)
    labels = rng.integers(5, VOCAB, size=(batch_size, length))
    inputs = rng.integers(5, VOCAB, size=(batch_size, source_length))
    labels[:, 0], labels[:, -1], inputs[:, 0], inputs[:, -1] = BOS, EOS, BOS, EOS
    return {"input_ids": torch.tensor(inputs), "attention_mask": torch.ones(batch_size, source_length, dtype=torch.long),
            "labels": torch.tensor(labels)}


def build_pair(preset: str, device: str):
    import transformers

    from bertkit import BartConfig, BartForConditionalGeneration
    from bertkit.training.config import TrainingConfig
    from bertkit.training.optim import build_optimizer

    config = BartConfig.from_preset(preset, vocab_size=VOCAB)
    torch.manual_seed(0)
    ours = BartForConditionalGeneration(config)
    with tempfile.TemporaryDirectory() as directory:
        ours.save_pretrained(directory)
        ref = transformers.BartForConditionalGeneration.from_pretrained(directory, attn_implementation="sdpa")
    ours, ref = ours.to(device).train(), ref.to(device).train()
    return config, ours, build_optimizer(ours, TrainingConfig()), ref, reference_optimizers(ref)


def bench_step(args, clock, preset: str) -> None:
    batch = {k: v.to(args.device) for k, v in denoising_batch(args.batch_size, args.seq_len).items()}
    source, target = batch["input_ids"].shape[1], batch["labels"].shape[1]
    config, ours, ours_opt, ref, ref_opts = build_pair(preset, args.device)
    diff = sanity_check(ours, ref, batch)
    print(f"\n== {preset} step: L{config.encoder_layers}+{config.decoder_layers}/d{config.d_model}/"
          f"ff{config.encoder_ffn_dim}/h{config.encoder_attention_heads}, {ours.num_parameters() / 1e6:.2f}M parameters; "
          f"batch {args.batch_size}: {source} source / {target} target tokens; eval-mode |loss difference| {diff:.1e}")
    ours_step = step_function(ours, ours_opt, batch)
    times = compare_steps(with_references(ours_step, ref_opts, lambda opt: step_function(ref, opt, batch)),
                          args.device, args.repeats, clock, args.batch_size * (source + target))
    if args.device == "cpu":  # the FFNs and the vocabulary head: the step's largest products
        shapes = [(args.batch_size * source, config.d_model, config.encoder_ffn_dim),
                  (args.batch_size * target, config.d_model, VOCAB)]
        flops, rate = matmul_flops(ours_step), gemm_rate(shapes, clock)
        report_floor(flops, rate, times, None, clock)
        share = flops / rate / times["bertkit"]
        print(f"  matmul FLOPs at {share:.0%} of the best fp32 GEMM rate, both in {clock.label}: target >= {FLOOR_TARGET:.0%}: "
              f"{'PASS' if share >= FLOOR_TARGET else 'MISS'}")


def bench_generate(args, clock, preset: str) -> None:
    import transformers

    from bertkit import BartForConditionalGeneration
    from bertkit.model.bart.config import BART_PRESETS

    torch.manual_seed(0)
    config = transformers.BartConfig(vocab_size=VOCAB, dropout=0.0, **BART_PRESETS[preset])
    reference = transformers.BartForConditionalGeneration(config).eval()
    with torch.no_grad():  # wider than BART's init: varied outputs that end at different steps
        for parameter in reference.parameters():
            parameter.normal_(0.0, 0.2)
    with tempfile.TemporaryDirectory() as directory:
        reference.save_pretrained(directory)
        ours = BartForConditionalGeneration.from_pretrained(directory).eval()
    reference.to(args.device), ours.to(args.device)
    batches = [(i.to(args.device), m.to(args.device))
               for i, m in random_batches(args.batches, args.generate_batch_size, args.source_len, VOCAB)]
    print(f"\n== {preset} generate: {args.batches} batches of {args.generate_batch_size}, sources "
          f"{args.source_len // 2}-{args.source_len} tokens, max_new_tokens {args.max_new_tokens}")
    for name, beams in (("greedy", 1), ("beam-4", 4)):
        def run(model):
            def go():
                with torch.inference_mode():
                    return [model.generate(input_ids=i, attention_mask=m, max_new_tokens=args.max_new_tokens,
                                           num_beams=beams, use_cache=True) for i, m in batches]
            return synchronized(go, args.device)

        times, results = interleaved_best({"transformers": run(reference), "bertkit": run(ours)}, args.repeats, clock)
        equal = all(torch.equal(o.cpu(), t.cpu()) for o, t in zip(results["bertkit"], results["transformers"]))
        tokens = sum(generated_tokens(seq.cpu(), EOS) for seq in results["bertkit"])
        ref_rate, our_rate = tokens / times["transformers"], tokens / times["bertkit"]
        verdict = "PASS" if our_rate / ref_rate >= GENERATE_TARGET and equal else "MISS"
        print(f"  {name:7s} transformers {ref_rate:9.1f} tok/s   bertkit {our_rate:9.1f} tok/s   ratio "
              f"{our_rate / ref_rate:5.2f} ({clock.label}; target >= {GENERATE_TARGET}: {verdict})   outputs equal: {equal}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["bart-mini"], choices=["bart-tiny", "bart-mini", "bart-base"])
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=128, help="target (document) length; sources are 0.8x")
    parser.add_argument("--no-generate", action="store_true", help="time the training step only")
    parser.add_argument("--batches", type=int, default=4, help="generation: batches of sources")
    parser.add_argument("--generate-batch-size", type=int, default=8)
    parser.add_argument("--source-len", type=int, default=64)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (fp32 on both sides)")
    add_clock_argument(parser)
    args = parser.parse_args()
    clock, header = step_clock(parser, args)
    print(f"{header}; vocab {VOCAB}, fp32, dropout 0.1; best of {args.repeats} interleaved rounds")
    for preset in args.sizes:
        bench_step(args, clock, preset)
        if not args.no_generate:
            bench_generate(args, clock, preset)


if __name__ == "__main__":
    main()
