"""`bertkit predict`: run a fine-tuned model on texts; one JSON object per input on stdout.

  bertkit predict --model runs/mrpc/best "The cat sat." "A cat was sitting."   # a pair model: texts two by two
  bertkit predict --model runs/sst2/best "A gem." "Dull."                     # one prediction per text
  bertkit predict --model runs/ner/best "John Smith lives in Paris."          # entities with character spans
  bertkit predict --model runs/mc/best "He opened the jar." "He drank it." "He ate the lid."  # context, then choices
  bertkit predict --model runs/squad/best "When did it open?" "The railway opened in 1887."  # question, context

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

from bertkit.commands.inputs import check_one_source, numbered_lines
from bertkit.errors import BertkitError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("predict", help="labels, entities or choices from a fine-tuned model (JSONL)",
                              description="Predict with a fine-tuned model (bertkit best/ or a HF BertFor... "
                                          "checkpoint); prints one JSON object per input.")
    p.add_argument("texts", nargs="*", metavar="TEXT", help="inputs (pairs two by two; multiple choice: context, "
                                                             "then the choices)")
    p.add_argument("--model", required=True, metavar="DIR", help="fine-tuned checkpoint directory")
    p.add_argument("--file", help="read inputs from this file instead (txt / tsv / jsonl, .gz too)")
    p.add_argument("--text-field", default="text", help="JSONL field of the text (default: text)")
    p.add_argument("--pair-field", default="pair", help="JSONL field of the second text of a pair (default: pair)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-seq-length", type=int, help="default: as the model was fine-tuned")
    p.add_argument("--device", help="cpu, cuda, ... (default: cuda when available)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bertkit.inference.prediction import Predictor

    check_one_source(args.texts, args.file)
    predictor = Predictor.from_pretrained(args.model, device=args.device, batch_size=args.batch_size,
                                          max_seq_length=args.max_seq_length)
    inputs = read_inputs(predictor, args)
    results = predictor(inputs, progress=len(inputs) >= 2048)
    lines = "".join(json.dumps({**_echo(predictor.family, item), **result}, ensure_ascii=False) + "\n"
                    for item, result in zip(inputs, results))
    sys.stdout.write(lines)
    return 0


def read_inputs(predictor, args: argparse.Namespace) -> list[Any]:
    """The inputs of `args` in the shape `Predictor` takes for the model's family."""
    family, pairs = predictor.family, predictor.loaded.spec.has_pairs
    if args.texts:
        if family == "multiple_choice":
            if len(args.texts) < 3:
                raise BertkitError("multiple choice: give the context and at least two choices")
            return [(args.texts[0], args.texts[1:])]
        if family == "qa" or (family == "classification" and pairs):
            if len(args.texts) % 2:
                if family == "qa":
                    raise BertkitError(f"question answering: give questions and contexts two by two "
                                       f"(got {len(args.texts)} texts)")
                raise BertkitError(f"this model classifies text pairs: give an even number of texts "
                                   f"(got {len(args.texts)})")
            return [(a, b) for a, b in zip(args.texts[::2], args.texts[1::2])]
        return list(args.texts)
    if args.file:
        inputs = _file_inputs(args.file, family, pairs, args.text_field, args.pair_field)
    else:
        inputs = [_line_input(line.text, family, pairs, line.source) for line in numbered_lines(None) if line.text.strip()]
    if not inputs:
        raise BertkitError(f"{args.file or '<stdin>'}: empty input, nothing to predict")
    return inputs


def _file_inputs(path: str, family: str, pairs: bool, text_field: str, pair_field: str) -> list[Any]:
    from bertkit.tasks.records import as_text, file_kind, iter_jsonl, missing_field

    if family == "multiple_choice":
        from bertkit.tasks.multiple_choice import read_examples

        return [(ex.context, ex.choices) for ex in read_examples(path)]
    if family == "qa" and file_kind(path) != "jsonl":
        from bertkit.tasks.qa import read_examples as read_squad

        return [(ex.question, ex.context) for ex in read_squad(path)]
    if file_kind(path) != "jsonl":
        return [_line_input(line.text, family, pairs, line.source) for line in numbered_lines(path) if line.text.strip()]
    inputs: list[Any] = []
    for line_no, record in iter_jsonl(path):
        if family == "tagging" and "words" in record and isinstance(record["words"], list):
            inputs.append(tuple(as_text(w, path, line_no, "words") for w in record["words"]))
            continue
        if family == "qa":
            for name in ("question", "context"):
                if name not in record:
                    raise missing_field(path, line_no, [name], record)
            inputs.append((as_text(record["question"], path, line_no, "question"),
                           as_text(record["context"], path, line_no, "context")))
            continue
        if text_field not in record:
            raise missing_field(path, line_no, [text_field], record)
        text = as_text(record[text_field], path, line_no, text_field)
        if family == "classification" and pairs:
            if pair_field not in record:
                raise missing_field(path, line_no, [pair_field], record)
            inputs.append((text, as_text(record[pair_field], path, line_no, pair_field)))
        else:
            inputs.append(text)
    return inputs


def _line_input(text: str, family: str, pairs: bool, source: str) -> Any:
    if family == "qa" or (family == "classification" and pairs):
        first, sep, second = text.partition("\t")
        if not sep:
            raise BertkitError(f"{source}: this model classifies text pairs; give two tab-separated texts per line")
        return (first, second)
    return text


def _echo(family: str, item: Any) -> dict[str, Any]:
    if family == "multiple_choice":
        return {"context": item[0], "choices": list(item[1])}
    if family == "qa":
        return {"question": item[0], "context": item[1]}
    if isinstance(item, tuple) and family == "classification":
        return {"text": item[0], "pair": item[1]}
    if isinstance(item, tuple):  # tagging: pre-split words
        return {"text": " ".join(item)}
    return {"text": item}
