"""Text-to-text fine-tuning (T5): every task as text in, text out, on the shared loop.

    bertkit finetune text2text --task glue --glue-task rte --data glue/RTE --model runs/t5/final --output-dir runs/t5-rte
    bertkit finetune text2text --task squad --train train-v1.1.json --dev dev-v1.1.json --model DIR --output-dir DIR
    bertkit finetune text2text --train pairs.jsonl --dev pairs-dev.jsonl --source-field input --target-field output ...

The data comes through the other families' readers (GLUE TSVs: bertkit.tasks.classification,
SQuAD JSON: bertkit.tasks.qa, CoNLL: bertkit.tasks.tagging) and is written as text in
the formats of the T5 paper (Raffel et al. 2020, appendix D; the `glue` and `squad`
preprocessors of google-research/text-to-text-transfer-transformer):

- GLUE: `"<task> key1: v1 key2: v2"` with the fields in T5's (alphabetical) order —
  "rte sentence1: ... sentence2: ...", "mnli hypothesis: ... premise: ...", "qnli
  question: ... sentence: ..." — and the label as a word (its GLUE name); STS-B's target
  is the score rounded to the nearest 0.2, written with one decimal ("3.8").
- SQuAD v1.1: "question: ... context: ..." -> the first answer's text (all answers score).
- NER (our format; T5 did no NER): "ner sentence: John Smith lives in Paris ." -> the
  entities in sentence order as "TYPE: words" joined by "; " ("PER: John Smith; LOC: Paris"),
  "none" for a sentence without entities.
- pairs: any JSONL / CSV / TSV with a source and a target field (--source-field /
  --target-field, default input / output).

Training is teacher forcing: labels are the target ids (EOS appended by the tokenizer),
-100 on padding. Evaluation generates (greedy, or `num_beams`) and scores the text with
the task's official metric: GLUE's through bertkit.evaluation.metrics.glue_metrics,
SQuAD's official EM / F1, entity-level F1 on exact (type, words) matches for NER,
exact match and SQuAD token F1 for pairs. An output that is not a label word, an
unparsable STS-B number or an NER string that does not parse is an *invalid* output: it
counts as wrong (a classification's other label; for STS-B the end of the scale farthest
from the gold score; no entities for NER) and `invalid` counts them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bertkit.atomic import write_text_atomic
from bertkit.errors import BertkitError
from bertkit.evaluation.metrics import glue_task_name, percent, percentages
from bertkit.tasks.programs import TaskData, TaskProgram, TaskSpec, feature_length
from bertkit.tasks.registry import TEXT2TEXT, TEXT2TEXT_TASKS

TASKS = TEXT2TEXT_TASKS
NO_ENTITIES = "none"
ENTITY_SEPARATOR = "; "
PREDICTIONS_FILE = "dev_predictions.jsonl"

# T5's GLUE inputs: the task prefix, then (key, field of the GLUE reader's example) in T5's order
_PAIR = (("sentence1", "text"), ("sentence2", "pair"))
GLUE_FORMATS: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "cola": ("cola", (("sentence", "text"),)),
    "sst2": ("sst2", (("sentence", "text"),)),
    "mrpc": ("mrpc", _PAIR),
    "qqp": ("qqp", (("question1", "text"), ("question2", "pair"))),
    "stsb": ("stsb", _PAIR),
    "mnli": ("mnli", (("hypothesis", "pair"), ("premise", "text"))),
    "mnli-mm": ("mnli", (("hypothesis", "pair"), ("premise", "text"))),
    "ax": ("mnli", (("hypothesis", "pair"), ("premise", "text"))),  # T5 casts the diagnostic set as MNLI
    "qnli": ("qnli", (("question", "text"), ("sentence", "pair"))),
    "rte": ("rte", _PAIR),
    "wnli": ("wnli", _PAIR),
}


@dataclass(frozen=True)
class Text2TextExample:
    """One example as text. target: what the model learns (None: unlabelled); gold: what
    scores it (GLUE: the file's label, SQuAD: every answer text, NER: the entity list,
    pairs: the target); qid: SQuAD's question id; source_line: "file:line"."""

    source: str
    target: str | None
    gold: Any
    where: str
    qid: str | None = None


# ---------------------------------------------------------------------------- formats


def glue_source(task: str, text: str, pair: str | None) -> str:
    """T5's input for a GLUE example ("rte sentence1: ... sentence2: ...")."""
    prefix, keys = GLUE_FORMATS[task]
    fields = {"text": text, "pair": pair}
    return " ".join([prefix, *(f"{key}: {fields[field]}" for key, field in keys)])


def stsb_target(score: float) -> str:
    """T5's STS-B target: the score rounded to the nearest 0.2, one decimal ("3.8").
    Python's round, like tf.round, rounds halves to even."""
    return f"{round(float(score) * 5) / 5:.1f}"


def glue_target(task: str, label: str | float) -> str:
    """T5's target: the label's GLUE name, T5's word (the GLUE reader gives names; a file's "0"/"1" is named here)."""
    from bertkit.tasks.classification import GLUE_LABEL_NAMES

    return stsb_target(label) if task == "stsb" else GLUE_LABEL_NAMES.get(task, {}).get(str(label), str(label))


def squad_source(question: str, context: str) -> str:
    return f"question: {question} context: {context}"


def ner_source(words: list[str]) -> str:
    return "ner sentence: " + " ".join(words)


def ner_target(entities: list[tuple[str, str]]) -> str:
    """[("PER", "John Smith"), ("LOC", "Paris")] -> "PER: John Smith; LOC: Paris" ("none": no entities)."""
    return ENTITY_SEPARATOR.join(f"{kind}: {text}" for kind, text in entities) or NO_ENTITIES


def parse_ner(text: str) -> list[tuple[str, str]] | None:
    """The entities of an NER target or output; None when it does not parse (an invalid output)."""
    text = text.strip()
    if text == NO_ENTITIES:
        return []
    entities = []
    for part in text.split(ENTITY_SEPARATOR.strip()):
        kind, sep, words = part.strip().partition(": ")
        if not sep or not kind.strip() or not words.strip() or " " in kind.strip():
            return None
        entities.append((kind.strip(), " ".join(words.split())))
    return entities


def sentence_entities(words: list[str], tags: list[str]) -> list[tuple[str, str]]:
    """(type, words) of a tagged sentence's entities, as seqeval reads the tags (default mode)."""
    from bertkit.evaluation.seqeval import get_entities

    return [(e.type, " ".join(words[e.start:e.end])) for e in get_entities(tags)]


# ---------------------------------------------------------------------------- reading


def read_examples(path: str | Path, spec: TaskSpec, training: bool = False) -> list[Text2TextExample]:
    """The examples of `path` as text, read by the task's own reader (errors name file and line)."""
    task = spec.text2text_task or "pairs"
    if task == "glue":
        from bertkit.tasks.classification import read_examples as read_glue

        if not spec.glue_task:
            raise BertkitError("text2text --task glue: name the GLUE task (--glue-task, e.g. rte)")
        glue = glue_task_name(spec.glue_task)
        return [Text2TextExample(glue_source(glue, ex.text, ex.pair),
                                 None if ex.label is None else glue_target(glue, ex.label), ex.label, ex.source)
                for ex in read_glue(path, glue_task=glue)]
    if task == "squad":
        from bertkit.tasks.qa import read_examples as read_squad

        examples = read_squad(path, 1, training=training)
        return [Text2TextExample(squad_source(ex.question, ex.context), ex.answers[0][0] if ex.answers else None,
                                 tuple(text for text, _ in ex.answers), ex.source, ex.qid) for ex in examples]
    if task == "ner":
        from bertkit.tasks.tagging import read_examples as read_conll

        out = []
        for ex in read_conll(path, tag_column=spec.tag_column):
            entities = None if ex.tags is None else sentence_entities(ex.words, ex.tags)
            out.append(Text2TextExample(ner_source(ex.words), None if entities is None else ner_target(entities),
                                        entities, ex.source))
        return out
    if task == "pairs":
        return _read_pairs(path, spec.source_field, spec.target_field)
    raise BertkitError(f"text2text task {task!r}: unknown; expected one of {', '.join(TASKS)}")


def _read_pairs(path: str | Path, source_field: str, target_field: str) -> list[Text2TextExample]:
    """Source / target pairs of a JSONL, CSV or TSV file (a table's first row names its columns)."""
    from bertkit.tasks.records import as_text, column_index, file_kind, iter_jsonl, missing_field, read_table

    rows: list[tuple[int, str, str | None]] = []
    if file_kind(path) == "jsonl":
        for line_no, record in iter_jsonl(path):
            if source_field not in record:
                raise missing_field(path, line_no, [source_field], record)
            target = record.get(target_field)
            rows.append((line_no, as_text(record[source_field], path, line_no, source_field),
                         None if target is None else as_text(target, path, line_no, target_field)))
    else:
        header, table = read_table(path)
        source = column_index(header, source_field, path)
        target = header.index(target_field) if target_field in header else None
        for line_no, fields in table:
            if max(source, target or 0) >= len(fields):
                raise BertkitError(f"{path}:{line_no}: {len(fields)} fields, the header has {len(header)}")
            rows.append((line_no, fields[source], None if target is None else fields[target]))
    examples = []
    for line_no, source_text, target_text in rows:
        if not source_text.strip():
            raise BertkitError(f"{path}:{line_no}: empty source (field {source_field!r}), nothing to generate from")
        examples.append(Text2TextExample(source_text, target_text, target_text, f"{path}:{line_no}"))
    if not examples:
        raise BertkitError(f"{path}: empty file (no examples)")
    return examples


# ---------------------------------------------------------------------------- encoding


def encode(examples: list[Text2TextExample], tokenizer, max_seq_length: int, max_target_length: int | None,
           training: bool) -> tuple[list[dict[str, Any]], int]:
    """Features {input_ids, labels} (labels: the target ids with EOS, training only) and the
    number of targets cut to `max_target_length` (None: no limit)."""
    sources = tokenizer([ex.source for ex in examples], truncation=True, max_length=max_seq_length)["input_ids"]
    features = [{"input_ids": np.asarray(ids, dtype=np.int64)} for ids in sources]
    cut = 0
    if training and examples and examples[0].target is not None:
        targets = tokenizer([ex.target for ex in examples])["input_ids"]
        for feature, ids in zip(features, targets):
            if max_target_length is not None and len(ids) > max_target_length:
                ids = ids[:max_target_length - 1] + ids[-1:]  # keep EOS last
                cut += 1
            feature["labels"] = np.asarray(ids, dtype=np.int64)
    return features, cut


def collate(features: list[dict[str, Any]], pad_token_id: int) -> dict[str, Any]:
    """(B, S) input_ids / attention_mask and, when the features have them, (B, T) labels
    padded with -100 (the inputs and the targets each to their own longest, multiple of 8)."""
    from bertkit.data.collate import collate as collate_rows

    batch = collate_rows([{"input_ids": f["input_ids"]} for f in features], pad_token_id)
    if "labels" in features[0]:
        batch["labels"] = collate_rows([{"input_ids": f["labels"]} for f in features], -100)["input_ids"]
    return batch


def model_class():
    """The head this task family trains before any checkpoint is read: the first registered model
    family's that has it (bertkit.model.families; imported lazily: reading data never needs torch)."""
    from bertkit.model.families import default_task_class
    from bertkit.tasks.registry import TEXT2TEXT

    return default_task_class(TEXT2TEXT)


# ---------------------------------------------------------------------------- scoring


def glue_prediction(task: str, text: str, gold: str | float, labels: list[str] | None) -> tuple[Any, bool]:
    """(the prediction as the metric takes it, valid?) for one generated text: the label id
    of a label word, STS-B's number; an invalid output is made wrong (the next label, or
    the end of STS-B's 0-5 scale farthest from the gold score)."""
    text = text.strip()
    if labels is None:  # STS-B
        try:
            value = float(text)
            if math.isfinite(value):
                return value, True
        except ValueError:
            pass
        return (0.0 if float(gold) >= 2.5 else 5.0), False
    if text in labels:  # the label names are T5's words
        return labels.index(text), True
    return (labels.index(str(gold)) + 1) % len(labels), False


def glue_scores(task: str, examples: list[Text2TextExample], outputs: list[str]) -> dict[str, float]:
    from bertkit.evaluation.metrics import glue_metrics
    from bertkit.tasks.classification import glue_labels

    labels = glue_labels(task)
    predicted, valid = zip(*(glue_prediction(task, text, ex.gold, labels) for ex, text in zip(examples, outputs)))
    gold = [float(ex.gold) for ex in examples] if labels is None else [labels.index(str(ex.gold)) for ex in examples]
    return {**percentages(glue_metrics(task, np.asarray(predicted), np.asarray(gold))),
            "invalid": len(valid) - sum(valid)}  # a count (an int in the JSON)


def squad_scores(examples: list[Text2TextExample], outputs: list[str]) -> dict[str, float]:
    """The official SQuAD v1.1 exact match and F1 (percent) of the generated answers."""
    from bertkit.evaluation.squad import SquadDataset, SquadQuestion, evaluate_v1

    dataset = SquadDataset(tuple(SquadQuestion(ex.qid, tuple(ex.gold)) for ex in examples), "1.1")
    return evaluate_v1(dataset, {ex.qid: text.strip() for ex, text in zip(examples, outputs)})


def ner_scores(examples: list[Text2TextExample], outputs: list[str]) -> dict[str, float]:
    """Entity-level micro precision / recall / F1 (percent) on exact (type, words) matches
    within each sentence, as seqeval counts matching spans; unparsable outputs predict nothing."""
    correct = predicted = gold = invalid = 0
    for ex, text in zip(examples, outputs):
        entities = parse_ner(text)
        if entities is None:
            invalid += 1
            entities = []
        found, wanted = Counter(entities), Counter(ex.gold)
        correct += sum((found & wanted).values())
        predicted += len(entities)
        gold += len(ex.gold)
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {**percentages({"precision": precision, "recall": recall, "f1": f1}), "invalid": int(invalid)}


def pair_scores(examples: list[Text2TextExample], outputs: list[str]) -> dict[str, float]:
    """Exact match (the stripped strings equal) and SQuAD's token F1, in percent."""
    from bertkit.evaluation.squad import token_f1

    exact = sum(text.strip() == ex.gold.strip() for ex, text in zip(examples, outputs))
    f1 = sum(token_f1(text, ex.gold) for ex, text in zip(examples, outputs))
    return {"exact_match": percent(exact, len(examples)), "f1": percent(f1, len(examples))}


def metrics(spec, data, outputs, id2label) -> dict[str, float]:
    """The task's official metrics of the generated texts `outputs` on `data`."""
    task = spec.text2text_task or "pairs"
    if task == "glue":
        return glue_scores(glue_task_name(spec.glue_task), data.examples, outputs)
    if task == "squad":
        return squad_scores(data.examples, outputs)
    if task == "ner":
        return ner_scores(data.examples, outputs)
    return pair_scores(data.examples, outputs)


# ---------------------------------------------------------------------------- reports


def describe(spec) -> str:
    task = spec.text2text_task or "pairs"
    detail = spec.glue_task if task == "glue" else (
        f"{spec.source_field} -> {spec.target_field}" if task == "pairs" else task)
    return f"text-to-text ({task}: {detail})" if detail != task else f"text-to-text ({task})"


def report_details(spec, dev) -> dict[str, str]:
    decoding = "greedy" if spec.num_beams == 1 else f"beam search, {spec.num_beams} beams"
    details = {"max target length": f"{spec.max_target_length} tokens" if spec.max_target_length else "from the data",
               "dev decoding": decoding + " (invalid outputs count as wrong)"}
    if dev is not None and dev.examples:
        details["example input"] = f"`{dev.examples[0].source[:120]}` -> `{dev.examples[0].target}`"
    return details


def report_files(spec, dev, outputs) -> str:
    return "" if dev is None else f", `{PREDICTIONS_FILE}` (the best model's dev outputs)"


def write_dev_predictions(spec, dev, outputs, output_dir: Path) -> None:
    if dev is None or outputs is None:
        return None
    lines = "".join(json.dumps({"source": ex.source, "target": ex.target, "generated_text": text},
                               ensure_ascii=False) + "\n" for ex, text in zip(dev.examples, outputs))
    write_text_atomic(Path(output_dir) / PREDICTIONS_FILE, lines)


# ---------------------------------------------------------------------------- the program


def generate_texts(model, tokenizer, spec: TaskSpec, features: list[dict[str, Any]], batch_size: int,
                   progress: bool = False) -> list[str]:
    """The generated text of each feature (input order), batches sorted by length."""
    import torch
    from tqdm.auto import tqdm

    from bertkit.model.families import unwrap_model

    model = unwrap_model(model)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    device = next(model.parameters()).device
    order = np.argsort([feature_length(f) for f in features], kind="stable")[::-1]
    texts: list[str] = [""] * len(features)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for start in tqdm(range(0, len(order), batch_size), desc="generate", unit="batch", leave=False,
                          disable=not progress or None):
            rows = order[start:start + batch_size]
            batch = collate([{"input_ids": features[i]["input_ids"]} for i in rows], pad_id)
            out = model.generate(input_ids=batch["input_ids"].to(device),
                                 attention_mask=batch["attention_mask"].to(device),
                                 max_new_tokens=spec.max_target_length or 32, num_beams=spec.num_beams)
            for row, index in zip(out.tolist(), rows):
                texts[index] = tokenizer.decode(row, skip_special_tokens=True).strip()
    model.train(was_training)
    return texts


class Text2TextProgram(TaskProgram):
    """Teacher-forced T5 fine-tuning; dev evaluation generates and scores the text."""

    family = TEXT2TEXT
    generates_text = True

    def __init__(self, model, tokenizer, spec, train_features, dev, id2label, **kwargs):
        if spec.max_target_length is None and train_features:  # from the data: the longest training target
            spec = dataclasses.replace(spec, max_target_length=max(len(f["labels"]) for f in train_features))
        super().__init__(model, tokenizer, spec, train_features, dev, id2label, **kwargs)

    @classmethod
    def default_metric(cls, spec: TaskSpec) -> str:
        task = spec.text2text_task or "pairs"
        if task == "glue":
            from bertkit.tasks.programs import ClassificationProgram

            return ClassificationProgram.default_metric(spec)
        return "exact_match" if task == "pairs" else "f1"

    def collate(self, examples):
        return collate(examples, self.pad_id)

    @classmethod
    def read(cls, path: str, spec: TaskSpec, labels_path: str | None = None, training: bool = False) -> list:
        return read_examples(path, spec, training)

    @classmethod
    def encode(cls, data_path, examples, tokenizer, spec, label2id, progress=False, training=False) -> TaskData:
        features, cut = encode(examples, tokenizer, spec.max_seq_length, spec.max_target_length, training)
        data = TaskData(data_path, examples, features)
        if training and spec.max_target_length is None and features and "labels" in features[0]:
            data.stats["longest target (tokens, the generation limit)"] = max(len(f["labels"]) for f in features)
        if cut:
            warnings.warn(f"{data_path}: {cut} of {len(examples)} targets are longer than max_target_length "
                          f"({spec.max_target_length} tokens) and were cut", stacklevel=2)
            data.stats[f"targets cut to {spec.max_target_length} tokens"] = cut
        return data

    @classmethod
    def check_labelled(cls, data: TaskData) -> None:
        if not data.examples or data.examples[0].gold is None:
            raise BertkitError(f"{data.path}: no targets (an unlabelled test file?); scoring needs a labelled file")

    @classmethod
    def infer(cls, model, tokenizer, spec, features, batch_size: int, progress: bool = False) -> list:
        return generate_texts(model, tokenizer, spec, features, batch_size, progress)

    def evaluate(self, model, ctx, batch_size: int, max_batches: int | None) -> dict[str, float]:
        if self.dev is None:
            return {}
        self.last_outputs = self.infer(model, self.tokenizer, self.spec, self.dev.features, self.eval_batch_size,
                                       self.progress and ctx.is_main)
        return self.metrics(self.dev, self.last_outputs)
