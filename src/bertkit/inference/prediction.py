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

- a text-to-text model without a task file (a pre-trained T5, or one whose family
  generates text): "text" -> {"generated_text": "..."} (bertkit.inference.generation;
  `generation` options: `model.generate`'s).

Each family's `predict` hook (in its module, bertkit.tasks.hooks) turns inputs into
these results. Inputs are tokenized once and run in batches sorted by length, results in
input order. `evaluate(model_dir, data_file)` (bertkit.inference.evaluation) scores a labelled
file with the family's official metrics.
"""

from __future__ import annotations

import os
from typing import Any

from pathlib import Path

from bertkit.errors import BertkitError
from bertkit.inference.loading import LoadedModel, load_finetuned


# ---------------------------------------------------------------------------- predict


class Predictor:
    """A fine-tuned model as a callable: `predictor(inputs) -> list[dict]` (module docstring)."""

    def __init__(self, loaded: LoadedModel, batch_size: int = 32, max_seq_length: int | None = None,
                 generation: dict[str, Any] | None = None):
        if batch_size < 1:
            raise BertkitError(f"batch_size: must be >= 1, got {batch_size}")
        self.loaded = loaded
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length or (None if loaded.spec is None else loaded.spec.max_seq_length)
        self.generation = dict(generation or {})
        target_length = getattr(loaded.spec, "max_target_length", None)  # a text-to-text best/: its targets' length
        if loaded.generates and target_length and "max_new_tokens" not in self.generation:
            self.generation["max_new_tokens"] = target_length

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike, *, device: str | None = None, batch_size: int = 32,
                        max_seq_length: int | None = None, generation: dict[str, Any] | None = None,
                        precision: str = "fp32") -> "Predictor":
        return cls(load_for_prediction(directory, device, precision), batch_size, max_seq_length, generation)

    @property
    def family(self) -> str | None:
        """The task family; None for a text-to-text model without a task file."""
        return None if self.loaded.spec is None else self.loaded.spec.family

    def __call__(self, inputs: Any, progress: bool = False) -> list[dict[str, Any]]:
        batch = list(inputs) if isinstance(inputs, list) else [inputs]
        if not batch:
            return []
        if self.loaded.generates:
            from bertkit.inference.generation import generate

            texts = generate(self.loaded, batch, batch_size=self.batch_size, max_source_length=self.max_seq_length,
                             **self.generation)
            per_input = self.generation.get("num_return_sequences", 1)
            return [{"generated_text": texts[i] if per_input == 1 else texts[i * per_input:(i + 1) * per_input]}
                    for i in range(len(batch))]
        predict = self.loaded.program_cls.task_family().hook("predict")  # the family's (bertkit.tasks.hooks)
        return predict(self.loaded, batch, self.max_seq_length, self.batch_size, progress)


def load_for_prediction(directory: str | os.PathLike, device: str | None = None,
                        precision: str = "fp32") -> LoadedModel:
    """What `predict` runs: a fine-tuned model (its task file, or a task head's name in
    config.json's `architectures`, says how: load_finetuned) or, for any other checkpoint
    whose family generates text (a pre-trained T5), the generating model (load_generator)."""
    from bertkit.model.families import architecture_task_families, family_of, load_config
    from bertkit.tasks.feature_tagger import is_feature_tagger
    from bertkit.tasks.programs import TASK_FILE

    directory = Path(directory)
    if (directory / TASK_FILE).is_file() or is_feature_tagger(directory) or not family_of(directory).can_generate:
        return load_finetuned(directory, device, precision)
    heads = architecture_task_families()
    if any(name in heads for name in load_config(directory).extra.get("architectures") or []):
        return load_finetuned(directory, device, precision)
    from bertkit.inference.generation import load_generator

    return load_generator(directory, device, precision)


def predict(inputs: Any, model: str | os.PathLike | Predictor | None = None, **options: Any) -> list[dict[str, Any]]:
    """Predictions of a fine-tuned model for `inputs` (module docstring for the shapes); the
    order of every function of the Python API (`embed(texts, model)`), an older
    `predict(model, inputs)` call still understood.

    model: a checkpoint directory or a `Predictor`; options: `device`, `batch_size`,
    `max_seq_length`, `precision` ("fp32", "int8", "bf16"; used when loading a directory)."""
    from bertkit.inference.loading import inputs_and_model

    inputs, model = inputs_and_model(inputs, model, "predict", (Predictor,))
    predictor = model if isinstance(model, Predictor) else Predictor.from_pretrained(model, **options)
    return predictor(inputs)
