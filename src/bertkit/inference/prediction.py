"""Using a fine-tuned model: `predict` (pipeline-like).

    import bertkit
    bertkit.predict("runs/mrpc/best", [("The cat sat.", "A cat was sitting.")])
    predictor = bertkit.Predictor.from_pretrained("runs/ner/best")
    predictor(["John Smith lives in Paris."])

The model directory is any fine-tuned checkpoint (bertkit.inference.loading.load_finetuned):
bertkit's `best/`, a Hugging Face `BertFor...` checkpoint or a feature-based tagger from
`bertkit finetune ner --features`. Inputs are one input or a list
of inputs — a tuple is always ONE input, a list a batch. Per family:

- sequence classification: "text" or ("text", "pair") ->
  {"label": "1", "score": 0.93, "scores": {"0": 0.07, "1": 0.93}} (softmax
  probabilities by label name); regression (STS-B) -> {"score": 3.71}.
- token tagging (NER): "raw text" or a list of words ->
  {"entities": [{"type": "PER", "text": "John Smith", "start": 0, "end": 10,
  "score": 0.97}], "words": [...], "tags": [...]}. Raw text is split into words at
  whitespace and around punctuation (hyphens, periods and ampersands inside a word
  keep it whole: "U.S", "1996-08-30"; "'s" is its own word, as in CoNLL). start/end
  are character offsets into the text (for a list of words: into the words joined by
  single spaces); tags are in the scheme the model was trained on (IOB1 stays IOB1);
  an entity's score is the mean probability of its words' tags.
- multiple choice: {"context": "...", "choices": ["a", "b"]} or ("context", ["a", "b"])
  -> {"label": 1, "score": 0.71, "scores": [0.29, 0.71]} (label: the chosen index).
- extractive QA: ("question", "context") or {"question": ..., "context": ...} ->
  {"answer": "1887", "start": 37, "end": 41, "score": 0.83} — the context's own
  characters [start, end); score: the answer's probability among the n-best spans.
  A SQuAD v2.0 model answers {"answer": "", "start": None, "end": None, "no_answer":
  True, ...} when the null score beats the best span by more than the threshold
  chosen on dev (saved with the model).

Inputs are tokenized once and run in batches sorted by length, results in input
order. `evaluate(model_dir, data_file)` (bertkit.inference.evaluation) scores a labelled
file with the family's official metrics.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any

import numpy as np

from bertkit.errors import BertkitError
from bertkit.inference.loading import LoadedModel, load_finetuned

WORD_PATTERN = re.compile(r"\w+(?:[-.&]\w+)*|'s\b|’s\b|[^\w\s]")
INPUT_SOURCE = "<input>"


def split_words(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Words of raw text and their (start, end) character spans (see the module docstring)."""
    matches = list(WORD_PATTERN.finditer(text))
    return [m.group() for m in matches], [m.span() for m in matches]


# ---------------------------------------------------------------------------- predict


class Predictor:
    """A fine-tuned model as a callable: `predictor(inputs) -> list[dict]` (module docstring)."""

    def __init__(self, loaded: LoadedModel, batch_size: int = 32, max_seq_length: int | None = None):
        if batch_size < 1:
            raise BertkitError(f"batch_size: must be >= 1, got {batch_size}")
        self.loaded = loaded
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length or loaded.spec.max_seq_length

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike, *, device: str | None = None, batch_size: int = 32,
                        max_seq_length: int | None = None) -> "Predictor":
        return cls(load_finetuned(directory, device), batch_size, max_seq_length)

    @property
    def family(self) -> str:
        return self.loaded.spec.family

    def __call__(self, inputs: Any, progress: bool = False) -> list[dict[str, Any]]:
        batch = list(inputs) if isinstance(inputs, list) else [inputs]
        if not batch:
            return []
        predict = {"classification": self._classify, "tagging": self._tag, "multiple_choice": self._choose,
                   "qa": self._answer}[self.family]
        return predict(batch, progress)

    # ---- families -----------------------------------------------------------------------------
    def _classify(self, batch: list[Any], progress: bool) -> list[dict[str, Any]]:
        from bertkit.tasks.classification import ClassificationExample
        from bertkit.tasks.programs import softmax

        loaded, spec = self.loaded, self.loaded.spec
        examples = []
        for i, item in enumerate(batch):
            source = f"{INPUT_SOURCE}:{i + 1}"
            if isinstance(item, str):
                if spec.has_pairs:
                    raise BertkitError(f"{source}: this model classifies text pairs; give (text, pair)")
                examples.append(ClassificationExample(item, None, None, source))
            elif isinstance(item, tuple) and len(item) == 2 and all(isinstance(t, str) for t in item):
                examples.append(ClassificationExample(item[0], item[1], None, source))
            else:
                raise BertkitError(f"{source}: expected a text or a (text, pair) tuple of strings, got {item!r:.80}")
        module = loaded.program_cls.module()
        features = module.encode(examples, loaded.tokenizer, self.max_seq_length, None)
        logits = np.stack(loaded.outputs(features, self.batch_size, progress))  # (N, K)
        if spec.regression or logits.shape[1] == 1:
            return [{"score": float(row[0])} for row in logits]
        names = [loaded.id2label[i] for i in range(logits.shape[1])]
        results = []
        for probs in softmax(logits):
            best = int(probs.argmax())
            results.append({"label": names[best], "score": float(probs[best]),
                            "scores": {name: float(p) for name, p in zip(names, probs)}})
        return results

    def _tag(self, batch: list[Any], progress: bool) -> list[dict[str, Any]]:
        from bertkit.evaluation.seqeval import get_entities
        from bertkit.tasks.programs import softmax
        from bertkit.tasks.tagging import TaggingExample, _first_subtokens, predictions_to_tags

        loaded, spec = self.loaded, self.loaded.spec
        texts, words, spans = [], [], []
        for i, item in enumerate(batch):
            if isinstance(item, str):
                text = item
                item_words, item_spans = split_words(text)
            elif isinstance(item, (list, tuple)) and all(isinstance(w, str) and w and not w.isspace() for w in item):
                item_words, item_spans, text = _join_words(list(item))
            else:
                raise BertkitError(f"{INPUT_SOURCE}:{i + 1}: expected a text or a list of non-empty words, "
                                   f"got {item!r:.80}")
            texts.append(text)
            words.append(item_words)
            spans.append(item_spans)
        results: list[dict[str, Any]] = [{"entities": [], "words": w, "tags": []} for w in words]
        present = [i for i, w in enumerate(words) if w]
        if not present:
            return results
        examples = [TaggingExample(words[i], None, INPUT_SOURCE, i + 1) for i in present]
        module = loaded.program_cls.module()
        scheme = spec.scheme or "IOB2"
        features = module.encode(examples, loaded.tokenizer, self.max_seq_length, None, scheme=scheme)
        outputs = loaded.outputs(features, self.batch_size, progress)  # (T_i, K) each
        tags = predictions_to_tags(examples, features, [o.argmax(-1) for o in outputs], loaded.id2label, scheme)
        word_scores = [np.zeros(len(ex.words)) for ex in examples]
        for feature, logits in zip(features, outputs):
            word_ids = np.asarray(feature["word_ids"])
            probs = softmax(logits)  # (T, K)
            firsts = _first_subtokens(word_ids)
            word_scores[int(feature["example_index"])][word_ids[firsts]] = probs[firsts].max(-1)
        for k, i in enumerate(present):
            entities = []
            for entity in get_entities(tags[k]):
                start, end = spans[i][entity.start][0], spans[i][entity.end - 1][1]
                entities.append({"type": entity.type, "text": texts[i][start:end], "start": start, "end": end,
                                 "score": float(word_scores[k][entity.start : entity.end].mean())})
            results[i] = {"entities": entities, "words": words[i], "tags": tags[k]}
        return results

    def _choose(self, batch: list[Any], progress: bool) -> list[dict[str, Any]]:
        from bertkit.tasks.multiple_choice import MultipleChoiceExample
        from bertkit.tasks.programs import softmax

        loaded = self.loaded
        examples = []
        for i, item in enumerate(batch):
            context, choices = _context_and_choices(item, f"{INPUT_SOURCE}:{i + 1}")
            examples.append(MultipleChoiceExample(context, choices, None, INPUT_SOURCE, i + 1))
        module = loaded.program_cls.module()
        features = module.encode(examples, loaded.tokenizer, self.max_seq_length)
        outputs: list[np.ndarray | None] = [None] * len(examples)
        for count in sorted({len(ex.choices) for ex in examples}):  # one choice count per batch
            group = [i for i, ex in enumerate(examples) if len(ex.choices) == count]
            for i, logits in zip(group, loaded.outputs([features[i] for i in group], self.batch_size, progress)):
                outputs[i] = logits
        results = []
        for logits in outputs:
            probs = softmax(logits)
            best = int(probs.argmax())
            results.append({"label": best, "score": float(probs[best]), "scores": [float(p) for p in probs]})
        return results

    def _answer(self, batch: list[Any], progress: bool) -> list[dict[str, Any]]:
        from bertkit.tasks.programs import qa_answers
        from bertkit.tasks.qa import QAExample

        loaded = self.loaded
        spec = dataclasses.replace(loaded.spec, max_seq_length=self.max_seq_length)
        examples = []
        for i, item in enumerate(batch):
            source = f"{INPUT_SOURCE}:{i + 1}"
            question, context = _question_and_context(item, source)
            examples.append(QAExample(str(i), question, context, [], False, source))
        data = loaded.program_cls.encode(INPUT_SOURCE, examples, loaded.tokenizer, spec, None)
        answers = qa_answers(spec, data, loaded.outputs(data.features, self.batch_size, progress))
        results = []
        for ex in examples:
            text, candidates = answers.predictions[ex.qid], answers.nbest[ex.qid]
            spans = [c for c in candidates if c["start_char"] is not None]
            if text == "" and spec.squad_version == 2 or not spans:
                null = next((c for c in candidates if c["start_char"] is None), None)
                results.append({"answer": "", "start": None, "end": None, "no_answer": True,
                                "score": float(null["probability"]) if null else 0.0})
            else:
                best = spans[0]
                results.append({"answer": text, "start": best["start_char"], "end": best["end_char"],
                                "score": float(best["probability"])})
        return results


def _question_and_context(item: Any, source: str) -> tuple[str, str]:
    if isinstance(item, dict):
        if "question" not in item or "context" not in item:
            raise BertkitError(f"{source}: expected {{'question': ..., 'context': ...}}, got keys {sorted(item)}")
        question, context = item["question"], item["context"]
    elif isinstance(item, tuple) and len(item) == 2:
        question, context = item
    else:
        raise BertkitError(f"{source}: expected (question, context) or {{'question', 'context'}}, got {item!r:.80}")
    if not all(isinstance(t, str) and t.strip() for t in (question, context)):
        raise BertkitError(f"{source}: the question and the context must be non-empty texts")
    return question, context


def _join_words(words: list[str]) -> tuple[list[str], list[tuple[int, int]], str]:
    spans, position = [], 0
    for word in words:
        spans.append((position, position + len(word)))
        position += len(word) + 1
    return words, spans, " ".join(words)


def _context_and_choices(item: Any, source: str) -> tuple[str, list[str]]:
    if isinstance(item, dict):
        if "context" not in item or "choices" not in item:
            raise BertkitError(f"{source}: expected {{'context': ..., 'choices': [...]}}, got keys {sorted(item)}")
        context, choices = item["context"], item["choices"]
    elif isinstance(item, tuple) and len(item) == 2:
        context, choices = item
    else:
        raise BertkitError(f"{source}: expected (context, [choices]) or {{'context', 'choices'}}, got {item!r:.80}")
    if not isinstance(context, str) or not isinstance(choices, (list, tuple)) or len(choices) < 2 \
            or not all(isinstance(c, str) for c in choices):
        raise BertkitError(f"{source}: the context must be a text and the choices a list of at least two texts")
    return context, list(choices)


def predict(model: str | os.PathLike | Predictor, inputs: Any, **options: Any) -> list[dict[str, Any]]:
    """Predictions of a fine-tuned model for `inputs` (module docstring for the shapes).

    model: a checkpoint directory or a `Predictor`; options: `device`, `batch_size`,
    `max_seq_length` (used when loading a directory)."""
    predictor = model if isinstance(model, Predictor) else Predictor.from_pretrained(model, **options)
    return predictor(inputs)
