"""Text generation for encoder-decoder models: `GenerationMixin.generate`.

    model = T5ForConditionalGeneration.from_pretrained(DIR).eval()
    ids = model.generate(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         max_new_tokens=32, num_beams=4)            # (B, T) LongTensor

Argument names, defaults and results are transformers' `generate` for an encoder-decoder
(its GenerationConfig defaults: 20 new tokens, top_k 50, top_p 1.0, temperature 1.0,
length_penalty 1.0, early_stopping False; T5 checkpoints set only the token ids). Each
row starts with decoder_start_token_id and is padded with pad_token_id after its EOS.
Greedy and beam search give transformers' tokens (tests/model/test_t5_generation.py);
transformers' beam search pads T5's finished beams with EOS rather than pad (its
`pad or eos` meets pad id 0) — ours pad with pad_token_id, as greedy does in both.

The model contract (what `generate` calls):
- `get_encoder()(input_ids=, attention_mask=)` -> output with `last_hidden_state`
  (B, S, H); the encoder runs once, before any decoding step;
- `model(encoder_outputs=, attention_mask=, decoder_input_ids=, past_key_values=,
  use_cache=)` -> output with `logits` (N, T_new, V) and `past_key_values`: per decoder
  layer (self_key, self_value, cross_key, cross_value), each (N, heads, length, d_kv).
  With a cache the model is given only the new decoder token;
- `config.decoder_start_token_id`, `eos_token_id`, `pad_token_id`.

Decoding is vectorized over the batch and the beams: one model call and a fixed handful
of tensor ops per step, and one host sync (has every row finished?).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from bertkit.errors import ConfigError
from bertkit.model import logits_processing as rules
from bertkit.model.packed_linear import packed_weights

# transformers' default when neither max_new_tokens nor max_length is given: max_length 20
# *plus* the decoder prompt (generation/utils.py `_prepare_generated_length`), so 20 new tokens
DEFAULT_MAX_NEW_TOKENS = 20
_NEG = -1.0e9  # transformers' "impossible" beam score: finite, so sums stay ordered


@dataclass(frozen=True)
class GenerationSettings:
    """One `generate` call's settings, resolved against the model config and checked."""

    max_new_tokens: int
    min_new_tokens: int = 0
    num_beams: int = 1
    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 50
    top_p: float = 1.0
    length_penalty: float = 1.0
    early_stopping: bool | str = False
    no_repeat_ngram_size: int = 0
    repetition_penalty: float = 1.0
    num_return_sequences: int = 1
    eos_token_ids: tuple[int, ...] = ()
    pad_token_id: int | None = None
    decoder_start_token_id: int = 0
    use_cache: bool = True

    def __post_init__(self):
        def require(ok: bool, field: str, rule: str):
            if not ok:
                raise ConfigError(f"{field}: must be {rule}, got {getattr(self, field)!r}")

        require(self.max_new_tokens >= 1, "max_new_tokens", ">= 1 (max_length counts the decoder start token)")
        require(self.min_new_tokens >= 0, "min_new_tokens", ">= 0")
        require(self.num_beams >= 1, "num_beams", ">= 1")
        require(self.temperature > 0, "temperature", "> 0")
        require(self.top_k >= 0, "top_k", ">= 0 (0: no top-k filter)")
        require(0 < self.top_p <= 1, "top_p", "in (0, 1]")
        require(self.no_repeat_ngram_size >= 0, "no_repeat_ngram_size", ">= 0")
        require(self.repetition_penalty > 0, "repetition_penalty", "> 0 (1.0: no penalty)")
        require(self.early_stopping is True or self.early_stopping is False or self.early_stopping == "never",
                "early_stopping", "True, False or 'never'")
        require(self.num_return_sequences >= 1, "num_return_sequences", ">= 1")
        if self.num_beams > 1:
            require(self.num_return_sequences <= self.num_beams, "num_return_sequences", "<= num_beams")
        elif not self.do_sample:
            require(self.num_return_sequences == 1, "num_return_sequences",
                    "1 for greedy decoding (use num_beams or do_sample for more)")

    @property
    def max_length(self) -> int:
        """Decoder tokens of a finished row, the start token included."""
        return 1 + self.max_new_tokens


def resolve_settings(config: Any, max_new_tokens: int | None = None, max_length: int | None = None,
                     min_new_tokens: int | None = None, min_length: int | None = None,
                     eos_token_id: int | list[int] | None = None, pad_token_id: int | None = None,
                     decoder_start_token_id: int | None = None, **options: Any) -> GenerationSettings:
    """`generate`'s keyword arguments -> settings; token ids default to the model config's.

    Lengths as transformers counts them for an encoder-decoder: max_length and min_length
    include the decoder start token; max_new_tokens wins over max_length, min_new_tokens
    over min_length; neither length given: 20 new tokens."""
    if max_new_tokens is None:
        max_new_tokens = max_length - 1 if max_length is not None else DEFAULT_MAX_NEW_TOKENS
    min_new = min_new_tokens if min_new_tokens is not None else max(0, (min_length or 0) - 1)
    eos = eos_token_id if eos_token_id is not None else getattr(config, "eos_token_id", None)
    eos_ids = tuple(eos) if isinstance(eos, (list, tuple)) else (() if eos is None else (int(eos),))
    pad = pad_token_id if pad_token_id is not None else getattr(config, "pad_token_id", None)
    if pad is None and eos_ids:
        pad = eos_ids[0]  # as transformers: finished rows are padded with EOS
    start = decoder_start_token_id if decoder_start_token_id is not None else \
        getattr(config, "decoder_start_token_id", None)
    if start is None:
        start = pad
    if start is None:
        raise ConfigError("decoder_start_token_id: not set (neither given nor in the model config)")
    unknown = set(options) - {f.name for f in dataclasses.fields(GenerationSettings)}
    if unknown:
        raise ConfigError(f"{sorted(unknown)[0]}: not a generate() argument")
    return GenerationSettings(max_new_tokens=max_new_tokens, min_new_tokens=min_new, eos_token_ids=eos_ids,
                              pad_token_id=pad, decoder_start_token_id=start, **options)


class GenerationMixin:
    """`generate` for an encoder-decoder model (see the module docstring for the contract),
    and `decode_steps`: the same decoding one step at a time over rows that come and go
    (a server's continuous batching, bertkit.model.decoding)."""

    merges_decode_steps = False  # True: rows of different decoder lengths may share a step (relative positions)

    def decode_steps(self, input_ids: list[list[int]]):
        """An `EncoderDecoderSteps` over these inputs (the encoder runs now)."""
        from bertkit.model.decoding import EncoderDecoderSteps

        return EncoderDecoderSteps(self, input_ids)

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None, *,
                 encoder_outputs: Any = None, generator: torch.Generator | None = None, seed: int | None = None,
                 **options: Any) -> torch.Tensor:
        """Generated token ids (B * num_return_sequences, T), long, on the model's device.

        input_ids / attention_mask: (B, S) the encoder's inputs (or `encoder_outputs`).
        Options (transformers' names and defaults): max_new_tokens (20), max_length,
        min_new_tokens, min_length, num_beams (1), do_sample (False), temperature (1.0),
        top_k (50), top_p (1.0), length_penalty (1.0), early_stopping (False / True /
        "never"), no_repeat_ngram_size (0), repetition_penalty (1.0), num_return_sequences (1), eos_token_id,
        pad_token_id, decoder_start_token_id, use_cache (True).
        Sampling draws from `generator`, or one seeded with `seed`, else torch's global RNG."""
        settings = resolve_settings(self.config, **options)
        if encoder_outputs is None:
            if input_ids is None:
                raise ConfigError("input_ids: required (or encoder_outputs)")
            encoder_outputs = self.get_encoder()(input_ids=input_ids, attention_mask=attention_mask)
        states = encoder_outputs.last_hidden_state
        if attention_mask is None:
            attention_mask = torch.ones(states.shape[:2], dtype=torch.long, device=states.device)
        if seed is not None and generator is None:
            generator = torch.Generator(states.device).manual_seed(seed)
        copies = settings.num_beams if settings.num_beams > 1 else settings.num_return_sequences
        decoder = CachedDecoder(self, encoder_outputs, attention_mask, settings.use_cache, copies)
        with packed_weights():  # the decoding steps' few rows: oneDNN's packed weights (bertkit.model.packed_linear)
            if settings.num_beams > 1:
                return beam_search(decoder, states.shape[0], settings, generator)
            return greedy_or_sample(decoder, states.shape[0] * copies, settings, generator)


def _repeat_rows(encoder_outputs: Any, copies: int) -> Any:
    """The encoder output with each row repeated `copies` times (beams, returned sequences)."""
    if copies == 1:
        return encoder_outputs
    repeated = encoder_outputs.last_hidden_state.repeat_interleave(copies, dim=0)
    return dataclasses.replace(encoder_outputs, last_hidden_state=repeated)


class CachedDecoder:
    """The decoder run one step at a time over fixed encoder states, carrying the KV cache.

    Each input's hypotheses (beams, returned samples) are `copies` consecutive rows. They
    all begin with the start token, so with the cache the first step runs once per input
    and its cache rows are copied: the cross-attention keys and values over the encoder
    states (the first step's main cost) are computed once per input, not once per beam."""

    def __init__(self, model: Any, encoder_outputs: Any, attention_mask: torch.Tensor, use_cache: bool,
                 copies: int = 1):
        self.model, self.use_cache, self.copies = model, use_cache, copies
        self.encoder_outputs = _repeat_rows(encoder_outputs, copies)
        self.attention_mask = attention_mask.repeat_interleave(copies, dim=0)
        self.first_step = (encoder_outputs, attention_mask) if use_cache and copies > 1 else None
        self.past = None

    @property
    def device(self) -> torch.device:
        return self.attention_mask.device

    def next_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """(N, V) float32 scores of the token after `tokens` (N, L)."""
        if self.first_step is not None:  # one row per input, then copied (class docstring)
            (encoder_outputs, attention_mask), self.first_step = self.first_step, None
            out = self.model(encoder_outputs=encoder_outputs, attention_mask=attention_mask,
                             decoder_input_ids=tokens[::self.copies], use_cache=True)
            self.past = tuple(tuple(t.repeat_interleave(self.copies, dim=0) for t in layer)
                              for layer in out.past_key_values)
            return out.logits[:, -1].float().repeat_interleave(self.copies, dim=0)
        new = tokens[:, -1:] if self.past is not None else tokens
        out = self.model(encoder_outputs=self.encoder_outputs, attention_mask=self.attention_mask,
                         decoder_input_ids=new, past_key_values=self.past, use_cache=self.use_cache)
        if self.use_cache:
            self.past = out.past_key_values
        return out.logits[:, -1].float()

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep the cache rows `rows` (N,) in that order (beam search).

        Only the self-attention tensors move: a beam is only ever replaced by a beam of the
        same input, whose cross-attention keys and values are the same encoder states'."""
        if self.past is not None:
            self.past = tuple((k.index_select(0, rows), v.index_select(0, rows), *cross)
                              for k, v, *cross in self.past)


def process_scores(scores: torch.Tensor, tokens: torch.Tensor, settings: GenerationSettings,
                   eos_ids: torch.Tensor, min_keep: int) -> torch.Tensor:
    """One step's score rules (bertkit.model.logits_processing) in transformers' order.
    tokens: (N, L) the hypotheses so far; min_keep: tokens the sampling filters keep."""
    if settings.repetition_penalty != 1.0:
        scores = rules.penalize_repetition(scores, tokens, settings.repetition_penalty)
    if settings.no_repeat_ngram_size:
        scores = rules.ban_repeated_ngrams(scores, tokens, settings.no_repeat_ngram_size)
    if eos_ids.numel() and tokens.shape[1] - 1 < settings.min_new_tokens:
        scores = rules.ban_eos(scores, eos_ids)
    if settings.do_sample:
        if settings.temperature != 1.0:
            scores = rules.scale_temperature(scores, settings.temperature)
        if settings.top_k:
            scores = rules.keep_top_k(scores, settings.top_k, min_keep)
        if settings.top_p < 1.0:
            scores = rules.keep_top_p(scores, settings.top_p, min_keep)
    return scores


def greedy_or_sample(decoder: CachedDecoder, rows: int, settings: GenerationSettings,
                     generator: torch.Generator | None) -> torch.Tensor:
    """Greedy decoding (argmax) or sampling, `rows` hypotheses at once -> (rows, T) long."""
    device = decoder.device
    eos_ids = torch.tensor(settings.eos_token_ids, dtype=torch.long, device=device)
    tokens = torch.full((rows, settings.max_length), settings.pad_token_id if settings.pad_token_id is not None
                        else settings.decoder_start_token_id, dtype=torch.long, device=device)
    tokens[:, 0] = settings.decoder_start_token_id
    running = torch.ones(rows, dtype=torch.bool, device=device)
    length = 1
    while length < settings.max_length:
        scores = process_scores(decoder.next_logits(tokens[:, :length]), tokens[:, :length], settings, eos_ids, 1)
        if settings.do_sample:
            chosen = torch.multinomial(scores.softmax(dim=-1), 1, generator=generator).squeeze(1)
        else:
            chosen = scores.argmax(dim=-1)
        if eos_ids.numel():
            chosen = torch.where(running, chosen, settings.pad_token_id)
            running &= ~torch.isin(chosen, eos_ids)
        tokens[:, length] = chosen
        length += 1
        if eos_ids.numel() and not running.any():
            break
    return tokens[:, :length]


def beam_search(decoder: CachedDecoder, batch: int, settings: GenerationSettings,
                generator: torch.Generator | None) -> torch.Tensor:
    """Beam search (with sampling when settings.do_sample) as transformers' `_beam_search`.

    Per input, `num_beams` running hypotheses and the `num_beams` best finished ones. Each
    step takes the top `candidates` = 2 * num_beams continuations over all beams (more
    than num_beams, so that enough survive when some end with EOS); those that end
    (EOS, or max_length) compete for the finished slots with score sum(log p) / len **
    length_penalty (len: tokens after the start token), the best others run on.
    Stopping per input (early_stopping): True — as soon as num_beams hypotheses are
    finished; False — when the best running score divided by its current length could
    not beat the worst finished one; "never" — as False, but with a positive
    length_penalty the running score is divided by max_length's length (the best it
    could get). -> (batch * num_return_sequences, T) long, best first."""
    beams, device = settings.num_beams, decoder.device
    eos_ids = torch.tensor(settings.eos_token_ids, dtype=torch.long, device=device)
    candidates = max(2, 1 + len(settings.eos_token_ids)) * beams
    max_length = settings.max_length
    fill = settings.pad_token_id if settings.pad_token_id is not None else settings.decoder_start_token_id

    running = torch.full((batch, beams, max_length), fill, dtype=torch.long, device=device)
    running[:, :, 0] = settings.decoder_start_token_id
    running_scores = torch.zeros(batch, beams, device=device)
    running_scores[:, 1:] = _NEG  # all beams start equal: let only the first one expand
    finished = running.clone()
    finished_scores = torch.full((batch, beams), _NEG, device=device)
    finished_lengths = torch.zeros(batch, beams, dtype=torch.long, device=device)  # new tokens, EOS included
    is_finished = torch.zeros(batch, beams, dtype=torch.bool, device=device)
    improvable = torch.ones(batch, 1, dtype=torch.bool, device=device)
    first_beams = torch.arange(candidates, device=device) < beams  # only these may enter the finished set
    row_offsets = torch.arange(batch, device=device)[:, None] * beams

    length = 1  # tokens in every running hypothesis
    while True:
        flat = running[:, :, :length].reshape(batch * beams, length)
        log_probs = decoder.next_logits(flat).log_softmax(dim=-1)
        log_probs = process_scores(log_probs, flat, settings, eos_ids, len(settings.eos_token_ids) + 1)
        vocab = log_probs.shape[-1]
        # in place: log_probs is this step's own (B * beams, V) tensor; a second one of that size costs a pass
        totals = log_probs.view(batch, beams, vocab).add_(running_scores[:, :, None]).view(batch, beams * vocab)

        if settings.do_sample:
            picked = torch.multinomial(totals.softmax(dim=-1), candidates, generator=generator)
            top_scores, order = totals.gather(1, picked).sort(dim=-1, descending=True)
            picked = picked.gather(1, order)
        else:
            top_scores, picked = torch.topk(totals, candidates, dim=-1)
        source_beam = picked // vocab  # (batch, candidates)
        cand_sequences = running.gather(1, source_beam[:, :, None].expand(-1, -1, max_length)).clone()
        cand_sequences[:, :, length] = picked % vocab
        ends = torch.isin(cand_sequences[:, :, length], eos_ids) | (length + 1 >= max_length)

        # the best `beams` continuations that do not end run on
        open_scores = top_scores + ends.float() * _NEG
        keep = torch.topk(open_scores, beams, dim=-1).indices
        running = cand_sequences.gather(1, keep[:, :, None].expand(-1, -1, max_length))
        running_scores = open_scores.gather(1, keep)
        kept_source = source_beam.gather(1, keep)

        # ending continuations among the first `beams` candidates join the finished ones if better
        just_finished = ends & first_beams[None, :]
        scores = top_scores / (length ** settings.length_penalty)
        if settings.early_stopping is True:
            scores = scores + (is_finished.all(dim=-1, keepdim=True)).float() * _NEG
        scores = scores + (~improvable).float() * _NEG
        scores = scores + (~just_finished).float() * _NEG
        merged_scores = torch.cat((finished_scores, scores), dim=1)
        best = torch.topk(merged_scores, beams, dim=-1).indices
        finished = torch.cat((finished, cand_sequences), dim=1).gather(1, best[:, :, None].expand(-1, -1, max_length))
        finished_scores = merged_scores.gather(1, best)
        new_lengths = torch.full_like(top_scores, length, dtype=torch.long)
        finished_lengths = torch.cat((finished_lengths, new_lengths), dim=1).gather(1, best)
        is_finished = torch.cat((is_finished, just_finished), dim=1).gather(1, best)

        decoder.reorder((kept_source + row_offsets).view(-1))
        length += 1
        improvable = improvable & _may_improve(running_scores, finished_scores, is_finished, length, settings)
        done = ~improvable.any() | ends.all()  # nothing can improve, or every continuation ended
        if settings.early_stopping is True:
            done |= is_finished.all()
        if bool(done):  # the step's one host sync
            break

    returned = settings.num_return_sequences
    out_length = 1 + int(finished_lengths[:, :returned].max())
    sequences = finished[:, :returned, :out_length].reshape(batch * returned, out_length)
    return _pad_after_eos(sequences, eos_ids, settings.pad_token_id)


def _may_improve(running_scores: torch.Tensor, finished_scores: torch.Tensor, is_finished: torch.Tensor,
                 length: int, settings: GenerationSettings) -> torch.Tensor:
    """(batch, 1) bool: could the best running beam still beat a finished one (the early
    stopping heuristic of `beam_search`'s docstring, as transformers')."""
    if settings.early_stopping == "never" and settings.length_penalty > 0.0:
        best_length = settings.max_length - 1
    else:
        best_length = length - 1
    best_running = running_scores[:, :1] / (best_length ** settings.length_penalty)
    worst_finished = torch.where(is_finished, finished_scores.min(dim=1, keepdim=True).values, _NEG)
    return (best_running > worst_finished).any(dim=-1, keepdim=True)


def _pad_after_eos(sequences: torch.Tensor, eos_ids: torch.Tensor, pad_token_id: int | None) -> torch.Tensor:
    """Every token after a row's first EOS (the start token aside) set to pad."""
    if pad_token_id is None or not eos_ids.numel():
        return sequences
    is_eos = torch.isin(sequences, eos_ids)
    is_eos[:, 0] = False
    after = (is_eos.cumsum(dim=1) - is_eos.long()) > 0
    return sequences.masked_fill(after, pad_token_id)
