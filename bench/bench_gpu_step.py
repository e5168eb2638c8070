"""Benchmark: the shared training loop's step on a GPU, tokens/s and MFU, one case a run.

Each case trains a model of one family through `bertkit.training.loop.Trainer` itself (bf16
autocast over fp32 master weights, fused AdamW, clipping and the non-finite check on the
device, statistics read at log steps only), fed one fixed batch by a program that does
nothing else: `--warmup` steps (compilation included), then `--steps` timed ones, read
from the loop's own metrics record of that window. Beside it, where asked, the same
model in a bare step (zero_grad, forward, backward, optimizer step; the loop's overhead is
the difference) and transformers' eager model at the same batch (attn_implementation
sdpa, torch.optim.AdamW, the same autocast), each timed over the same number of steps
ended by one synchronize.

MFU = the model's FLOPs per second over the card's dense peak for the precision
(bertkit.training.throughput: 6 x non-embedding parameters + 12 x layers x hidden x
sequence length per token, PaLM's count; the peak from the datasheet table). For T5 each
stack counts its own tokens: 6 N_enc + 12 L_enc H T_enc per input token, 6 (N_dec + head)
+ 12 L_dec H (T_dec + T_enc) per target token (self- and cross-attention). The measured
rate of one large bf16 matmul is printed beside the table's peak. On a CPU (the dry run:
`--device cpu --preset tiny`) there is no table peak and MFU is left out.

  python bench/bench_gpu_step.py --case bert --batch-sizes 64 128 256 --reference     # BERT-base, seq 128
  python bench/bench_gpu_step.py --case bert --seq-len 512 --batch-sizes 16 32
  python bench/bench_gpu_step.py --case t5 --seq-len 512 --batch-sizes 32
  python bench/bench_gpu_step.py --case xlnet --seq-len 512 --batch-sizes 16
  python bench/bench_gpu_step.py --case generate --batch-sizes 32
  python bench/bench_gpu_step.py --device cpu --preset tiny --case bert --batch-sizes 2 --steps 2 --warmup 2   # dry run
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import torch

from bertkit.training.program import TrainingProgram

sys.path.insert(0, os.path.dirname(__file__))
from common import WALL  # noqa: E402  (wall time: every timing here ends with a synchronize)

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def preset_name(case: str, preset: str) -> str:
    """The case's model preset: T5's presets are called t5-<size>."""
    if case in ("t5", "generate") and not preset.startswith("t5-"):
        return f"t5-{preset}"
    return preset


# ---- models and batches of each family -------------------------------------------------------------
def bert_case(preset: str, batch_size: int, seq_len: int):
    from bench_pretrain_step import make_batch

    from bertkit import BertConfig, BertForPreTraining

    config = BertConfig.from_preset(preset, max_position_embeddings=max(512, seq_len))
    model = BertForPreTraining(config)
    batch = make_batch(config.vocab_size, batch_size, seq_len)

    def reference():
        import transformers

        fields = {k: v for k, v in config.to_dict().items() if k != "pre_layer_norm"}
        ref = transformers.BertForPreTraining(transformers.BertConfig(**fields, attn_implementation="sdpa"))
        ref.load_state_dict(model.state_dict(), strict=False)
        ref.tie_weights()
        return ref

    return model, batch, reference


def t5_case(preset: str, batch_size: int, seq_len: int):
    from bench_t5_step import VOCAB, raw_length_for, span_corruption_batch

    from bertkit import T5Config, T5ForConditionalGeneration

    config = T5Config.from_preset(preset, vocab_size=VOCAB)
    model = T5ForConditionalGeneration(config)
    batch = span_corruption_batch(batch_size, raw_length_for(seq_len))

    def reference():
        import transformers

        with tempfile.TemporaryDirectory() as directory:
            model.save_pretrained(directory)
            return transformers.T5ForConditionalGeneration.from_pretrained(directory, attn_implementation="sdpa")

    return model, batch, reference


def xlnet_case(preset: str, batch_size: int, seq_len: int):
    from bench_xlnet_step import PAD, VOCAB, permutation_batch

    from bertkit import XLNetConfig, XLNetLMHeadModel

    config = XLNetConfig.from_preset(preset, vocab_size=VOCAB, pad_token_id=PAD, mem_len=None)
    model = XLNetLMHeadModel(config)
    batch = permutation_batch(batch_size, seq_len)

    def reference():
        import transformers

        with tempfile.TemporaryDirectory() as directory:
            model.save_pretrained(directory)
            return transformers.XLNetLMHeadModel.from_pretrained(directory)

    return model, batch, reference


CASES = {"bert": bert_case, "t5": t5_case, "xlnet": xlnet_case}


def step_flops(model, batch: dict[str, torch.Tensor]) -> float:
    """The model's FLOPs for one step on `batch` (module docstring)."""
    from bertkit.training.throughput import ModelFlops, non_embedding_parameters

    config = model.config
    if getattr(config, "num_decoder_layers", None):  # T5: each stack its own tokens
        batch_size, source = batch["input_ids"].shape
        target = batch["labels"].shape[1]
        head = getattr(model, "lm_head", None)
        decoder = non_embedding_parameters(model.decoder) + (head.weight.numel() if head is not None else 0)
        encoder = non_embedding_parameters(model.encoder)
        per_source = 6 * encoder + 12 * config.num_layers * config.d_model * source
        per_target = 6 * decoder + 12 * config.num_decoder_layers * config.d_model * (target + source)
        return float(batch_size * (source * per_source + target * per_target))
    tokens = int(batch["attention_mask"].sum()) if "attention_mask" in batch else batch["input_ids"].numel()
    return float(tokens * ModelFlops.of(model).per_token(batch["input_ids"].shape[-1]))


# ---- the loop's step -------------------------------------------------------------------------------
class FixedBatch(TrainingProgram):
    """A training program that hands the loop the same batch at every micro-batch."""

    def __init__(self, batch: dict[str, torch.Tensor]):
        self.batch = batch

    def fix_shapes(self, model):
        """As a masked-LM objective does before compiling: a static budget of MLM rows per sequence
        (bertkit.model.static_shapes), here the fixed batch's own largest count."""
        if "labels" in self.batch and self.batch["labels"].dim() == 2:
            from bertkit.model.static_shapes import set_prediction_budget

            set_prediction_budget(model, max(1, int((self.batch["labels"] != -100).sum(1).max())))

    def num_train_examples(self):
        return 1_000_000

    def train_example(self, index, epoch):
        return index

    def collate(self, examples):
        return self.batch

    def loss_counts(self, batch):
        return {"steps": 1.0}

    def compute_loss(self, model, batch, totals):
        return model(**batch).loss, {}

    def summarize(self, stats):
        return {}

    def save_pretrained(self, model, directory, state_dict=None):
        pass  # nothing to keep


def loop_step_time(model, batch, args, compile_mode: str | None, output_dir: Path) -> tuple[float, dict]:
    """Seconds a step of the shared loop takes on `batch` (the timed window's record), and the record
    (with the run's wall time, compilation included: `train_wall_s`). compile_mode None: eager."""
    from bertkit.training.config import TrainingConfig
    from bertkit.training.distributed import setup
    from bertkit.training.loop import Trainer

    batch_size = batch["input_ids"].shape[0]
    config = TrainingConfig(max_steps=args.warmup + args.steps, batch_size=batch_size, log_steps=args.steps,
                            eval_steps=10**9, save_steps=10**9, precision=args.precision,
                            compile=compile_mode is not None, compile_mode=compile_mode or "default", progress=False, tensorboard=False, save_checkpoints=False, warmup_steps=0)
    device = "cuda:0" if args.device == "cuda" else args.device  # torch.cuda.set_device wants an index
    trainer = Trainer(FixedBatch(batch), config, output_dir, ctx=setup(device))
    started = WALL()
    result = trainer.train(model)
    wall = WALL() - started
    record = [r for r in result.records if "tok/s" in r][-1]
    tokens = float(batch["attention_mask"].sum()) if "attention_mask" in batch else float(batch["input_ids"].numel())
    return tokens / record["tok/s"], {**record, "mfu_counted_as": trainer.describe_mfu(), "train_wall_s": wall}


def bare_step_time(model, batch, args, fused: bool) -> float:
    """Seconds of a bare step (zero_grad, forward, backward, AdamW step), `--steps` in a row
    after `--warmup`, ended by one synchronize."""
    device = torch.device(args.device)
    model = model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), fused=True) if fused else torch.optim.AdamW(model.parameters())
    on_device = {k: v.to(device) for k, v in batch.items()}
    dtype = DTYPES[args.precision]

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype, enabled=args.precision != "fp32"):
            loss = model(**on_device).loss
        loss.backward()
        optimizer.step()

    for _ in range(args.warmup):
        step()
    synchronize(device)
    start = WALL()
    for _ in range(args.steps):
        step()
    synchronize(device)
    return (WALL() - start) / args.steps


def free_memory() -> None:
    """Drop the last case's model and optimizer from the GPU before the next one."""
    import gc

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measured_matmul(args) -> float | None:
    """FLOP/s of one n^3 matmul in the run's precision (n = 8192 on a GPU), best of 5; None on a CPU."""
    if args.device == "cpu":
        return None
    n, dtype = 8192, DTYPES[args.precision]
    a, b = (torch.randn(n, n, device=args.device, dtype=dtype) for _ in range(2))
    best = float("inf")
    for _ in range(6):
        synchronize(torch.device(args.device))
        start = WALL()
        torch.mm(a, b)
        synchronize(torch.device(args.device))
        best = min(best, WALL() - start)
    return 2 * n**3 / best


# ---- the cases -------------------------------------------------------------------------------------
def train_case(args, peak) -> dict:
    builder = CASES[args.case]
    preset = preset_name(args.case, args.preset)
    results: dict = {"case": args.case, "preset": preset, "seq_len": args.seq_len, "precision": args.precision, "runs": []}
    best = None
    for batch_size in args.batch_sizes:
        torch.manual_seed(0)
        model, batch, reference = builder(preset, batch_size, args.seq_len)
        flops = step_flops(model, batch)
        for compile_mode in [None, *(args.compile_modes if args.compile else [])]:
            name = "bertkit loop" + (f" + compile {compile_mode}" if compile_mode else "")
            if compile_mode:
                torch.manual_seed(0)
                model, batch, reference = builder(preset, batch_size, args.seq_len)
            try:
                with tempfile.TemporaryDirectory() as directory:
                    seconds, record = loop_step_time(model, batch, args, compile_mode, Path(directory))
            except torch.OutOfMemoryError:
                print(f"  batch {batch_size:4d} {name}: out of memory", flush=True)
                free_memory()
                break
            run = report(name, batch_size, batch, seconds, flops, peak, loop_mfu=record.get("mfu"))
            run["train_wall_s"] = record["train_wall_s"]
            print(f"  {'':10s}{name}: whole run {record['train_wall_s']:.1f} s "
                  f"({args.warmup + args.steps} steps, compilation included)", flush=True)
            results["runs"].append(run)
            results["mfu_counted_as"] = record["mfu_counted_as"]
            if best is None or run["tokens_per_s"] > best["tokens_per_s"]:
                best = run
        del model
        free_memory()
    if best is not None and args.reference:
        batch_size = best["batch_size"]
        torch.manual_seed(0)
        model, batch, reference = builder(preset, batch_size, args.seq_len)
        flops = step_flops(model, batch)
        results["runs"].append(report("bertkit bare step", batch_size, batch, bare_step_time(model, batch, args, True),
                                      flops, peak))
        ref = reference()
        del model
        seconds = bare_step_time(ref, batch, args, fused=False)
        run = report("transformers eager", batch_size, batch, seconds, flops, peak)
        results["runs"].append(run)
        print(f"  at batch {batch_size}: bertkit loop / transformers eager tokens/s = "
              f"{best['tokens_per_s'] / run['tokens_per_s']:.2f}", flush=True)
    results["best"] = best
    return results


def report(name: str, batch_size: int, batch, seconds: float, flops: float, peak, loop_mfu: float | None = None) -> dict:
    tokens = float(batch["attention_mask"].sum()) if "attention_mask" in batch else float(batch["input_ids"].numel())
    run = {"name": name, "batch_size": batch_size, "step_ms": seconds * 1e3, "tokens_per_s": tokens / seconds,
           "model_tflops_per_s": flops / seconds / 1e12}
    mfu = f"  MFU {flops / seconds / peak.flops:6.1%}" if peak is not None else "  (no peak: MFU left out)"
    if peak is not None:
        run["mfu"] = flops / seconds / peak.flops
    if loop_mfu is not None:
        run["loop_reported_mfu"] = loop_mfu
    print(f"  batch {batch_size:4d} {name:26s} step {seconds * 1e3:8.1f} ms  {tokens / seconds:10.0f} tokens/s  "
          f"{flops / seconds / 1e12:7.1f} TFLOP/s{mfu}", flush=True)
    return run


def generate_case(args) -> dict:
    """T5 greedy generation: new tokens per second at each batch size (bf16 autocast or fp32)."""
    from bench_generate import generated_tokens, random_batches

    from bertkit import T5Config, T5ForConditionalGeneration

    preset = preset_name("generate", args.preset)
    device = torch.device(args.device)
    config = T5Config.from_preset(preset, vocab_size=32128)
    torch.manual_seed(0)
    model = T5ForConditionalGeneration(config).to(device).eval()
    results: dict = {"case": "generate", "preset": preset, "source_len": args.seq_len,
                     "max_new_tokens": args.max_new_tokens, "precision": args.precision, "runs": []}
    for batch_size in args.batch_sizes:
        batches = [(i.to(device), m.to(device)) for i, m in random_batches(2, batch_size, args.seq_len, 32128)]

        def run():
            produced = 0
            with torch.no_grad(), torch.autocast(device.type, dtype=DTYPES[args.precision], enabled=args.precision != "fp32"):
                for ids, mask in batches:
                    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=args.max_new_tokens,
                                         min_new_tokens=args.max_new_tokens)
                    produced += generated_tokens(out, config.eos_token_id)
            return produced

        run()  # warm-up
        synchronize(device)
        start = WALL()
        produced = run()
        synchronize(device)
        seconds = WALL() - start
        results["runs"].append({"batch_size": batch_size, "new_tokens": produced, "seconds": seconds,
                                "new_tokens_per_s": produced / seconds})
        print(f"  batch {batch_size:4d}: {produced} new tokens in {seconds:.2f} s = {produced / seconds:9.0f} tokens/s",
              flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", choices=[*CASES, "generate"], required=True)
    parser.add_argument("--preset", default="base", help="tiny .. base (T5: t5-<size>)")
    parser.add_argument("--seq-len", type=int, default=128, help="tokens a row (T5: encoder input; generate: source)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first (a multiple of --steps)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps")
    parser.add_argument("--compile", action="store_true", help="also the loop with --set compile=true")
    parser.add_argument("--compile-modes", nargs="+", default=["default"],
                        help="with --compile: each of torch.compile's modes (--set compile_mode=...), e.g. "
                             "default reduce-overhead max-autotune-no-cudagraphs")
    parser.add_argument("--reference", action="store_true",
                        help="at the best batch, also the bare bertkit step and transformers' eager step")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="generate: new tokens a row")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--precision", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--threads", type=int, default=None, help="torch's CPU threads (the dry run)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    if args.warmup % args.steps or not args.warmup:
        parser.error("--warmup must be a positive multiple of --steps (the timed steps are one logging window)")
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.compile:  # graph-break notices are expected where a family keeps data-dependent counts (T5, XLNet)
        import logging

        torch._logging.set_logs(dynamo=logging.ERROR)
    from bertkit.training.throughput import device_peak

    device = torch.device(args.device)
    peak = device_peak(device, args.precision)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    measured = measured_matmul(args)
    print(f"torch {torch.__version__}, {where}, {args.precision}; peak: "
          f"{peak.source if peak else 'none in the table (MFU left out)'}"
          + (f"; measured {args.precision} 8192^3 matmul {measured / 1e12:.0f} TFLOP/s" if measured else ""), flush=True)
    print(f"case {args.case}, preset {preset_name(args.case, args.preset)}, seq {args.seq_len}, "
          f"{args.warmup} warm-up + {args.steps} timed steps", flush=True)
    results = generate_case(args) if args.case == "generate" else train_case(args, peak)
    results.update(device=where, torch=torch.__version__, peak=peak.source if peak else None,
                   measured_matmul_tflops=measured / 1e12 if measured else None)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
