"""`bertkit predict`: run a fine-tuned model on texts; one JSON object per input on stdout.

  bertkit predict --model runs/mrpc/best "The cat sat." "A cat was sitting."   # a pair model: texts two by two
  bertkit predict --model runs/sst2/best "A gem." "Dull."                     # one prediction per text
  bertkit predict --model runs/ner/best "John Smith lives in Paris."          # entities with character spans
  bertkit predict --model runs/mc/best "He opened the jar." "He drank it." "He ate the lid."  # context, then choices
  bertkit predict --model runs/squad/best "When did it open?" "The railway opened in 1887."  # question, context
  bertkit predict --model runs/t5/final "rte sentence1: ... sentence2: ..."   # text-to-text: {"text", "generated_text"}

Input: TEXT arguments, or --file (JSONL: fields --text-field / --pair-field, a "words"
list for tagging, "question" / "context" for QA, or any multiple-choice JSONL/SWAG CSV;
a SQuAD .json file for QA; other files: one text a line, a pair as two tab-separated
texts), or lines on stdin. Output (bertkit.inference.prediction): the input echoed plus labels
with scores, entities with character spans, the chosen index, or the answer span.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from bertkit.commands import add_precision_argument, add_runtime_options, add_skip_bad_lines_argument
from bertkit.commands.generate import add_generation_arguments, check_texts, generation_options
from bertkit.commands.inputs import check_one_source, numbered_lines, read_texts
from bertkit.errors import BertkitError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("predict", help="labels, entities or choices from a fine-tuned model (JSONL)",
                              description="Predict with a fine-tuned model (bertkit best/ or a HF BertFor... "
                                          "checkpoint); prints one JSON object per input.")
    p.add_argument("texts", nargs="*", metavar="TEXT", help="inputs (pairs two by two; multiple choice: context, "
                                                             "then the choices)")
    p.add_argument("--model", required=True, metavar="DIR", help="fine-tuned checkpoint directory")
    p.add_argument("--task", help="a multi-task checkpoint's task (`bertkit finetune multitask`: its tasks/<task>/)")
    p.add_argument("--file", help="read inputs from this file instead (txt / tsv / jsonl, .gz too)")
    p.add_argument("--text-field", default="text", help="JSONL field of the text (default: text)")
    p.add_argument("--pair-field", default="pair", help="JSONL field of the second text of a pair (default: pair)")
    add_skip_bad_lines_argument(p)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-seq-length", type=int, help="default: as the model was fine-tuned")
    p.add_argument("--device", help="cpu, cuda, ... (default: cuda when available; int8: cpu)")
    add_precision_argument(p)
    group = p.add_argument_group("text-to-text models (T5)", "decoding options, as `bertkit generate`")
    add_generation_arguments(group)
    add_runtime_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bertkit.inference.prediction import Predictor
    from bertkit.tasks.multitask import task_checkpoint

    check_one_source(args.texts, args.file)
    model = task_checkpoint(args.model, args.task)  # a multi-task checkpoint's task folder, else --model
    predictor = Predictor.from_pretrained(model, device=args.device, batch_size=args.batch_size,
                                          max_seq_length=args.max_seq_length, generation=generation_options(args),
                                          precision=args.precision)
    inputs = read_inputs(predictor, args)
    results = predictor(inputs, progress=not args.no_progress and len(inputs) >= 2048)
    echo = (lambda text: {"text": text}) if predictor.loaded.generates else \
        predictor.loaded.program_cls.task_family().hook("echo")
    lines = "".join(json.dumps({**echo(item), **result}, ensure_ascii=False) + "\n"
                    for item, result in zip(inputs, results))
    sys.stdout.write(lines)
    return 0


def read_inputs(predictor, args: argparse.Namespace) -> list[Any]:
    """The inputs of `args` in the shape `Predictor` takes for the model's task family
    (its hooks say how: bertkit.tasks.hooks)."""
    if predictor.loaded.generates:  # a text-to-text model: one text per argument, line or JSONL record
        inputs = read_texts(args.texts, args.file, args.text_field, args.skip_bad_lines)
        check_texts(inputs)
        return [item.text for item in inputs]
    family, spec = predictor.loaded.program_cls.task_family(), predictor.loaded.spec
    if args.texts:
        return family.hook("inputs_from_texts")(list(args.texts), spec)
    if args.file:
        inputs = _file_inputs(args.file, family, spec, args.text_field, args.pair_field, args.skip_bad_lines)
    else:
        from_line = family.hook("input_from_line")
        inputs = [from_line(line.text, spec, line.source) for line in numbered_lines(None, args.skip_bad_lines)
                  if line.text.strip()]
    if not inputs:
        raise BertkitError(f"{args.file or '<stdin>'}: empty input, nothing to predict")
    return inputs


def _file_inputs(path: str, family, spec, text_field: str, pair_field: str, skip_bad: bool = False) -> list[Any]:
    from bertkit.tasks.records import file_kind, iter_jsonl

    inputs = family.hook("inputs_from_file")(path, spec)  # a file the family reads itself (SQuAD JSON, SWAG CSV)
    if inputs is not None:
        return inputs
    if file_kind(path) == "table":  # Parquet / Arrow: rows as records of the --text-field / --pair-field columns
        from bertkit.columnar import column_names, expand_inputs, iter_records

        from_record = family.hook("input_from_record")
        return [from_record(record, spec, file, row, text_field, pair_field) for file in expand_inputs([path])
                for row, record in iter_records(file, [c for c in column_names(file) if c in (text_field, pair_field)])]
    if file_kind(path) != "jsonl":
        from_line = family.hook("input_from_line")
        return [from_line(line.text, spec, line.source) for line in numbered_lines(path, skip_bad) if line.text.strip()]
    from_record = family.hook("input_from_record")
    return [from_record(record, spec, path, line_no, text_field, pair_field) for line_no, record in iter_jsonl(path, skip_bad, skip_advice=True)]
