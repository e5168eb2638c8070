"""Benchmark: XLNet sequence-classification inference of bertkit vs transformers, same process.

The same random `XLNetForSequenceClassification` (2 labels) in both, weights copied
through the checkpoint bertkit saves; `--batches` batches of `--batch-size` rows
`text <sep> <cls>` of random ids whose lengths are mixed (log-normal, median
`--max-len` / 3, cut to [8, `--max-len`]). Each side gets the batch as its own collate
makes it: transformers left-padded (XLNet's tokenizer pads on the left), bertkit
right-padded (bertkit's collate; the head reads <cls> at each row's last real token and
the model may run the unpadded path). The logits are checked to agree. Forward only,
eval mode, `torch.inference_mode`.

Timing: one warm-up pass each, then the median of `--repeats` interleaved rounds
(bench.common), the load average printed with it; the ratio transformers / bertkit is
the figure to read (target >= 2).

  python bench/bench_xlnet_inference.py                                        # tiny and mini
  python bench/bench_xlnet_inference.py --sizes tiny --batches 1 --batch-size 4 --repeats 1   # smoke run
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_xlnet_step import CLS, MASK, PAD, SEP, VOCAB, reference_copy  # noqa: E402
from common import compare_medians, step_clock  # noqa: E402

TARGET = 2.0


def mixed_batches(count: int, batch_size: int, max_len: int, seed: int = 0) -> list[list[np.ndarray]]:
    """`count` batches of rows `ids <sep> <cls>` with log-normal lengths in [8, max_len]."""
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(count):
        lengths = np.clip(np.round(rng.lognormal(np.log(max_len / 3), 0.6, size=batch_size)), 8, max_len).astype(int)
        batches.append([np.r_[rng.integers(MASK + 1, VOCAB, size=n - 2), SEP, CLS] for n in lengths])
    return batches


def padded(rows: list[np.ndarray], left: bool) -> dict[str, torch.Tensor]:
    """input_ids, token_type_ids (<cls>: 2) and attention_mask, padded on the left or the right."""
    width = max(len(row) for row in rows)
    ids = np.full((len(rows), width), PAD, dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, row in enumerate(rows):
        place = slice(width - len(row), width) if left else slice(0, len(row))
        ids[i, place], mask[i, place] = row, 1
    types = np.where(ids == CLS, 2, 0)
    return {"input_ids": torch.tensor(ids), "token_type_ids": torch.tensor(types), "attention_mask": torch.tensor(mask)}


def build_pair(preset: str, device: str):
    import transformers

    from bertkit.model.xlnet import XLNetForSequenceClassification
    from bertkit.model.xlnet.config import XLNetConfig

    config = XLNetConfig.from_preset(preset, vocab_size=VOCAB, pad_token_id=PAD, mem_len=None, num_labels=2)
    torch.manual_seed(0)
    ours = XLNetForSequenceClassification(config)
    with tempfile.TemporaryDirectory() as directory:
        ref = reference_copy(ours, transformers.XLNetForSequenceClassification, directory)
    return config, ours.to(device).eval(), ref.to(device).eval()


def classify(model, batches: list[dict[str, torch.Tensor]]):
    def run() -> list[torch.Tensor]:
        with torch.inference_mode():
            return [model(**batch).logits for batch in batches]

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["tiny", "mini"], choices=["tiny", "mini", "small", "medium", "base"])
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-len", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (fp32 on both sides)")
    parser.add_argument("--cpu-time", action="store_true", help="time CPU seconds (with --threads 1) instead of wall")
    args = parser.parse_args()
    clock, header = step_clock(parser, args)
    rows = mixed_batches(args.batches, args.batch_size, args.max_len)
    lengths = np.array([len(row) for batch in rows for row in batch])
    theirs = [{k: v.to(args.device) for k, v in padded(batch, left=True).items()} for batch in rows]
    ours_in = [{k: v.to(args.device) for k, v in padded(batch, left=False).items()} for batch in rows]
    padded_tokens = sum(int(batch["input_ids"].numel()) for batch in theirs)
    print(f"{header}; {args.batches} batches of {args.batch_size} rows, lengths {lengths.min()}-{lengths.max()} "
          f"(mean {lengths.mean():.0f}; {lengths.sum()} tokens, {padded_tokens} padded); "
          f"median of {args.repeats} interleaved rounds after one warm-up pass")
    for preset in args.sizes:
        config, ours, ref = build_pair(preset, args.device)
        ours_run, ref_run = classify(ours, ours_in), classify(ref, theirs)
        diff = max(float((a - b).abs().max()) for a, b in zip(ours_run(), ref_run()))
        print(f"\n== {preset}: L{config.n_layer}/d{config.d_model}/ff{config.d_inner}/h{config.n_head}, "
              f"{ours.num_parameters() / 1e6:.2f}M parameters, max |logit difference| {diff:.1e}")
        times = compare_medians({"bertkit": ours_run, "transformers": ref_run}, args.device, args.repeats, clock,
                                "rows", args.batches * args.batch_size)
        ratio = times["transformers"] / times["bertkit"]
        print(f"  target >= {TARGET}: {'PASS' if ratio >= TARGET else 'MISS'}")


if __name__ == "__main__":
    main()
