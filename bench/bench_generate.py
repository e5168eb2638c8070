"""Benchmark: `model.generate` (bertkit T5) vs transformers' `generate`, both with their KV caches.

The same random T5 (a preset's shapes, v1.1: gated-GELU, untied head) in both, weights
copied through a saved checkpoint; the same padded batches of random source ids
(lengths uniform in [source_len / 2, source_len]); greedy and beam search (4 beams).
Prints generated tokens per second for both (tokens: each row's new tokens up to and
including its EOS, the same count for both since the outputs are checked equal) and
the ratio (target >= 1.5).

  python bench/bench_generate.py                                   # t5-tiny and t5-mini
  python bench/bench_generate.py --sizes t5-tiny --batches 1 --max-new-tokens 4 --repeats 1   # smoke run
  python bench/bench_generate.py --sizes t5-mini --profile      # + where the time goes: the top ops of each
"""

from __future__ import annotations

import argparse
import sys
import tempfile

import torch

sys.path.insert(0, __import__("os").path.dirname(__file__))
from common import add_clock_argument, clock_of, interleaved_best, synchronized  # noqa: E402


def random_batches(count: int, batch_size: int, source_len: int, vocab: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(count):
        lengths = torch.randint(source_len // 2, source_len + 1, (batch_size,), generator=generator)
        ids = torch.randint(2, vocab, (batch_size, int(lengths.max())), generator=generator)
        mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).long()
        batches.append((ids * mask, mask))
    return batches


def generated_tokens(sequences: torch.Tensor, eos: int) -> int:
    """New tokens per row up to and including its first EOS, summed."""
    new = sequences[:, 1:]
    is_eos = new == eos
    ended = is_eos.any(dim=1)
    lengths = torch.where(ended, is_eos.int().argmax(dim=1) + 1, torch.full_like(ended, new.shape[1], dtype=torch.long))
    return int(lengths.sum())


def same_output(ours: torch.Tensor, theirs: torch.Tensor, eos: int, pad: int) -> bool:
    """Equal up to each row's EOS, pad after it (transformers' beam search fills with EOS for T5)."""
    after = (theirs == eos).long().cumsum(dim=1) - (theirs == eos).long() > 0
    return ours.shape == theirs.shape and torch.equal(ours, theirs.masked_fill(after, pad))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["t5-tiny", "t5-mini"], choices=["t5-tiny", "t5-mini", "t5-small"])
    parser.add_argument("--vocab-size", type=int, default=32128)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--source-len", type=int, default=64)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--profile", action="store_true", help="print each side's top operators (torch.profiler)")
    add_clock_argument(parser)
    args = parser.parse_args()
    clock = clock_of(args, parser)
    torch.set_num_threads(args.threads)

    import transformers

    from bertkit.model.t5.config import T5_PRESETS

    from bertkit.model.t5 import T5ForConditionalGeneration

    print(f"{args.batches} batches of {args.batch_size}, sources {args.source_len // 2}-{args.source_len} tokens, "
          f"max_new_tokens {args.max_new_tokens}; {args.threads} threads, {args.device}")
    for size in args.sizes:
        torch.manual_seed(0)
        config = transformers.T5Config(vocab_size=args.vocab_size, decoder_start_token_id=0, eos_token_id=1,
                                       pad_token_id=0, **T5_PRESETS[size])
        reference = transformers.T5ForConditionalGeneration(config).eval()
        with torch.no_grad():  # weights that make varied, sometimes short, outputs
            for parameter in reference.parameters():
                parameter.normal_(0.0, 0.2)
        with tempfile.TemporaryDirectory() as directory:
            reference.save_pretrained(directory)
            ours = T5ForConditionalGeneration.from_pretrained(directory).eval()
        reference.to(args.device), ours.to(args.device)
        batches = [(i.to(args.device), m.to(args.device))
                   for i, m in random_batches(args.batches, args.batch_size, args.source_len, args.vocab_size)]
        for name, beams in (("greedy", 1), ("beam-4", 4)):
            def run(model):
                def go():
                    with torch.inference_mode():
                        return [model.generate(input_ids=i, attention_mask=m, max_new_tokens=args.max_new_tokens,
                                               num_beams=beams, use_cache=True) for i, m in batches]
                return synchronized(go, args.device)

            times, results = interleaved_best({"transformers": run(reference), "bertkit": run(ours)}, args.repeats, clock)
            equal = all(same_output(o.cpu(), t.cpu(), 1, 0) for o, t in zip(results["bertkit"], results["transformers"]))
            tokens = sum(generated_tokens(seq.cpu(), 1) for seq in results["bertkit"])
            ref_rate, our_rate = tokens / times["transformers"], tokens / times["bertkit"]
            print(f"{size:8s} {name:7s} transformers {ref_rate:9.1f} tok/s   bertkit {our_rate:9.1f} tok/s   "
                  f"ratio {our_rate / ref_rate:5.2f} ({clock.label})   outputs equal: {equal}")
            if args.profile:
                for side, model in (("transformers", reference), ("bertkit", ours)):
                    print(f"--- {size} {name} {side}: top operators by self time")
                    print(top_operators(run(model)))


def top_operators(step, rows: int = 12) -> str:
    """One run of `step` under torch.profiler: the operators taking the most self time."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        step()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


if __name__ == "__main__":
    main()
