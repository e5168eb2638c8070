"""Benchmark: one pre-training model step of bertkit vs transformers, same process.

Step = zero_grad + forward + backward + optimizer step on one batch of 32 x 128 tokens
with BERT's MLM labels (15% of the non-special positions, 80/10/10, -100 elsewhere)
and NSP labels, vocabulary 30,522, dropout 0.1 (training mode), fp32.

- bertkit: `BertForPreTraining` and the optimizer of the shared training loop
  (`bertkit.training.optim.build_optimizer`: fused AdamW, decay on matrices only).
- reference: transformers `BertForPreTraining` (attn_implementation="sdpa", its MLM head
  over all B x T positions) and `torch.optim.AdamW` with default settings ("transformers"),
  or bertkit's optimizer ("transformers-eq", so the ratio leaves the optimizer out): both
  ratios printed.

Both models hold the same weights; a sanity check compares their losses in eval mode.
Timing: best of `--repeats` interleaved rounds (bench.common.interleaved_best), so a
drift in machine load hits both sides alike, all on the run's one clock (printed); the
ratio is the figure to read.

MFU = useful FLOPs of bertkit's step / s, over the fp32 matmul peak measured here (a
2048^3 `torch.mm` timed as one more interleaved candidate, best of the rounds). Useful
FLOPs (forward + backward = 3 x forward, a multiply-add = 2 FLOPs; biases, norms,
softmax and the optimizer not counted):
    6 * tokens * (L - 1) * (4 H^2 + 2 H I)  encoder projections and FFN, all layers but the last
  + 6 * (tokens * 2 H^2 + R * (2 H^2 + 2 H I))   the last: K, V everywhere, the rest at the
                                            R = N + B positions the heads read (masked, [CLS])
  + 12 * B * T * H * ((L - 1) * T + R / B)  attention scores and context
  + 6 * N * (H^2 + V * H)                   MLM transform + decoder at the N masked positions
  + 6 * B * (H^2 + 2 H)                     pooler + NSP classifier
Targets (2-core CPU): ratio >= 6 at tiny (L2/H128/A2), >= 3.5 at mini (L4/H256/A4).

On a machine shared with other jobs, two threads' wall time swings several-fold (a
thread descheduled mid-op stalls the other); `--threads 1 --cpu-time` times CPU seconds
of one thread instead, which load barely moves, for comparing changes. The matmul peak
is measured the same way, so MFU is per core then. `--passive-wait` lets idle OpenMP
threads sleep instead of spin: under load, spinning threads steal the core a
descheduled peer needs, and a step can take 7x longer (measured: 2.2 s instead of 0.3).

On a GPU (`--device cuda`), each timed step ends with a synchronize, and `--precision bf16`
runs both sides under bf16 autocast (what `bertkit pretrain` uses on a GPU that has it);
the peak is then a 8192^3 product in that precision, so MFU is against the card as measured.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

if "--passive-wait" in sys.argv:  # read by OpenMP when it starts, i.e. when torch is imported
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from common import (WALL, add_clock_argument, interleaved_best, print_ratios, reference_optimizers,  # noqa: E402
                    step_clock, synchronized)

TARGETS = {"tiny": 6.0, "mini": 3.5}
CLS, SEP, MASK, PAD, UNK = 101, 102, 103, 0, 100


def make_batch(vocab_size: int, batch_size: int, seq_len: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """[CLS] A [SEP] B [SEP] rows of random non-special ids, full length (no padding),
    masked by bertkit's Masker (token strategy, 15%, 80/10/10), random NSP labels."""
    from bertkit.data.masking import Masker, MaskingConfig

    rng = np.random.default_rng(seed)
    masker = Masker(MaskingConfig(), vocab_size=vocab_size, mask_token_id=MASK, special_ids=[PAD, UNK, CLS, SEP, MASK])
    ids, types, labels = [], [], []
    for _ in range(batch_size):
        cut = int(rng.integers(seq_len // 4, 3 * seq_len // 4))  # [SEP] after segment A
        row = rng.integers(1000, vocab_size, size=seq_len)
        row[0], row[cut], row[-1] = CLS, SEP, SEP
        masked, label = masker(row, rng)
        ids.append(masked)
        labels.append(label)
        types.append(np.r_[np.zeros(cut + 1, dtype=np.int64), np.ones(seq_len - cut - 1, dtype=np.int64)])
    return {
        "input_ids": torch.from_numpy(np.stack(ids)),
        "token_type_ids": torch.from_numpy(np.stack(types)),
        "attention_mask": torch.ones(batch_size, seq_len, dtype=torch.int64),
        "labels": torch.from_numpy(np.stack(labels)),
        "next_sentence_label": torch.from_numpy(rng.integers(0, 2, size=batch_size)),
    }


PEAK_SIZE = {"cpu": 2048, "cuda": 8192}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def peak_matmul(device: str, precision: str):
    """One n^3 `torch.mm` in the step's precision (n = PEAK_SIZE of the device), timed among
    the candidates so that the peak is measured under the same machine load and clock as
    the steps; returns (the product, its FLOPs)."""
    n, dtype = PEAK_SIZE[torch.device(device).type], DTYPES[precision]
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    out = torch.empty(n, n, device=device, dtype=dtype)
    return (lambda: torch.mm(a, b, out=out)), 2 * n**3


def useful_flops(config, batch: dict[str, torch.Tensor]) -> float:
    """Matmul FLOPs of one bertkit training step (module docstring formula)."""
    b, t = batch["input_ids"].shape
    h, i, layers, v = config.hidden_size, config.intermediate_size, config.num_hidden_layers, config.vocab_size
    masked = int((batch["labels"] != -100).sum())
    read = masked + b  # the last layer runs fully only at the masked positions and [CLS]
    encoder = 6 * b * t * (layers - 1) * (4 * h * h + 2 * h * i) + 6 * (b * t * 2 * h * h + read * (2 * h * h + 2 * h * i))
    attention = 12 * (layers - 1) * b * t * t * h + 12 * read * t * h
    mlm = 6 * masked * (h * h + v * h)
    nsp = 6 * b * (h * h + 2 * h)
    return float(encoder + attention + mlm + nsp)


def build_pair(preset: str, compile_model: bool, device: str = "cpu"):
    import transformers

    from bertkit import BertConfig, BertForPreTraining
    from bertkit.training.config import TrainingConfig
    from bertkit.training.optim import build_optimizer

    config = BertConfig.from_preset(preset)
    torch.manual_seed(0)
    ours = BertForPreTraining(config)
    fields = {k: v for k, v in config.to_dict().items() if k != "pre_layer_norm"}
    ref = transformers.BertForPreTraining(transformers.BertConfig(**fields, attn_implementation="sdpa"))
    assert ref.config._attn_implementation == "sdpa", ref.config._attn_implementation
    ref.load_state_dict(ours.state_dict(), strict=False)  # the decoder weight is tied in both
    ref.tie_weights()
    ours, ref = ours.to(device), ref.to(device)
    ours_opt = build_optimizer(ours, TrainingConfig())
    runner = torch.compile(ours) if compile_model else ours
    return config, ours, runner, ours_opt, ref, reference_optimizers(ref)


def step_function(model, optimizer, batch, precision: str = "fp32"):
    device_type = batch["input_ids"].device.type

    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=DTYPES[precision], enabled=precision != "fp32"):
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    return step


def sanity_check(ours, ref, batch) -> float:
    """|loss difference| of the two models in eval mode (no dropout) on the batch."""
    ours.eval(), ref.eval()
    with torch.no_grad():
        diff = abs(float(ours(**batch).loss) - float(ref(**batch).loss))
    ours.train(), ref.train()
    return diff


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["tiny", "mini"], choices=["tiny", "mini", "small", "medium", "base"])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    add_clock_argument(parser)
    parser.add_argument("--passive-wait", action="store_true",
                        help="OMP_WAIT_POLICY=PASSIVE: idle OpenMP threads sleep instead of spinning (shared machines)")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile(bertkit model) (compile time reported apart)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--precision", choices=sorted(DTYPES), default="fp32",
                        help="bf16: autocast on both sides, as `bertkit pretrain` on a GPU")
    args = parser.parse_args()
    clock, header = step_clock(parser, args)
    if args.compile:  # the graph-break notices are expected (data-dependent masking)
        import logging

        torch._logging.set_logs(dynamo=logging.ERROR)
    print(f"{header}, {args.precision}{', OMP_WAIT_POLICY=PASSIVE' if args.passive_wait else ''}")
    print(f"batch {args.batch_size} x {args.seq_len}, vocab 30522, dropout 0.1; best of {args.repeats} interleaved rounds")
    for preset in args.sizes:
        config, ours, runner, ours_opt, ref, ref_opts = build_pair(preset, args.compile, args.device)
        batch = {k: v.to(args.device) for k, v in make_batch(config.vocab_size, args.batch_size, args.seq_len).items()}
        masked = int((batch["labels"] != -100).sum())
        diff = sanity_check(ours, ref, batch)
        peak_product, peak_flops = peak_matmul(args.device, args.precision)
        candidates = {"bertkit": step_function(ours, ours_opt, batch, args.precision),
                      **{name: step_function(ref, opt, batch, args.precision) for name, opt in ref_opts.items()},
                      "peak": peak_product}
        if args.compile:
            compiled = step_function(runner, ours_opt, batch, args.precision)
            seconds, _ = WALL.elapsed(compiled)
            print(f"[{preset}] torch.compile: first step (compilation included) {seconds:.1f} s wall")
            candidates["bertkit+compile"] = compiled
        candidates = {name: synchronized(step, args.device) for name, step in candidates.items()}
        for step in candidates.values():  # warm-up: optimizer state, allocator, kernels
            step()
        times, _ = interleaved_best(candidates, args.repeats, clock)
        peak = peak_flops / times.pop("peak")
        tokens = args.batch_size * args.seq_len
        flops = useful_flops(config, batch)
        ratio = times["transformers"] / times["bertkit"]
        target = TARGETS.get(preset)
        verdict = "" if target is None else ("PASS" if ratio >= target else "MISS")
        print(f"\n== {preset}: L{config.num_hidden_layers}/H{config.hidden_size}/A{config.num_attention_heads}, "
              f"{masked} masked positions, eval-mode |loss difference| {diff:.1e}; "
              f"{args.precision} matmul peak {peak / 1e9:.0f} GFLOP/s")
        for name, seconds in times.items():
            mfu = f"  MFU {flops / seconds / peak:5.1%}" if name.startswith("bertkit") else ""
            print(f"  {name:16s} step {seconds * 1e3:8.1f} ms  {tokens / seconds:9.0f} tokens/s{mfu}")
        if "bertkit+compile" in times:
            print(f"  compiled / eager bertkit: {times['bertkit'] / times['bertkit+compile']:.2f}")
        print(f"  useful FLOPs per step {flops / 1e9:.1f} G; ratio transformers / bertkit: {ratio:.2f}"
              + (f"  (target >= {target}: {verdict})" if target else ""))
        print_ratios(times, clock)


if __name__ == "__main__":
    main()
