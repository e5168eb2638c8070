"""Heads shared by several objectives and families: the pooler, the masked-LM prediction head,
and transformers' sequence summary (the multiple-choice head of GPT, ELECTRA and XLNet).

`decoder_cross_entropy` is the MLM decoder and its loss fused for training speed: the
loss's gradient over the (N, V) logits at masked positions is formed and used chunk by
chunk while each chunk is in cache (see its docstring for the maths and the gain).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.model.layers import ACTIVATIONS
from bertkit.model.losses import IGNORE_INDEX
from bertkit.model.dropout import Dropout
from bertkit.model.memory import empty_large
from bertkit.model.static_shapes import static_label_positions

if TYPE_CHECKING:  # annotation only
    from bertkit.model.encoder_config import EncoderConfig


class BertPooler(nn.Module):
    """tanh(dense(h_[CLS])): (B, T, H) -> (B, H)."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden_states[:, 0]))


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = ACTIVATIONS[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.act(self.dense(hidden_states)))


class TiedDecoderHead(nn.Module):
    """A vocabulary head whose decoder is tied to the word embeddings: `transform` (a module
    or method, (..., H) -> (..., E)), then the (V, E) embedding matrix, passed in, plus the
    head's own `bias` (V,). The tie is functional, so the state dict holds the matrix once.
    Subclasses (BERT's, RoBERTa's, ALBERT's heads) set `transform` and `bias`."""

    def forward(self, hidden_states: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        """hidden_states: (..., H); word_embeddings: (V, E) -> logits (..., V)."""
        return F.linear(self.transform(hidden_states), word_embeddings, self.bias)

    def loss_and_logits(
        self, hidden_states: torch.Tensor, word_embeddings: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """hidden_states: (N, H) at masked positions; targets: (N,) ids -> (mean CE, logits (N, V)).

        Equal to `F.cross_entropy(self(hidden_states, word_embeddings), targets)`, fused."""
        return decoder_cross_entropy(self.transform(hidden_states), word_embeddings, self.bias, targets)


class TiedOutputLayer(TiedDecoderHead):
    """The output layer alone, tied to the word embeddings (V, E): no transform, only its `bias`
    (V,) is a parameter (ELECTRA's `generator_lm_head`, XLNet's `lm_loss`, ModernBERT's `decoder`)."""

    def __init__(self, vocab_size: int, bias: bool = True):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(vocab_size)) if bias else None  # none: ModernBERT's decoder_bias false

    @staticmethod
    def transform(hidden_states: torch.Tensor) -> torch.Tensor:
        return hidden_states


class BertLMPredictionHead(TiedDecoderHead):
    """MLM head: transform (dense + act + LayerNorm), then the tied decoder plus an output bias."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))


class BertOnlyMLMHead(nn.Module):
    """`cls` in HF's BertForMaskedLM / BertLMHeadModel: the vocabulary head alone."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.predictions = BertLMPredictionHead(config)


class BertPreTrainingHeads(nn.Module):
    """`cls` in HF's BertForPreTraining: MLM predictions + NSP (IsNext / NotNext) on the pooled [CLS]."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.predictions = BertLMPredictionHead(config)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)


def labelled_rows(
    hidden_states: torch.Tensor, labels: torch.Tensor, per_sequence: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """hidden_states (B, T, H), labels (B, T) (-100 = no prediction) -> the N labelled
    positions (N, 2) in row-major order, their hidden states (N, H) and labels (N,).
    With `per_sequence` (a static budget, bertkit.model.static_shapes) N = B x per_sequence:
    the labelled rows, then fillers labelled -100."""
    if per_sequence is None:
        positions = (labels != IGNORE_INDEX).nonzero(as_tuple=False)  # (N, 2)
    else:
        positions = static_label_positions(labels, per_sequence)  # (B * per_sequence, 2)
    rows, columns = positions[:, 0], positions[:, 1]
    return positions, hidden_states[rows, columns], labels[rows, columns]


def decoder_cross_entropy(
    hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean cross-entropy of `hidden @ weight.T + bias` against `targets`, and those logits.

    hidden: (N, H) transformed hidden states at the masked positions; weight: (V, H) the
    tied word embeddings; bias: (V,), or None for a head without one (GPT, T5: no pass over
    the (N, V) logits to broadcast zeros into them); targets: (N,) int64 token ids in [0, V).
    Returns (loss: scalar, logits: (N, V)); the same values as `F.linear` followed by
    `F.cross_entropy` (mean), with gradients through the loss and the logits alike.
    """
    if (
        hidden.dtype != weight.dtype
        or (bias is not None and hidden.dtype != bias.dtype)
        or torch.is_autocast_enabled(hidden.device.type)
        or hidden.shape[0] == 0
        or torch.compiler.is_compiling()
    ):  # mixed precision, nothing to predict, or torch.compile fusing it its own way
        logits = F.linear(hidden, weight, bias)
        if torch.compiler.is_compiling():  # static rows (bertkit.model.static_shapes) may all be fillers: 0, not NaN
            loss = F.cross_entropy(logits, targets, reduction="sum") / (targets != IGNORE_INDEX).sum().clamp(min=1)
        else:
            loss = F.cross_entropy(logits, targets) if targets.numel() else logits.sum() * 0.0
        return loss, logits
    compute_grad = torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in (hidden, weight, bias))
    return _DecoderCrossEntropy.apply(hidden, weight, bias, targets, compute_grad)


class _DecoderCrossEntropy(torch.autograd.Function):
    """loss = mean_i(logsumexp(z_i) - z_i[t_i]) with z = h W^T + b, the logits z kept.

    d loss / d z = (softmax(z) - onehot(t)) / N =: G / N, so
    d h = G W / N,  d W = G^T h / N,  d b = sum_i G_i / N.
    The forward computes z (the returned logits) in one matmul, then, chunk of rows by
    chunk, the log-softmax (the loss) and G in a chunk-sized scratch buffer, folding
    each chunk into dh, dW, db while it is in cache; backward only scales them by the
    incoming gradient. Against `F.linear` + `F.cross_entropy` this skips the (N, V)
    log-softmax output, its gradient, the zero-filled (N, V) NLL gradient and three more
    passes over (N, V) memory: the MLM head's forward + backward ran 1.5-2x faster on
    the 2-core development CPU at V = 30522.
    Two consequences: with grad mode on, the forward does the backward's matmuls too
    (evaluate under `torch.no_grad()`), and one forward supports one backward
    (`retain_graph=True` with a second backward raises).
    """

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, needs_grad: bool):
        n, vocab = hidden.shape[0], weight.shape[0]
        logits = empty_large((n, vocab), hidden)
        # rows per chunk, tuned on a 2-core CPU (flat within +-50%): small chunks keep G
        # in cache, large ones cut the passes over dW (V x H) that each chunk adds into
        rows = max(32, min(256, hidden.shape[1] // 2))
        rows = -(-n // -(-n // rows))  # equal chunks: no small last one
        scratch = hidden.new_empty(min(rows, n), vocab)
        nll = hidden.new_zeros(())
        grad_hidden = grad_weight = grad_bias = None
        if needs_grad:
            grad_hidden = torch.empty_like(hidden)
            grad_weight = empty_large(weight.shape, weight)
            if bias is not None and bias.requires_grad:  # not BART's final_logits_bias buffer
                grad_bias = torch.zeros_like(bias)
        if bias is None:
            torch.mm(hidden, weight.t(), out=logits)  # one matmul: W is read once
        else:
            torch.addmm(bias, hidden, weight.t(), out=logits)
        for start in range(0, n, rows):
            stop = min(n, start + rows)
            chunk, h, t = logits[start:stop], hidden[start:stop], targets[start:stop]
            g = scratch[: stop - start]
            torch.log_softmax(chunk, 1, out=g)
            index = torch.arange(stop - start, device=g.device)
            nll -= g[index, t].sum()
            if not needs_grad:
                continue
            g.exp_()  # softmax
            g[index, t] -= 1.0  # G = softmax - onehot
            torch.mm(g, weight, out=grad_hidden[start:stop])
            grad_weight.addmm_(g.t(), h, beta=0.0 if start == 0 else 1.0)  # beta 0: first chunk overwrites
            if grad_bias is not None:
                grad_bias += g.sum(0)
        ctx.set_materialize_grads(False)
        ctx.n = n
        if needs_grad:
            ctx.save_for_backward(hidden, weight)
            # held as attributes, not saved tensors, so backward can hand them over and
            # drop its own reference: autograd may then add the word-embedding lookup's
            # gradient into grad_weight in place
            ctx.grads = [grad_hidden, grad_weight, grad_bias]
        return nll / n, logits

    @staticmethod
    def backward(ctx, grad_loss, grad_logits):
        hidden, weight = ctx.saved_tensors
        if ctx.grads is None:
            raise RuntimeError("decoder_cross_entropy supports one backward per forward (no retain_graph)")
        (grad_hidden, grad_weight, grad_bias), ctx.grads = ctx.grads, None
        grads = [grad for grad in (grad_hidden, grad_weight, grad_bias) if grad is not None]
        if grad_loss is None:
            for grad in grads:
                grad.zero_()
        else:
            scale = grad_loss / ctx.n
            for grad in grads:
                grad.mul_(scale)
        if grad_logits is not None:  # the logits were used too: add their gradient
            grad_hidden.addmm_(grad_logits, weight)
            grad_weight.addmm_(grad_logits.t(), hidden)
            if grad_bias is not None:
                grad_bias += grad_logits.sum(0)
        return grad_hidden, grad_weight, grad_bias, None, None


class DenseTanhClassificationHead(nn.Module):
    """transformers' sequence head of T5 and BART (`dense`, `out_proj`): (B, width) pooled ->
    dropout -> dense -> tanh -> dropout -> (B, num_labels)."""

    def __init__(self, width: int, num_labels: int, dropout: float):
        super().__init__()
        self.dense = nn.Linear(width, width)
        self.dropout = nn.Dropout(dropout)
        self.out_proj = nn.Linear(width, num_labels)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.out_proj(self.dropout(torch.tanh(self.dense(self.dropout(pooled)))))


# transformers' get_activation names a summary may use (its "gelu" is the exact one)
SUMMARY_ACTIVATIONS = {**ACTIVATIONS, "tanh": torch.tanh, "silu": F.silu, "swish": F.silu}


class SequenceSummary(nn.Module):
    """transformers' SequenceSummary: hidden states (..., T, H) -> one vector per sequence (..., out).

    The state at `cls_index` (..., ) ("cls_index"; the last position when None), the first
    ("first"), the last ("last") or the mean over all T positions ("mean"; padding included,
    as transformers) -> first dropout -> `summary` (H -> `out_features`; identity when None)
    -> the activation (a SUMMARY_ACTIVATIONS name; None: none) -> last dropout. A family builds
    it from its config's summary_* fields."""

    def __init__(self, hidden_size: int, out_features: int | None, summary_type: str = "last",
                 activation: str | None = None, first_dropout: float = 0.0, last_dropout: float = 0.0):
        super().__init__()
        self.summary_type = summary_type
        self.summary: nn.Module = nn.Identity() if out_features is None else nn.Linear(hidden_size, out_features)
        self.activation = (lambda x: x) if activation is None else SUMMARY_ACTIVATIONS[activation]
        self.first_dropout = Dropout(first_dropout)
        self.last_dropout = Dropout(last_dropout)

    def read(self, hidden_states: torch.Tensor, cls_index: torch.Tensor | None = None) -> torch.Tensor:
        """The state each sequence is summarised by: (..., T, H) -> (..., H)."""
        if self.summary_type == "first":
            return hidden_states[..., 0, :]
        if self.summary_type == "mean":
            return hidden_states.mean(dim=-2)
        if self.summary_type == "last" or cls_index is None:
            return hidden_states[..., -1, :]
        index = cls_index[..., None, None].expand(*cls_index.shape, 1, hidden_states.shape[-1])
        return hidden_states.gather(-2, index).squeeze(-2)

    def project(self, state: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., out): dropout, `summary`, activation, dropout."""
        return self.last_dropout(self.activation(self.summary(self.first_dropout(state))))

    def forward(self, hidden_states: torch.Tensor, cls_index: torch.Tensor | None = None) -> torch.Tensor:
        """hidden_states (..., T, H); cls_index (...) long positions -> (..., out)."""
        return self.project(self.read(hidden_states, cls_index))
