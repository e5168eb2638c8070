"""The feature-based approach to NER (BERT paper section 5.3, Table 7): a frozen encoder's
contextual features feed a small BiLSTM tagger; no BERT weight is trained.

Features (`bertkit.feature_choices.LAYER_CHOICES`, the same choices and the same code
as `bertkit.embed`): embeddings, last, second_to_last, sum_last_four, concat_last_four
(D = 4H), weighted_sum (a learned scalar mix of all L+1 hidden states: softmax-
normalised weights and a scale gamma, as ELMo's; uniform weights at the start).

Tagger: dropout -> 2-layer BiLSTM (hidden 768 per direction in the paper; 256 by
default here, `lstm_hidden_size`) over every sub-token of a window -> dropout -> linear
classifier; the loss and the predictions use each word's first sub-token only, exactly
as fine-tuning (bertkit.tasks.tagging: same windows, labels, IOB1/IOB2 handling).
Dropout is the checkpoint's classifier dropout (hidden_dropout_prob, 0.1).

Cache. The encoder is frozen, so its features are computed once per window (train and
dev) before training, not every epoch: one array of (tokens, D) values — (tokens, L+1,
H) for weighted_sum, which needs every layer — in `feature_cache_dtype` (float16 by
default, 2 bytes a value). It lives in memory up to `MEMORY_CACHE_LIMIT` bytes and
otherwise in a memmap under `<run>/feature_cache/` (removed when the run ends);
`feature_cache` = auto | memory | disk chooses. Cost: the values per token x 2 bytes —
3 KiB for MiniLM's concat_last_four (4 x 384), 5.25 KiB for its weighted_sum (7 x 384),
19.5 KiB for BERT-base's weighted_sum (13 x 768). CoNLL-2003 train is ~0.27 M
sub-tokens with MiniLM's vocabulary (~19.4 a sentence, [CLS]/[SEP] included), so
0.8 GiB, 1.4 GiB and 5.1 GiB (on disk under auto); a 2,000-sentence subset is 1/7 of
that. Only weighted_sum caches every layer; the other choices cache just the combined
features they use (H values, 4H for concat). At inference the features are rounded to
the cache dtype too, so a saved model sees what it was trained on.

Training runs on the shared loop (`FeatureTaggingProgram`, a `TaggingProgram` whose
batches hold cached features instead of token ids). A checkpoint holds the tagger only:
`feature_tagger.safetensors`, `feature_tagger.json` (which encoder checkpoint — its
absolute path and the sha256 of its weights file, checked when loading — which
features, sizes, label names), the tokenizer and `bertkit_task.json`.
`load_feature_tagger` joins the encoder and the tagger again (`BertFeatureTagger`) so
`bertkit predict` / `bertkit evaluate ner` use it as any fine-tuned tagger (bertkit.inference).
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from bertkit.atomic import atomic_path, write_text_atomic
from bertkit.checksums import file_sha256
from bertkit.labels import IGNORE_INDEX
from bertkit.errors import BertkitError, ConfigError
from bertkit.feature_choices import LAYER_CHOICES, MIXED_CHOICES
from bertkit.features import load_feature_encoder
from bertkit.model.scalar_mix import ScalarMix
from bertkit.model.families import FEATURE_HEAD_FILE, model_inputs
from bertkit.model.outputs import TokenClassifierOutput
from bertkit.tasks.programs import ClassificationProgram, TaggingProgram, TaskData, feature_length

TAGGER_CONFIG_FILE = FEATURE_HEAD_FILE
TAGGER_WEIGHTS_FILE = "feature_tagger.safetensors"
CACHE_DIR = "feature_cache"
MEMORY_CACHE_LIMIT = 2 * 1024**3  # bytes: larger caches go to a memmap on disk (feature_cache=auto)
CACHE_CHOICES = ("auto", "memory", "disk")
CACHE_DTYPES = ("float16", "float32")
FOUR_LAYER_CHOICES = ("sum_last_four", "concat_last_four")


# ---------------------------------------------------------------------------- configuration


@dataclass
class FeatureTaggerConfig:
    """What a feature-based tagger needs besides its weights; saved as feature_tagger.json.

    encoder: absolute path of the frozen encoder checkpoint; encoder_sha256: of its
    weights file. hidden_size (H) and num_hidden_states (L+1): the encoder's.
    """

    features: str
    encoder: str
    encoder_sha256: str
    hidden_size: int
    num_hidden_states: int
    labels: list[str]
    lstm_hidden_size: int = 256
    lstm_num_layers: int = 2
    dropout: float = 0.1
    cache_dtype: str = "float16"
    pooling: str | None = None  # None: a label per token (tagging); "mean": one per sequence (classification)

    @property
    def token_shape(self) -> tuple[int, ...]:
        """Cached values per token: (4H,) concat, (L+1, H) weighted_sum, (H,) otherwise."""
        return token_shape(self.features, self.hidden_size, self.num_hidden_states)

    @property
    def input_size(self) -> int:
        """Features per token entering the BiLSTM (after the scalar mix)."""
        return self.hidden_size * (4 if self.features == "concat_last_four" else 1)

    def save(self, directory: Path) -> None:
        write_text_atomic(Path(directory) / TAGGER_CONFIG_FILE, json.dumps(dataclasses.asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, directory: str | Path) -> "FeatureTaggerConfig":
        path = Path(directory) / TAGGER_CONFIG_FILE
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
            config = cls(**values)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, TypeError) as exc:
            raise BertkitError(f"{path}: not a valid feature-based tagger description ({exc})") from None
        if config.features not in LAYER_CHOICES:
            raise BertkitError(f"{path}: unknown features {config.features!r}; expected one of {', '.join(LAYER_CHOICES)}")
        return config


def token_shape(features: str, hidden_size: int, num_hidden_states: int) -> tuple[int, ...]:
    if features in MIXED_CHOICES or features == "all":
        return (num_hidden_states, hidden_size)
    return (4 * hidden_size,) if features == "concat_last_four" else (hidden_size,)


def layer_features(hidden_states: Sequence[torch.Tensor], features: str) -> torch.Tensor:
    """The L+1 hidden states (B, T, H), embeddings first -> what the tagger reads:
    (B, T, L+1, H) for weighted_sum (mixed inside the tagger), else bertkit.embed's
    `select_layers` (B, T, D)."""
    from bertkit.features import select_layers

    if features in MIXED_CHOICES:
        return torch.stack(tuple(hidden_states), dim=2)  # (B, T, L+1, H)
    return select_layers(hidden_states, features)


def check_encoder_depth(features: str, num_hidden_layers: int, origin: str) -> None:
    if features in FOUR_LAYER_CHOICES and num_hidden_layers < 4:
        raise ConfigError(f"field 'features': {features} needs an encoder with at least 4 layers; "
                          f"{origin} has {num_hidden_layers}")


def encoder_weights_file(directory: str | Path) -> Path:
    """The weights file bertkit loads from a checkpoint folder (as bertkit.interop.hf)."""
    from bertkit.interop.hf import PYTORCH_NAME, SAFETENSORS_NAME

    directory = Path(directory)
    for name in (SAFETENSORS_NAME, PYTORCH_NAME):
        if (directory / name).is_file():
            return directory / name
    raise BertkitError(f"{directory}: no {SAFETENSORS_NAME} or {PYTORCH_NAME} found")


# ---------------------------------------------------------------------------- modules


class FeatureTagger(nn.Module):
    """Cached encoder features -> (scalar mix) -> dropout -> BiLSTM -> dropout -> linear, per token;
    with `pooling` "mean" the BiLSTM states are averaged over the real tokens first (one label
    per sequence: feature-based classification)."""

    def __init__(self, config: FeatureTaggerConfig):
        super().__init__()
        self.config = config
        self.scalar_mix = ScalarMix(config.num_hidden_states) if config.features in MIXED_CHOICES + ("all",) else None
        self.dropout = nn.Dropout(config.dropout)
        self.lstm = nn.LSTM(config.input_size, config.lstm_hidden_size, num_layers=config.lstm_num_layers,
                            batch_first=True, bidirectional=True,
                            dropout=config.dropout if config.lstm_num_layers > 1 else 0.0)
        self.classifier = nn.Linear(2 * config.lstm_hidden_size, len(config.labels))

    def forward(self, features: torch.Tensor, attention_mask: torch.Tensor,
                labels: torch.Tensor | None = None) -> TokenClassifierOutput:
        """features: (B, T, D) float, (B, T, L+1, H) for weighted_sum; attention_mask (B, T),
        1 on real tokens (left-aligned); labels (B, T) int64, -100 where no loss is taken."""
        if self.scalar_mix is not None:
            features = self.scalar_mix(features, layer_dim=2)  # (B, T, L+1, H) -> (B, T, H)
        width = features.shape[1]
        lengths = attention_mask.sum(1).clamp_min(1).cpu()
        packed = pack_padded_sequence(self.dropout(features), lengths, batch_first=True, enforce_sorted=False)
        hidden, _ = self.lstm(packed)
        hidden, _ = pad_packed_sequence(hidden, batch_first=True, total_length=width)  # (B, T, 2 * lstm hidden)
        if self.config.pooling == "mean":
            from bertkit.model.layers import mean_over_tokens

            logits = self.classifier(self.dropout(mean_over_tokens(hidden, attention_mask)))  # (B, K)
            loss = None if labels is None else F.cross_entropy(logits, labels)
            return TokenClassifierOutput(loss, logits)
        logits = self.classifier(self.dropout(hidden))  # (B, T, K)
        loss = None
        if labels is not None:
            flat_logits, flat_labels = logits.view(-1, logits.shape[-1]), labels.view(-1)  # (B * T, K), (B * T,)
            if bool((flat_labels != IGNORE_INDEX).any()):
                loss = F.cross_entropy(flat_logits, flat_labels, ignore_index=IGNORE_INDEX)
            else:  # nothing labelled: zero loss (as BertForTokenClassification)
                loss = flat_logits.sum() * 0.0
        return TokenClassifierOutput(loss, logits)


class BertFeatureTagger(nn.Module):
    """A frozen encoder joined with its trained `FeatureTagger`, called like
    BertForTokenClassification: (input_ids, token_type_ids, attention_mask) -> logits.
    `config` is the encoder's config with the tagger's label map. A word-level encoder (ELMo,
    bertkit.features.WordLevelEncoder) also reads the window's given words (`word_ids`)."""

    input_names = ("input_ids", "token_type_ids", "attention_mask", "word_ids")

    def __init__(self, encoder: nn.Module, tagger: FeatureTagger, config):
        super().__init__()
        self.bert = encoder.requires_grad_(False)
        self.tagger = tagger
        self.config = config

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                word_ids: torch.Tensor | None = None) -> TokenClassifierOutput:
        """input_ids etc. (B, T) int; returns logits (B, T, K) (and the loss with labels)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        choice = self.tagger.config.features
        batch = {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask,
                 "word_ids": word_ids}
        with torch.no_grad():
            out = self.bert(**{k: v for k, v in model_inputs(self.bert, batch).items() if v is not None},
                            output_hidden_states=choice != "last")
            features = out.last_hidden_state if choice == "last" else layer_features(out.hidden_states, choice)
            features = features.to(getattr(torch, self.tagger.config.cache_dtype)).float()  # as cached in training
        return self.tagger(features, attention_mask, labels)


# ---------------------------------------------------------------------------- the cache


@dataclass
class FeatureCache:
    """The encoder's features of a run's training (and dev) windows; see the module docstring."""

    features: str
    encoder: str
    encoder_sha256: str
    token_shape: tuple[int, ...]
    dtype: str
    tokens: dict[str, int]
    directory: Path | None  # the memmap folder; None: in memory

    @property
    def nbytes(self) -> int:
        return sum(self.tokens.values()) * math.prod(self.token_shape) * np.dtype(self.dtype).itemsize

    def describe(self) -> str:
        counts = " + ".join(f"{count:,} {name}" for name, count in self.tokens.items())
        shape = " x ".join(str(n) for n in self.token_shape)
        where = "in memory" if self.directory is None else f"memmap in {self.directory}"
        return f"{counts} tokens x {shape} {self.dtype} values = {self.nbytes / 2**20:,.1f} MiB, {where}"

    def remove(self) -> None:
        """Delete the on-disk cache (no-op in memory); views into it must be dropped first."""
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)


def build_feature_cache(encoder_dir: str | Path, encoder_config, tokenizer, choice: str, datasets: dict[str, TaskData],
                        *, cache: str = "auto", dtype: str = "float16", run_dir: str | Path | None = None,
                        batch_size: int = 64, progress: bool = False, device: str | None = None) -> FeatureCache:
    """Run the frozen encoder once over every window of `datasets` ({"train": ..., "dev": ...})
    and attach each feature's slice of the cache as `feature["hidden"]` (T, *token_shape).

    cache: "memory", "disk" (a memmap `<run_dir>/feature_cache/<name>.npy`) or "auto"
    (memory up to MEMORY_CACHE_LIMIT bytes)."""
    if choice not in LAYER_CHOICES:
        raise ConfigError(f"field 'features' must be one of {', '.join(LAYER_CHOICES)}, got {choice!r}")
    check_encoder_depth(choice, encoder_config.num_hidden_layers, f"{encoder_dir}/config.json")
    shape = token_shape(choice, encoder_config.hidden_size, encoder_config.num_hidden_layers + 1)
    tokens = {name: sum(feature_length(f) for f in data.features) for name, data in datasets.items()}
    nbytes = sum(tokens.values()) * math.prod(shape) * np.dtype(dtype).itemsize
    on_disk = cache == "disk" or (cache == "auto" and nbytes > MEMORY_CACHE_LIMIT)
    directory = None
    if on_disk:
        if run_dir is None:
            raise ConfigError("field 'feature_cache': a disk cache needs the run folder (output_dir)")
        directory = Path(run_dir) / CACHE_DIR
        directory.mkdir(parents=True, exist_ok=True)
    weights = encoder_weights_file(encoder_dir)
    result = FeatureCache(choice, str(Path(encoder_dir).resolve()), file_sha256(weights), shape, dtype, tokens,
                          directory)
    target = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    encoder = load_feature_encoder(encoder_dir, encoder_config, tokenizer).requires_grad_(False).to(target).eval()
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    for name, data in datasets.items():
        if directory is not None:
            path = directory / f"{name}.npy"
            array = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(tokens[name], *shape))
        else:
            array = np.empty((tokens[name], *shape), dtype=dtype)
        offsets = np.concatenate([[0], np.cumsum([feature_length(f) for f in data.features])])
        _fill(encoder, data.features, choice, array, offsets, pad_id, batch_size, progress, f"features ({name})")
        if directory is not None:
            array.flush()
            del array
            array = np.load(path, mmap_mode="r")  # read-only from here on
        for feature, start, end in zip(data.features, offsets[:-1], offsets[1:]):
            feature["hidden"] = array[start:end]  # (T, *shape) view
    return result


def _fill(encoder: nn.Module, features: list[dict[str, Any]], choice: str, array: np.ndarray, offsets: np.ndarray,
          pad_id: int, batch_size: int, progress: bool, desc: str) -> None:
    """Encoder features of every window into array[offsets[k]:offsets[k+1]], batches sorted by length."""
    from tqdm.auto import tqdm

    from bertkit.data.collate import collate

    device = next(encoder.parameters()).device
    order = np.argsort([feature_length(f) for f in features], kind="stable")[::-1]  # longest first
    with torch.inference_mode():
        for start in tqdm(range(0, len(order), batch_size), desc=desc, unit="batch", disable=not progress or None):
            rows = order[start : start + batch_size]
            batch = collate([{"input_ids": features[i]["input_ids"], "token_type_ids": features[i]["token_type_ids"],
                              **({"word_ids": features[i]["word_ids"]} if "word_ids" in features[i] else {})}
                             for i in rows], pad_id)
            out = encoder(**model_inputs(encoder, batch, device), output_hidden_states=choice != "last")
            values = out.last_hidden_state if choice == "last" else layer_features(out.hidden_states, choice)
            values = values.float().cpu().numpy()  # (B, T, *shape)
            for row, index in enumerate(rows):
                array[offsets[index] : offsets[index + 1]] = values[row, : offsets[index + 1] - offsets[index]]


def run_cached(model: FeatureTagger, features: Sequence[dict[str, Any]], collate, batch_size: int,
               progress: bool = False) -> list[np.ndarray]:
    """Logits (T_i, K) float32 of every cached feature, in input order (batches sorted by length)."""
    from tqdm.auto import tqdm

    order = np.argsort([feature_length(f) for f in features], kind="stable")[::-1]
    device = next(model.parameters()).device
    outputs: list[np.ndarray | None] = [None] * len(features)
    for start in tqdm(range(0, len(order), batch_size), desc="dev", unit="batch", leave=False,
                      disable=not progress or None):
        rows = order[start : start + batch_size]
        batch = collate([features[i] for i in rows])
        logits = model(features=batch["hidden"].to(device),
                       attention_mask=batch["attention_mask"].to(device)).logits.float().cpu().numpy()
        for row, index in enumerate(rows):
            outputs[index] = logits[row, : feature_length(features[index])] if logits.ndim == 3 else logits[row]
    return outputs  # type: ignore[return-value]


# ---------------------------------------------------------------------------- the program


class FeatureBasedProgram:
    """What the feature-based programs share: batches of cached features (`hidden`), the
    trained model a `FeatureTagger`, the checkpoint the tagger alone (see the module docstring).
    Mixed in before a task family's program, whose reading, encoding and metrics it keeps."""

    pooling: str | None = None  # the FeatureTagger's (None: per token)

    @classmethod
    def model_class(cls, config=None):
        """The model this program trains: the tagger (the encoder's family needs no tagging head)."""
        return FeatureTagger

    def forward(self, model, batch: dict[str, torch.Tensor], **targets):
        return model(features=batch["hidden"], attention_mask=batch["attention_mask"], **targets)

    def evaluate(self, model: nn.Module, ctx, batch_size: int, max_batches: int | None) -> dict[str, float]:
        if self.dev is None:
            return {}
        self.last_outputs = run_cached(model, self.dev.features, self.collate, self.eval_batch_size,
                                       self.progress and ctx.is_main)
        return self.metrics(self.dev, self.last_outputs)

    def save_pretrained(self, model: nn.Module, directory: Path, state_dict=None) -> None:
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        source = model.state_dict() if state_dict is None else state_dict
        state = {k: v.detach().contiguous().cpu() for k, v in source.items()}
        with atomic_path(directory / TAGGER_WEIGHTS_FILE) as tmp:
            save_file(state, str(tmp), metadata={"format": "pt"})
        model.config.save(directory)
        self.tokenizer.save_pretrained(directory)
        self.spec.save(directory)

    def fsdp_units(self, model: nn.Module) -> list[nn.Module]:
        return []

    @classmethod
    def build_model(cls, cache: FeatureCache, encoder_config, labels: list[str], lstm_hidden_size: int,
                    lstm_num_layers: int) -> tuple[FeatureTagger, list[str]]:
        """A fresh tagger for `cache`'s features (seed torch first): (model, what starts fresh)."""
        from bertkit.model.losses import classifier_dropout

        config = FeatureTaggerConfig(cache.features, cache.encoder, cache.encoder_sha256, encoder_config.hidden_size,
                                     encoder_config.num_hidden_layers + 1, list(labels), lstm_hidden_size,
                                     lstm_num_layers, classifier_dropout(encoder_config), cache.dtype, cls.pooling)
        model = FeatureTagger(config)
        count = sum(p.numel() for p in model.parameters())
        mix = "scalar mix + " if model.scalar_mix is not None else ""
        return model, [f"the whole tagger ({mix}{lstm_num_layers}-layer BiLSTM {lstm_hidden_size} + linear, "
                       f"{count:,} parameters; encoder frozen)"]


class FeatureTaggingProgram(FeatureBasedProgram, TaggingProgram):
    """NER with a frozen encoder: a `FeatureTagger` per token on each window's cached features."""


class FeatureClassificationProgram(FeatureBasedProgram, ClassificationProgram):
    """Sequence classification with a frozen encoder (ELMo's use): the tagger's BiLSTM states
    averaged over the real tokens, then a linear layer; regression is not offered."""

    pooling = "mean"

    @classmethod
    def fit_spec(cls, spec, train_examples: list):
        spec = super().fit_spec(spec, train_examples)
        if spec.regression:
            raise ConfigError("field 'features': feature-based classification takes class labels, not regression")
        return spec


# ---------------------------------------------------------------------------- loading


def is_feature_tagger(directory: str | Path) -> bool:
    return (Path(directory) / TAGGER_CONFIG_FILE).is_file()


def load_feature_tagger(directory: str | Path) -> BertFeatureTagger:
    """A saved feature-based tagger joined with its encoder (on the CPU, in eval mode); its
    `config` is the encoder's with the tagger's label map. bertkit.inference.loading
    makes it a loaded fine-tuned model."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from bertkit.model.families import load_config
    from bertkit.tokenization import Tokenizer

    directory = Path(directory)
    config = FeatureTaggerConfig.load(directory)
    origin = directory / TAGGER_CONFIG_FILE
    encoder_dir = Path(config.encoder)
    if not encoder_dir.is_dir():
        raise BertkitError(f"{origin}: the encoder checkpoint {encoder_dir} is gone (the tagger needs it: "
                           "restore it there or edit 'encoder')")
    if file_sha256(encoder_weights_file(encoder_dir)) != config.encoder_sha256:
        raise BertkitError(f"{origin}: the encoder checkpoint {encoder_dir} has changed since the tagger was trained "
                           "(sha256 of its weights differs)")
    encoder_config = load_config(encoder_dir)
    if (encoder_config.hidden_size, encoder_config.num_hidden_layers + 1) != (config.hidden_size,
                                                                              config.num_hidden_states):
        raise BertkitError(f"{origin}: hidden_size / layers disagree with {encoder_dir}/config.json")
    tagger = FeatureTagger(config)
    path = directory / TAGGER_WEIGHTS_FILE
    try:
        state = load_file(path, device="cpu")
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise BertkitError(f"{path}: cannot read the tagger's weights ({exc})") from None
    try:
        tagger.load_state_dict(state)
    except RuntimeError as exc:
        raise BertkitError(f"{path}: weights do not fit {origin} ({str(exc).splitlines()[0]})") from None
    labelled = encoder_config.with_labels(config.labels)
    encoder = load_feature_encoder(encoder_dir, encoder_config, Tokenizer.from_pretrained(directory))
    return BertFeatureTagger(encoder, tagger, labelled).eval()
