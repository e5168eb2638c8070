"""Benchmark: `model.generate` (bertkit GPT-2) vs transformers' `generate`, both with their KV caches.

The same random GPT-2 (a preset's shapes, vocabulary 32,000) in both, weights copied
through a saved checkpoint; the same left-padded batches of random prompts (lengths
uniform in [prompt_len / 2, prompt_len]); greedy, beam search (4 beams) and sampling
(top-p 0.9, the same global seed on both sides, so the draws are the same). Prints
generated tokens per second for both (tokens: each row's new tokens up to and including
its EOS, the same count for both since the outputs are checked equal) and the ratio
(target >= 1.5 at gpt-mini).

  python bench/bench_gpt_generate.py                                     # gpt-mini
  python bench/bench_gpt_generate.py --sizes gpt-tiny --batches 1 --max-new-tokens 4 --repeats 1   # smoke run
  python bench/bench_gpt_generate.py --profile          # + where the time goes: the top ops of each side
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_generate import top_operators  # noqa: E402
from common import add_clock_argument, clock_of, interleaved_best, load_average, synchronized  # noqa: E402

EOS, PAD = 1, 0
MODES = {"greedy": dict(), "beam-4": dict(num_beams=4), "sample": dict(do_sample=True, top_p=0.9, top_k=0)}


def left_padded_batches(count: int, batch_size: int, prompt_len: int, vocab: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(count):
        lengths = torch.randint(prompt_len // 2, prompt_len + 1, (batch_size,), generator=generator)
        width = int(lengths.max())
        ids = torch.randint(2, vocab, (batch_size, width), generator=generator)
        mask = (torch.arange(width)[None, :] >= (width - lengths)[:, None]).long()
        batches.append((ids * mask, mask))
    return batches


def generated_tokens(sequences: torch.Tensor, prompt_width: int) -> int:
    """New tokens per row up to and including its first EOS, summed."""
    new = sequences[:, prompt_width:]
    is_eos = new == EOS
    ended = is_eos.any(dim=1)
    lengths = torch.where(ended, is_eos.int().argmax(dim=1) + 1, torch.full_like(ended, new.shape[1], dtype=torch.long))
    return int(lengths.sum())


def same_output(ours: torch.Tensor, theirs: torch.Tensor) -> bool:
    """Equal up to each row's EOS, pad after it (transformers' beam search fills with EOS)."""
    after = (theirs == EOS).long().cumsum(dim=1) - (theirs == EOS).long() > 0
    return ours.shape == theirs.shape and torch.equal(ours, theirs.masked_fill(after, PAD))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["gpt-mini"], choices=["gpt-tiny", "gpt-mini", "gpt2"])
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--profile", action="store_true", help="print each side's top operators (torch.profiler)")
    add_clock_argument(parser)
    args = parser.parse_args()
    clock = clock_of(args, parser)
    torch.set_num_threads(args.threads)

    import transformers

    from bertkit import GPT2LMHeadModel
    from bertkit.model.gpt.config import GPT2_PRESETS

    print(f"torch {torch.__version__}, transformers {transformers.__version__}; {args.batches} batches of "
          f"{args.batch_size}, prompts {args.prompt_len // 2}-{args.prompt_len} tokens (left-padded), max_new_tokens "
          f"{args.max_new_tokens}, vocab {args.vocab_size}; {args.threads} threads, {args.device}; best of "
          f"{args.repeats} interleaved rounds; {load_average()}")
    for size in args.sizes:
        torch.manual_seed(0)
        sizes = {k: v for k, v in GPT2_PRESETS[size].items() if k != "vocab_size"}
        config = transformers.GPT2Config(vocab_size=args.vocab_size, bos_token_id=EOS, eos_token_id=EOS,
                                         pad_token_id=PAD, **sizes)
        reference = transformers.GPT2LMHeadModel(config).eval()
        with torch.no_grad():  # weights that make varied, sometimes short, outputs
            for parameter in reference.parameters():
                parameter.normal_(0.0, 0.2)
        with tempfile.TemporaryDirectory() as directory:
            reference.save_pretrained(directory)
            ours = GPT2LMHeadModel.from_pretrained(directory).eval()
        reference.to(args.device), ours.to(args.device)
        batches = [(i.to(args.device), m.to(args.device))
                   for i, m in left_padded_batches(args.batches, args.batch_size, args.prompt_len, args.vocab_size)]
        for name in args.modes:
            def run(model, options=MODES[name]):
                def go():
                    torch.manual_seed(123)  # sampling: the same draws on both sides
                    with torch.inference_mode():
                        return [model.generate(input_ids=i, attention_mask=m, max_new_tokens=args.max_new_tokens,
                                               use_cache=True, **options) for i, m in batches]
                return synchronized(go, args.device)

            times, results = interleaved_best({"transformers": run(reference), "bertkit": run(ours)}, args.repeats, clock)
            equal = all(same_output(o.cpu(), t.cpu()) for o, t in zip(results["bertkit"], results["transformers"]))
            tokens = sum(generated_tokens(seq.cpu(), i.shape[1]) for seq, (i, _) in zip(results["bertkit"], batches))
            ref_rate, our_rate = tokens / times["transformers"], tokens / times["bertkit"]
            print(f"{size:8s} {name:7s} transformers {ref_rate:9.1f} tok/s   bertkit {our_rate:9.1f} tok/s   "
                  f"ratio {our_rate / ref_rate:5.2f} ({clock.label})   outputs equal: {equal}   {load_average()}")
            if args.profile:
                for side, model in (("transformers", reference), ("bertkit", ours)):
                    print(f"--- {size} {name} {side}: top operators by self time")
                    print(top_operators(run(model)))


if __name__ == "__main__":
    main()
