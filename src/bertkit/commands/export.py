"""`bertkit export onnx`: a checkpoint (with its task head) as an ONNX model plus a sidecar
folder that runs without bertkit (bertkit.inference.onnx_export)."""

from __future__ import annotations

import argparse
import json

from bertkit.commands import add_runtime_options


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("export", help="export a model to another runtime (onnx)")
    formats = parser.add_subparsers(dest="export_format", metavar="{onnx}")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    p = formats.add_parser(
        "onnx", help="export a model with its task head to ONNX, checked against PyTorch",
        description="Export --model (a fine-tuned model with its task head, or any checkpoint's encoder) to an "
                    "ONNX file with dynamic batch_size / sequence_length (/ num_choices) axes, check it with ONNX "
                    "Runtime against PyTorch on other batch shapes, and write the tokenizer, config.json (label "
                    "names) and onnx_config.json beside it. Prints the check as one JSON object.")
    p.add_argument("--model", required=True, metavar="DIR", help="checkpoint directory")
    p.add_argument("--output", "-o", required=True, metavar="FILE", help="the .onnx file to write (its folder gets "
                                                                          "the sidecar files)")
    p.add_argument("--precision", choices=("fp32", "int8"), default="fp32",
                   help="fp32 (default) or int8 (ONNX Runtime dynamic quantization of the exported model)")
    p.add_argument("--opset", type=int, default=None, help="ONNX opset (>= 14; default 17)")
    add_runtime_options(p, progress=False)
    p.set_defaults(func=run_onnx)


def run_onnx(args: argparse.Namespace) -> int:
    from bertkit.inference.onnx_export import DEFAULT_OPSET, export_onnx

    report = export_onnx(args.model, args.output, precision=args.precision,
                         opset=DEFAULT_OPSET if args.opset is None else args.opset)
    summary = {"output": str(report.path), "task": report.task, "precision": report.precision, "opset": report.opset,
               "input_axes": report.input_axes, "outputs": report.outputs,
               "max_abs_diff": {k: float(f"{v:.3g}") for k, v in report.max_abs_diff.items()},
               "argmax_agreement": report.argmax_agreement, "min_cosine": report.min_cosine, "sidecar": report.sidecar}
    print(json.dumps({k: v for k, v in summary.items() if v is not None}))
    return 0
