"""What a served checkpoint can answer, loaded once, and how a batch of requests runs on it.

`ServedModel.load(directory, precision)` loads each model the directory holds once, with
the inference layer's loaders (bertkit.inference.loading): the task head model of a
fine-tuned checkpoint (/predict), the masked-LM model when the checkpoint has an MLM head
(/fill-mask), the generating model when the family has one (MODEL_FAMILIES' `generator`:
/generate, /generate_stream, /v1/completions, bertkit.serving.generation), and an encoder
for /embed (the task or masked-LM model's own encoder when there is one, so the weights
are held once; else the bare encoder with its sentence-transformers pipeline). What is
absent is recorded with the loader's reason, which the route answers with.

The `run_*` methods take the jobs of one batch (bertkit.serving.batching), run their
inputs together through `predict`, `embed` or `fill_mask` in one call — one forward pass
when they fit — and give each job its own slice of the results. They run on the batching
worker thread only: a tokenizer's truncation setting is per-instance state, so the event
loop measures and tokenizes with its own copy (`tokenizer`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bertkit.errors import BertkitError
from bertkit.inference.loading import LoadedModel, load_encoder, load_finetuned, load_masked_lm, max_tokens

DEVICE = "cpu"  # embed and fill_mask run where their model is; the server keeps every model on the CPU


def loader_options(loader, precision: str) -> dict[str, Any]:
    """Keyword arguments that carry --precision to an inference loader: the one place it
    reaches them. fp32 is every loader's default, so it passes nothing."""
    if precision == "fp32":
        return {}
    if "precision" not in inspect.signature(loader).parameters:
        raise BertkitError(f"precision: {precision} needs inference loaders that take precision=; "
                           f"{loader.__module__}.{loader.__name__} does not")
    return {"precision": precision}


def is_finetuned(directory: Path) -> bool:
    """A checkpoint `load_finetuned` reads: bertkit's task file, a feature tagger, or a
    config.json whose architectures name a task head."""
    from bertkit.model.families import architecture_task_families, load_config
    from bertkit.tasks.feature_tagger import is_feature_tagger
    from bertkit.tasks.programs import TASK_FILE

    if (directory / TASK_FILE).is_file() or is_feature_tagger(directory):
        return True
    architectures = load_config(directory).extra.get("architectures") or []
    return any(name in architecture_task_families() for name in architectures)


@dataclass
class ServedModel:
    """directory; precision; task / encoder / masked_lm: the loaded models (None: absent,
    `missing` says why); tokenizer: the event loop's own copy."""

    directory: Path
    precision: str
    task: LoadedModel | None
    encoder: LoadedModel | None
    masked_lm: LoadedModel | None
    tokenizer: Any
    missing: dict[str, str] = field(default_factory=dict)
    generator: LoadedModel | None = None

    @classmethod
    def load(cls, directory, precision: str = "fp32") -> "ServedModel":
        from bertkit.inference.sentence_modules import read_sentence_modules
        from bertkit.inference.generation import load_generator
        from bertkit.model.families import families_that, family_of, load_config
        from bertkit.tasks.feature_tagger import is_feature_tagger
        from bertkit.tokenization import Tokenizer

        directory = Path(directory)
        tagger = is_feature_tagger(directory)  # its folder holds the tagger; config.json is its encoder's
        if not tagger:
            if not (directory / "config.json").is_file():
                raise BertkitError(f"--model {directory}: no config.json (expected a checkpoint directory)")
            family_of(directory)  # an unknown model_type fails here, in one line
        missing = {}
        task = masked_lm = None
        if is_finetuned(directory):
            task = load_finetuned(directory, DEVICE, **loader_options(load_finetuned, precision))
        else:
            missing["task"] = f"{directory} is not a fine-tuned model (no task head); fine-tune it with `bertkit finetune`"
        if tagger:
            missing["masked_lm"] = f"{directory} is a feature-based tagger (no MLM head)"
        else:
            try:
                masked_lm = load_masked_lm(directory, DEVICE, **loader_options(load_masked_lm, precision))
            except BertkitError as exc:
                missing["masked_lm"] = str(exc)
        generator = None
        if not tagger and family_of(directory).can_generate:
            if task is not None and isinstance(task.model, family_of(directory).generator_class(directory)):
                generator = LoadedModel(directory, task.model, task.tokenizer, precision=task.precision)  # held once
            else:
                try:
                    generator = load_generator(directory, DEVICE, **loader_options(load_generator, precision))
                except BertkitError as exc:  # a task head on part of the model (T5's encoder classifier): no decoder
                    if task is None:
                        raise
                    missing["generator"] = str(exc)
        else:
            missing["generator"] = (f"{directory}: {load_config(directory).model_type if not tagger else 'a tagger'} "
                                    "models cannot generate text (an encoder); generation needs a model of a "
                                    f"generating family ({families_that('generate')})")
        base = task or masked_lm
        encoder = None
        if base is not None and hasattr(base.backbone, "embeddings"):  # share the weights already loaded
            encoder = LoadedModel(directory, base.model, base.tokenizer,
                                  sentence_modules=read_sentence_modules(directory))
        else:
            try:
                encoder = load_encoder(directory, DEVICE, **loader_options(load_encoder, precision))
            except BertkitError as exc:
                if generator is None:
                    raise
                missing["encoder"] = str(exc)
        tokenizer = Tokenizer.from_pretrained(directory)  # the event loop's own (module docstring)
        served = cls(directory, precision, task, encoder, masked_lm, tokenizer, missing, generator)
        if served.reranker is None:
            missing["reranker"] = "model is not a re-ranker model (it needs a text-pair classifier)"
        if encoder is not None and served.attention is None:
            from bertkit.inference.attention import attention_refusal

            missing["attention"] = attention_refusal(encoder.backbone, directory)
        return served

    # ------------------------------------------------------------------ what it serves

    def has(self, capability: str) -> bool:
        return getattr(self, capability) is not None

    @property
    def reranker(self) -> LoadedModel | None:
        """The task model when it classifies text pairs (POST /rerank, TEI's re-ranker)."""
        from bertkit.tasks.registry import get_task_family

        task = self.task
        if task is None or get_task_family(task.spec.family).head_name != "classification":
            return None
        return task if task.spec.has_pairs else None

    @property
    def attention(self) -> LoadedModel | None:
        """The encoder when it returns attention weights (GET /inspect; not T5, BART or ELMo)."""
        from bertkit.inference.attention import attention_refusal

        encoder = self.encoder
        return encoder if encoder is not None and attention_refusal(encoder.backbone) is None else None

    @property
    def embed_limit(self) -> int:
        """Tokens an /embed input keeps: a sentence-transformers max_seq_length, else the position table."""
        modules = self.encoder.sentence_modules
        return (modules and modules.max_seq_length) or max_tokens(self.encoder.backbone)

    @property
    def predict_limit(self) -> int:
        return self.task.spec.max_seq_length

    @property
    def fill_mask_limit(self) -> int:
        return max_tokens(self.masked_lm.model)

    @property
    def default_normalize(self) -> bool:
        """As `embed`: on when the checkpoint's sentence-transformers pipeline normalizes."""
        modules = self.encoder.sentence_modules
        return bool(modules and modules.normalize and modules.pooling != "none")

    @property
    def generate_limit(self) -> int:
        """Prompt tokens a generation request keeps, as `generate` by default: an encoder-decoder's
        first 512 (max_source_length); a decoder-only model's last ones that fit its context with
        max_new_tokens (at most the context)."""
        from bertkit.inference.generation import DEFAULT_MAX_SOURCE_LENGTH
        from bertkit.model.generation import is_encoder_decoder

        model = self.generator.model
        if is_encoder_decoder(model):
            return DEFAULT_MAX_SOURCE_LENGTH
        return model.config.position_limit or DEFAULT_MAX_SOURCE_LENGTH

    @property
    def serves(self) -> str:
        """What POST / answers (as text-embeddings-inference's model type): "generate", "predict" or "embed".
        A fine-tuned checkpoint's task head decides (a GPT or BART classifier predicts; a text-to-text
        model's task model is its generator); without one, a model that generates generates."""
        if self.task is not None:
            return "generate" if self.generator is not None and self.generator.model is self.task.model else "predict"
        return "generate" if self.generator is not None else "embed"

    def info(self) -> dict[str, Any]:
        config = (self.encoder or self.generator).config
        task = self.task
        labels = None
        if task is not None and config.has_label_names and task.program_cls.task_family().label_names:
            labels = [task.id2label[i] for i in sorted(task.id2label)]
        return {
            "model_dir": str(self.directory),
            "model_id": self.directory.name,
            "model_type": config.model_type,
            "task": task.spec.family if task else None,
            "labels": labels,
            "precision": self.precision,
            "hidden_size": getattr(config, "hidden_size", None) or getattr(config, "d_model", None),
            "serves": self.serves,
            "max_input_length": {"embed": self.embed_limit if self.encoder else None,
                                 "predict": self.predict_limit if task else None,
                                 "fill_mask": self.fill_mask_limit if self.masked_lm else None,
                                 "generate": self.generate_limit if self.generator else None},
        }

    # ------------------------------------------------------------------ measuring (event loop)

    def text_lengths(self, texts: list[str]) -> list[int]:
        """Tokens of each text, [CLS] and [SEP] included, before any truncation."""
        return [len(ids) for ids in self.tokenizer(texts)["input_ids"]]

    def predict_size(self, item: Any) -> tuple[int, bool]:
        """(tokens, truncated) of one /predict input: the task family's `input_tokens` hook."""
        hook = self.task.program_cls.task_family().hook("input_tokens")
        return hook(self.tokenizer, self.task.spec, item, self.predict_limit)

    # ------------------------------------------------------------------ running (worker thread)

    def run_embed(self, jobs) -> list[np.ndarray]:
        """Raw vectors of every job's texts in one `embed` call; each job normalizes its own."""
        from bertkit.inference.embedding import embed

        texts = [text for job in jobs for text in job.items]
        vectors = embed(texts, self.encoder, normalize=False, batch_size=len(texts), max_length=self.embed_limit)
        results = []
        for job, part in zip(jobs, _split(vectors, jobs)):
            if job.options.get("normalize", self.default_normalize):
                part = part / np.maximum(np.linalg.norm(part, axis=-1, keepdims=True), 1e-12)
            results.append(part)
        return results

    def run_predict(self, jobs) -> list[list[dict]]:
        from bertkit.inference.prediction import Predictor

        inputs = [item for job in jobs for item in job.items]
        return _split(Predictor(self.task, batch_size=len(inputs))(inputs), jobs)

    def run_fill_mask(self, jobs) -> list[list]:
        """Every job's texts at the largest top_k asked; each job keeps its own top_k."""
        from bertkit.inference.masked_lm import fill_mask

        texts = [text for job in jobs for text in job.items]
        top_k = max(job.options["top_k"] for job in jobs)
        predictions = fill_mask(texts, self.masked_lm, top_k=top_k, batch_size=len(texts))
        return [[[candidates[: job.options["top_k"]] for candidates in per_text] for per_text in part]
                for job, part in zip(jobs, _split(predictions, jobs))]

    def run_inspect(self, jobs) -> list[dict]:
        """The attention page data of each job's one input (bertkit.serving.inspect); one run each."""
        from bertkit.serving.inspect import inspect_data

        return [inspect_data(self, *job.items[0], **job.options) for job in jobs]

    def run_embed_all(self, jobs) -> list[list[np.ndarray]]:
        """Every token's vector ([CLS] and [SEP] included) of every job's texts, in one `embed` call."""
        from bertkit.inference.embedding import embed

        texts = [text for job in jobs for text in job.items]
        vectors = embed(texts, self.encoder, pooling="none", normalize=False, batch_size=len(texts),
                        max_length=self.embed_limit)
        return _split(vectors, jobs)

    def runners(self) -> dict[str, Any]:
        """Batched task name -> runner, for what this model serves ("generate": the app's DecodeLoop)."""
        wanted = {"embed": ("encoder", self.run_embed), "embed_all": ("encoder", self.run_embed_all),
                  "predict": ("task", self.run_predict),
                  "fill-mask": ("masked_lm", self.run_fill_mask), "inspect": ("encoder", self.run_inspect)}
        return {name: run for name, (capability, run) in wanted.items() if self.has(capability)}


def _split(results, jobs) -> list:
    """Consecutive slices of `results`, one per job, as long as its items."""
    parts, start = [], 0
    for job in jobs:
        parts.append(results[start : start + len(job.items)])
        start += len(job.items)
    return parts
