"""`export_onnx`: a checkpoint as an ONNX model that runs without bertkit or PyTorch.

What is exported: a fine-tuned model with its task head (classification and tagging ->
`logits`, QA -> `start_logits` / `end_logits`, multiple choice -> `logits`, GPT's
double-heads model -> `mc_logits`: the output field its registry head names) or, for any
other checkpoint, the bare encoder (`last_hidden_state`, `sentence_embedding` — the
vector `bertkit embed` gives by default: a sentence-transformers folder's pooling and
normalization, else the mean over real tokens — and `pooler_output` where the model has
a pooler; a text-to-text or pre-trained T5, BART or GPT exports that encoder too, since
generation is a loop of cached decoder calls that one graph does not hold). Inputs are the family's (`input_ids`, `attention_mask`, `token_type_ids`),
int64, with the axes named as optimum names them: `batch_size`, `sequence_length` and,
for multiple choice, `num_choices` between them.

How: PyTorch's TorchScript exporter (`torch.onnx.export(dynamo=False)`) traces the model
on a small padded batch. bertkit's fast paths — the unpadded encoder (bertkit.model.unpad)
and the last layer run at the read positions only (bertkit.model.query_rows) — pack rows
whose count depends on the data, which a trace would freeze, so under a trace the model
takes the padded path; the check below compares the export with the model as bertkit
runs it (those fast paths on). int8 is ONNX Runtime's dynamic quantization
of the exported model (`quantize_dynamic`, int8 weights per channel, uint8 activations).

Every export is checked before it is reported: ONNX Runtime runs batches whose sizes and
lengths differ from the traced one, and the outputs at real tokens must match PyTorch's
within 1e-4 (fp32) or give the same argmax (int8: reported as `argmax_agreement`, an
error below 90%, since near-ties may flip; an int8 encoder: cosine of the sentence
embeddings, reported as `min_cosine`, an error below 0.95 — the check's texts include
one-word ones, where int8 rounding weighs most). Next to the .onnx file go the tokenizer files and config.json
(label names in id2label) and `onnx_config.json` (inputs, outputs, task, precision; and
`both_orders` for a GPT similarity model: the graph scores one order, the task's score is
the sum over (a, b) and (b, a)), so the folder runs with `onnxruntime` and `tokenizers`
alone (docs/export.md).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from bertkit.atomic import write_text_atomic
from bertkit.errors import BertkitError
from bertkit.features import pool_tokens
from bertkit.inference.loading import LoadedModel, is_finetuned, load_encoder, load_finetuned, max_tokens
from bertkit.model.families import family_of_model, head_of_model, model_inputs

EXPORT_PRECISIONS = ("fp32", "int8")
MIN_OPSET = 14  # the exporter's scaled_dot_product_attention needs 14 (LayerNormalization is one op from 17)
DEFAULT_OPSET = 17
ONNX_CONFIG_FILE = "onnx_config.json"
FP32_TOLERANCE = 1e-4
INT8_MIN_COSINE = 0.95  # sentences keep >= 0.99; a text of a word or two ~0.97 (docs/export.md)
INT8_MIN_AGREEMENT = 0.9  # near-ties flip under int8 rounding; more than this many flips is a broken export
INPUT_ORDER = ("input_ids", "attention_mask", "token_type_ids")  # optimum's order
# texts of the traced batch and of the check batches (sizes and lengths differ from the trace's)
TRACE_TEXTS = [("The cat sat on the mat.", "A cat was sitting."), ("Hello world.", "Hi.")]
CHECK_TEXTS = [
    [("Paris is the capital of France and its largest city by far.", "Where is Paris?"),
     ("It rained.", "Did it rain all day long in the north of the country?"),
     ("Yes.", "No.")],
    [("One short line.", "And another one, a little longer than the first.")],
]


@dataclass
class ExportReport:
    """What `export_onnx` wrote and how the check went."""

    path: Path
    task: str  # a task family name, or "encoder"
    precision: str
    opset: int
    outputs: list[str]
    max_abs_diff: dict[str, float] = field(default_factory=dict)  # output -> over the check batches
    argmax_agreement: float | None = None  # int8 heads: share of rows (tokens for tagging) with fp32's argmax
    min_cosine: float | None = None  # int8 encoders: sentence embeddings vs fp32
    sidecar: list[str] = field(default_factory=list)
    input_axes: list[str] = field(default_factory=list)
    per_token: list[str] = field(default_factory=list)  # outputs with a sequence_length axis


class _ExportedEncoder(torch.nn.Module):
    """A bare encoder's outputs as a tuple: last_hidden_state, sentence_embedding[, pooler_output]."""

    def __init__(self, loaded: LoadedModel):
        super().__init__()
        self.model = loaded.model
        modules = loaded.sentence_modules
        pooling = modules.pooling if modules else "mean"
        if pooling not in ("mean", "cls"):
            raise BertkitError(f"{loaded.directory}: export onnx pools by mean or cls; this model's pooling is {pooling!r}")
        self.pooling, self.normalize = pooling, bool(modules and modules.normalize)
        self.has_pooler = getattr(self.model, "pooler", None) is not None

    def output_names(self) -> list[str]:
        return ["last_hidden_state", "sentence_embedding"] + (["pooler_output"] if self.has_pooler else [])

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        batch = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        out = self.model(**model_inputs(self.model, batch))  # the inputs the family takes (no token types: T5, BART)
        sentence = pool_tokens(out.last_hidden_state, attention_mask, self.pooling)
        if self.normalize:
            sentence = torch.nn.functional.normalize(sentence, dim=-1)
        return (out.last_hidden_state, sentence) + ((out.pooler_output,) if self.has_pooler else ())


class _ExportedHead(torch.nn.Module):
    """A task model's outputs as a tuple: those of `output_names` its output holds — its
    head's scores (`logits`; GPT's double heads' `mc_logits`: bertkit.model.families
    `head_of_model`), or start_logits and end_logits (extractive QA) — found on a first run.
    The model's inputs are picked as everywhere (`model_inputs`: a head's last-token input is
    derived from the mask inside the graph)."""

    HEAD_OUTPUTS = ("start_logits", "end_logits")

    def __init__(self, loaded: LoadedModel, sample: dict[str, torch.Tensor]):
        super().__init__()
        self.model = loaded.model
        with torch.no_grad():
            out = self.model(**model_inputs(self.model, sample))
        outputs = (head_of_model(self.model).logits, *self.HEAD_OUTPUTS)
        self.names = [name for name in outputs if getattr(out, name, None) is not None]

    def output_names(self) -> list[str]:
        return list(self.names)

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        batch = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        out = self.model(**model_inputs(self.model, batch))
        return tuple(getattr(out, name) for name in self.names)


def export_onnx(model: str | os.PathLike, output: str | os.PathLike, precision: str = "fp32",
                opset: int = DEFAULT_OPSET) -> ExportReport:
    """Export the checkpoint directory `model` to `output` (.onnx), check it, write the sidecar."""
    require_onnx()
    if precision not in EXPORT_PRECISIONS:
        raise BertkitError(f"precision: export onnx writes {' or '.join(EXPORT_PRECISIONS)}, got {precision!r} "
                           "(bf16 ONNX models do not run on ONNX Runtime's CPU provider)")
    if opset < MIN_OPSET:
        raise BertkitError(f"opset: must be >= {MIN_OPSET}, got {opset}")
    output = Path(output)
    if output.suffix != ".onnx":
        raise BertkitError(f"--output {output}: expected a .onnx file name")
    loaded = _exported_model(model)
    # a decoder without a pad token (GPT-2) pads with EOS; the sidecar names what was used
    loaded = replace(loaded, tokenizer=loaded.tokenizer.with_eos_padding(getattr(loaded.config, "eos_token_id", None)))
    family = loaded.program_cls.task_family() if loaded.spec is not None else None
    axes = family.hook("input_axes")() if family is not None else ("batch_size", "sequence_length")
    # what the model reads of what the tokenizer gives (RoBERTa's reads token types, its tokenizer gives none)
    takes, gives = family_of_model(loaded.model).input_names, loaded.tokenizer.model_input_names
    # a model without a token-type table (DeBERTa-v3: type_vocab_size 0) reads none: the graph has no such input
    input_names = [name for name in INPUT_ORDER if name in takes and name in gives
                   and (name != "token_type_ids" or getattr(loaded.config, "type_vocab_size", 1) > 0)]
    sample = _batch(loaded, TRACE_TEXTS, axes, input_names)
    # eval: the exporter puts the wrapper back in its mode afterwards, and with it the model
    wrapper = (_ExportedHead(loaded, sample) if family is not None else _ExportedEncoder(loaded)).eval()
    report = ExportReport(output, family.name if family is not None else "encoder", precision, opset,
                          wrapper.output_names(), input_axes=list(axes))
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=output.parent) as scratch:
        fp32_path = Path(scratch) / "model.onnx" if precision == "int8" else output
        report.per_token = _trace(wrapper, sample, input_names, report, fp32_path)
        if precision == "int8":
            _quantize(fp32_path, output)
    _check(report, loaded, wrapper, input_names)
    report.sidecar = _write_sidecar(report, loaded, family, input_names)
    return report


def _exported_model(model: str | os.PathLike) -> LoadedModel:
    """What is exported: a fine-tuned task head, else the encoder `embed` reads (a text-to-text or pre-trained
    generator too: generation is a loop of cached decoder calls, which one graph does not hold). A model
    over words' characters (ELMo) is refused in one line."""
    loaded = load_finetuned(model, device="cpu") if is_finetuned(model) else None
    if loaded is None or (loaded.program_cls is not None and loaded.program_cls.generates_text):
        loaded = load_encoder(model, device="cpu")
    if family_of_model(loaded.model).reads_words:  # ELMo, and a task trained on its features
        raise BertkitError(f"{model}: an {loaded.config.model_type} model reads words' characters, which export onnx "
                           "does not cover (it exports sub-word models); bertkit embed and predict run it")
    return loaded


def require_onnx() -> None:
    """A one-line error when the `export` extra (onnx, onnxruntime) is not installed."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        raise BertkitError("export onnx needs the onnx and onnxruntime packages: pip install 'bertkit[export]'") from None


def _quantize(fp32_path: Path, output: Path) -> None:
    """ONNX Runtime's dynamic int8 quantization, without its advice on the root logger."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        quantize_dynamic(fp32_path, output, weight_type=QuantType.QInt8, per_channel=True)
    finally:
        root.setLevel(level)


def _batch(loaded: LoadedModel, pairs, axes, names) -> dict[str, torch.Tensor]:
    """A padded int64 batch of text pairs; with a num_choices axis (B, C, T): each row's
    two choices are the pair's second text and that text negated."""
    if "num_choices" in axes:
        firsts = [first for first, _ in pairs for _ in range(2)]
        seconds = [text for _, second in pairs for text in (second, f"Not so: {second}")]
        encoded = loaded.tokenizer(firsts, seconds, padding=True, return_tensors="pt")
        return {name: encoded[name].view(len(pairs), 2, -1).long() for name in names}
    encoded = loaded.tokenizer([a for a, _ in pairs], [b for _, b in pairs], padding=True, return_tensors="pt")
    return {name: encoded[name].long() for name in names}


def _trace(wrapper, sample, input_names, report: ExportReport, path: Path) -> list[str]:
    """Trace `wrapper` on `sample` into `path`; returns the outputs with a sequence axis."""
    import warnings

    with torch.no_grad():
        traced_outputs = wrapper(**sample)
    length = sample["input_ids"].shape[-1]
    per_token = [name for name, value in zip(report.outputs, traced_outputs) if value.dim() >= 2 and value.shape[1] == length]
    dynamic_axes = {name: dict(enumerate(report.input_axes)) for name in input_names}
    for name in report.outputs:
        dynamic_axes[name] = {0: "batch_size", 1: "sequence_length"} if name in per_token else {0: "batch_size"}
    with torch.no_grad(), warnings.catch_warnings():  # under the trace the model takes its padded path
        warnings.simplefilter("ignore")  # tracer notices about Python values it records as constants
        torch.onnx.export(wrapper, tuple(sample[name] for name in input_names), str(path), input_names=input_names,
                          output_names=report.outputs, dynamic_axes=dynamic_axes, opset_version=report.opset,
                          dynamo=False)
    return per_token


def _check(report: ExportReport, loaded: LoadedModel, wrapper, input_names) -> None:
    """ONNX Runtime against PyTorch (as bertkit runs it) on batches shaped unlike the trace."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(report.path), providers=["CPUExecutionProvider"])
    agree = total = 0
    cosines = []
    for pairs in CHECK_TEXTS:
        batch = _batch(loaded, pairs, report.input_axes, input_names)
        got = dict(zip(report.outputs, session.run(report.outputs, {k: v.numpy() for k, v in batch.items()})))
        with torch.no_grad():
            expected = dict(zip(report.outputs, (t.float().numpy() for t in wrapper(**batch))))
        real = batch["attention_mask"].numpy().astype(bool)
        for name in report.outputs:
            want, have = expected[name], got[name]
            if want.shape != have.shape:
                raise BertkitError(f"{report.path}: output {name} has shape {have.shape}, PyTorch's {want.shape}")
            per_token = name in report.per_token
            if per_token and want.ndim == 2:  # a score per position (QA): the argmax is over real positions
                want, have = np.where(real, want, -np.inf), np.where(real, have, -np.inf)
            elif per_token:  # (B, T, K): padding positions are not outputs
                want, have = want[real], have[real]
            finite = np.isfinite(want)
            report.max_abs_diff[name] = max(report.max_abs_diff.get(name, 0.0),
                                            float(np.abs(want[finite] - have[finite]).max()))
            if name == "sentence_embedding":
                cosines.extend((want * have).sum(-1) / np.linalg.norm(want, axis=-1) / np.linalg.norm(have, axis=-1))
            elif isinstance(wrapper, _ExportedHead) and want.shape[-1] > 1:  # a regression head has no argmax
                agree += int((want.argmax(-1) == have.argmax(-1)).sum())
                total += want.argmax(-1).size
    if total:
        report.argmax_agreement = agree / total
    if cosines:
        report.min_cosine = float(min(cosines))
    if report.precision == "fp32":
        worst = max(report.max_abs_diff, key=report.max_abs_diff.get)
        if report.max_abs_diff[worst] > FP32_TOLERANCE:
            raise BertkitError(f"{report.path}: output {worst} differs from PyTorch by "
                               f"{report.max_abs_diff[worst]:.2e} (tolerance {FP32_TOLERANCE:g})")
    elif report.argmax_agreement is not None and report.argmax_agreement < INT8_MIN_AGREEMENT:
        raise BertkitError(f"{report.path}: int8 model's argmax differs from PyTorch fp32 on "
                           f"{1 - report.argmax_agreement:.1%} of the checked rows")
    elif report.min_cosine is not None and report.min_cosine < INT8_MIN_COSINE:
        raise BertkitError(f"{report.path}: int8 sentence embeddings' cosine to PyTorch fp32 is {report.min_cosine:.4f} "
                           f"(< {INT8_MIN_COSINE})")


def _write_sidecar(report: ExportReport, loaded: LoadedModel, family, input_names) -> list[str]:
    """Tokenizer files, config.json and onnx_config.json next to the .onnx file."""
    folder = report.path.parent
    written = [path.name for path in loaded.tokenizer.save_pretrained(folder)]
    config = folder / "config.json"
    if loaded.directory is not None and (loaded.directory / "config.json").resolve() != config.resolve():
        shutil.copyfile(loaded.directory / "config.json", config)
    written.append(config.name)
    id2label = loaded.id2label if family is not None and family.label_names else None
    description = {
        "model": report.path.name, "task": report.task, "precision": report.precision, "opset": report.opset,
        "inputs": input_names, "input_axes": report.input_axes, "outputs": report.outputs,
        "max_sequence_length": _max_sequence_length(loaded),
        "pad_token": loaded.tokenizer.pad_token, "pad_token_id": loaded.tokenizer.pad_token_id,
        "labels": [id2label[i] for i in sorted(id2label)] if id2label else None,
        "exported_by": "bertkit export onnx",
    }
    if getattr(loaded.spec, "both_orders", False):  # GPT-1's similarity rule: the caller adds the two orders
        description["both_orders"] = True
    write_text_atomic(folder / ONNX_CONFIG_FILE, json.dumps(description, indent=2) + "\n")
    return written + [ONNX_CONFIG_FILE]


def _max_sequence_length(loaded: LoadedModel) -> int:
    """What inputs are truncated to: as fine-tuned, a sentence-transformers folder's
    max_seq_length, else the position table's limit; at most the length up to which the
    traced path holds (BigBird's block-sparse attention starts past `sparse_threshold`: the
    graph, traced on short inputs, holds full attention only)."""
    if loaded.spec is not None:
        limit = loaded.spec.max_seq_length
    else:
        modules = loaded.sentence_modules
        limit = (modules and modules.max_seq_length) or max_tokens(loaded.model)
    if getattr(loaded.config, "attention_type", None) == "block_sparse":
        limit = min(limit, loaded.config.sparse_threshold)
    return limit
