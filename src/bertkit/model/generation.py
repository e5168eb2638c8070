"""Text generation for encoder-decoders and decoder-only models: one `GenerationMixin.generate`.

    model = T5ForConditionalGeneration.from_pretrained(DIR).eval()     # an encoder-decoder
    ids = model.generate(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         max_new_tokens=32, num_beams=4)            # (B, T) LongTensor
    gpt = GPT2LMHeadModel.from_pretrained(DIR).eval()               # a decoder-only model
    ids = gpt.generate(input_ids=prompts, attention_mask=mask, max_new_tokens=40,
                       do_sample=True, top_p=0.9, repetition_penalty=1.2, seed=0)

Argument names, defaults and results are transformers' `generate` (its GenerationConfig
defaults: 20 new tokens, top_k 50, top_p 1.0, temperature 1.0, repetition_penalty 1.0,
length_penalty 1.0, early_stopping False). Both shapes decode the same way: every row
starts with a *prompt* and grows by one token a step, and the search (greedy, sampling,
beam search) never asks which shape it serves:
- encoder-decoder (`config.is_encoder_decoder`, or a model with `get_encoder`): the
  encoder runs once; the prompt is the decoder start token; rows come back as
  [decoder_start_token_id, new tokens...];
- decoder-only: the prompt is `input_ids` itself; rows come back as [prompt, new
  tokens...] as transformers returns them. Padded prompts are left-aligned (right
  padding is moved to the left, so it is accepted too); position ids count from each
  row's first real token (from the attention mask); a prompt that does not fit the
  context (`config.position_limit` - max_new_tokens) is cut from the left with a warning.
Rows are padded with pad_token_id after their EOS. Greedy and beam search give
transformers' tokens (tests/model/test_t5_generation.py, tests/model/test_gpt_generation.py);
transformers' beam search pads T5's finished beams with EOS rather than pad (its
`pad or eos` meets pad id 0) — ours pad with pad_token_id, as greedy does in both.
Lengths count as transformers counts them: max_length and min_length include the prompt
(the decoder start token, or the decoder-only prompt's padded width).

The model contract (what `generate` calls):
- an encoder-decoder: `get_encoder()(input_ids=, attention_mask=)` -> output with
  `last_hidden_state` (B, S, H); `model(encoder_outputs=, attention_mask=,
  decoder_input_ids=, past_key_values=, use_cache=)` -> output with `logits` (N, T_new, V)
  and `past_key_values`: per decoder layer (self_key, self_value, cross_key, cross_value);
  `config.decoder_start_token_id`;
- a decoder-only model: `model(input_ids=, attention_mask=, position_ids=,
  past_key_values=, use_cache=, logits_to_keep=1)` -> `logits` (N, 1, V) and
  `past_key_values`: per layer (key, value), the mask covering cache + new tokens;
  `config.position_limit` (None: no limit), `bos_token_id` (the prompt when none is given);
- both: `config.eos_token_id`, `pad_token_id`; cache tensors (N, heads, length, d), batch
  first. With a cache the model is given only the new token.

Decoding is vectorized over the batch and the beams: one model call and a fixed handful
of tensor ops per step, and one host sync (has every row finished?). Stop strings
(`stop_strings=` with `tokenizer=`, greedy and sampling) decode each running row's last
tokens on the host each step.

One engine serves `generate` and the server's continuous batching: the model call per
model shape is bertkit.model.decoding's (`EncoderDecoderSteps`, `DecoderOnlySteps`), the
"choose, record, stop" step is bertkit.model.decoding_step's `decode_step`; here are its
run-to-end schedule (`greedy_or_sample`) and beam search, which chooses among beams over
the same model call and score rules (`process_scores`).
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from bertkit.errors import ConfigError
from bertkit.model.decoding import DecoderOnlySteps, EncoderDecoderSteps, StepRows
from bertkit.model.decoding_step import RowGroup, StopStrings, decode_step, process_scores
from bertkit.model.packed_linear import packed_weights

# transformers' default when neither max_new_tokens nor max_length is given: max_length 20
# *plus* the prompt (generation/utils.py `_prepare_generated_length`), so 20 new tokens
DEFAULT_MAX_NEW_TOKENS = 20
_NEG = -1.0e9  # transformers' "impossible" beam score: finite, so sums stay ordered


@dataclass(frozen=True)
class GenerationSettings:
    """One `generate` call's settings, resolved against the model config and checked.
    prompt_length: tokens every row starts with (1 for an encoder-decoder's start token)."""

    max_new_tokens: int
    min_new_tokens: int = 0
    num_beams: int = 1
    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 50
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    length_penalty: float = 1.0
    early_stopping: bool | str = False
    no_repeat_ngram_size: int = 0
    num_return_sequences: int = 1
    eos_token_ids: tuple[int, ...] = ()
    pad_token_id: int | None = None
    decoder_start_token_id: int | None = None
    forced_bos_token_id: int | None = None
    forced_eos_token_ids: tuple[int, ...] = ()
    use_cache: bool = True
    prompt_length: int = 1

    def __post_init__(self):
        def require(ok: bool, field: str, rule: str):
            if not ok:
                raise ConfigError(f"{field}: must be {rule}, got {getattr(self, field)!r}")

        require(self.max_new_tokens >= 1, "max_new_tokens", ">= 1 (max_length counts the prompt or start token)")
        require(self.min_new_tokens >= 0, "min_new_tokens", ">= 0")
        require(self.num_beams >= 1, "num_beams", ">= 1")
        require(self.temperature > 0, "temperature", "> 0")
        require(self.top_k >= 0, "top_k", ">= 0 (0: no top-k filter)")
        require(0 < self.top_p <= 1, "top_p", "in (0, 1]")
        require(self.repetition_penalty > 0, "repetition_penalty", "> 0 (1.0: no penalty; > 1 discourages repeats)")
        require(self.no_repeat_ngram_size >= 0, "no_repeat_ngram_size", ">= 0")
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
        """Tokens of a finished row, the prompt (or start token) included."""
        return self.prompt_length + self.max_new_tokens

    @property
    def choice(self) -> "GenerationSettings":
        """These settings as the step's score rules read them (bertkit.model.decoding_step):
        rows whose `choice` is equal are ruled together, whatever their prompt length or
        budget — the budget kept only where a forced EOS depends on it."""
        budget = self.max_new_tokens if self.forced_eos_token_ids else 1
        return dataclasses.replace(self, prompt_length=1, max_new_tokens=budget)

    @property
    def fill_token_id(self) -> int:
        """What fills a row after its end: pad, else the start token, else 0."""
        for token in (self.pad_token_id, self.decoder_start_token_id):
            if token is not None:
                return token
        return 0


def resolve_settings(config: Any, prompt_length: int = 1, max_new_tokens: int | None = None,
                     max_length: int | None = None, min_new_tokens: int | None = None, min_length: int | None = None,
                     eos_token_id: int | list[int] | None = None, pad_token_id: int | None = None,
                     decoder_start_token_id: int | None = None, encoder_decoder: bool = True,
                     **options: Any) -> GenerationSettings:
    """`generate`'s keyword arguments -> settings; token ids default to the model config's.

    Lengths as transformers counts them: max_length and min_length include the prompt
    (`prompt_length`: the decoder start token of an encoder-decoder, the prompt's padded
    width of a decoder-only model); max_new_tokens wins over max_length, min_new_tokens
    over min_length; neither length given: 20 new tokens."""
    if max_new_tokens is None:
        max_new_tokens = max_length - prompt_length if max_length is not None else DEFAULT_MAX_NEW_TOKENS
    min_new = min_new_tokens if min_new_tokens is not None else max(0, (min_length or 0) - prompt_length)
    eos = eos_token_id if eos_token_id is not None else getattr(config, "eos_token_id", None)
    eos_ids = tuple(eos) if isinstance(eos, (list, tuple)) else (() if eos is None else (int(eos),))
    pad = pad_token_id if pad_token_id is not None else getattr(config, "pad_token_id", None)
    if pad is None and eos_ids:
        pad = eos_ids[0]  # as transformers: finished rows are padded with EOS
    start = None
    if encoder_decoder:
        start = decoder_start_token_id if decoder_start_token_id is not None else \
            getattr(config, "decoder_start_token_id", None)
        if start is None:
            start = pad
        if start is None:
            raise ConfigError("decoder_start_token_id: not set (neither given nor in the model config)")
    for name in ("forced_bos_token_id", "forced_eos_token_id"):  # BART's config sets them (logits_processing)
        options.setdefault(name, getattr(config, name, None))
    forced_eos = options.pop("forced_eos_token_id")
    options["forced_eos_token_ids"] = tuple(forced_eos) if isinstance(forced_eos, (list, tuple)) else (
        () if forced_eos is None else (int(forced_eos),))
    unknown = set(options) - {f.name for f in dataclasses.fields(GenerationSettings)}
    if unknown:
        raise ConfigError(f"{sorted(unknown)[0]}: not a generate() argument")
    return GenerationSettings(max_new_tokens=max_new_tokens, min_new_tokens=min_new, eos_token_ids=eos_ids,
                              pad_token_id=pad, decoder_start_token_id=start, prompt_length=prompt_length, **options)


def is_encoder_decoder(model: Any) -> bool:
    """transformers' `config.is_encoder_decoder`; without that field, whether the model has an encoder."""
    return bool(getattr(model.config, "is_encoder_decoder", hasattr(model, "get_encoder")))


class GenerationMixin:
    """`generate` for an encoder-decoder or a decoder-only model (see the module docstring),
    and `decode_steps`: the same decoding one step at a time over rows that come and go
    (a server's continuous batching, bertkit.model.decoding), each row's settings from
    `resolve_decoding`."""

    merges_decode_steps = False  # True: an encoder-decoder's rows of different lengths may share a step (relative positions)
    takes_decoder_position_ids = False  # True: forward takes `decoder_position_ids` (B, T); decode_steps passes them

    def decode_steps(self, input_ids: list[list[int]]):
        """These inputs' rows, decoded one step at a time (bertkit.model.decoding): an
        `EncoderDecoderSteps` (the encoder runs now) or a `DecoderOnlySteps` (the prompts
        run at the first step)."""
        return (EncoderDecoderSteps if is_encoder_decoder(self) else DecoderOnlySteps).from_ids(self, input_ids)

    def resolve_decoding(self, input_ids: list[int], **options: Any) -> tuple[list[int], GenerationSettings]:
        """One input's ids and settings as `generate` resolves them for that input alone (the
        rows of `decode_steps`): an encoder-decoder's ids as given (prompt_length 1: the start
        token); a decoder-only model's prompt cut from the left, with `generate`'s warning,
        so that it and max_new_tokens fit `config.position_limit` (prompt_length: what is left)."""
        if is_encoder_decoder(self):
            return list(input_ids), resolve_settings(self.config, 1, **options)
        prompt = torch.tensor([input_ids], dtype=torch.long)
        settings = resolve_settings(self.config, prompt.shape[1], encoder_decoder=False, **options)
        prompt, _, settings = fit_context(prompt, torch.ones_like(prompt, dtype=torch.bool), settings,
                                          getattr(self.config, "position_limit", None))
        return prompt[0].tolist(), settings

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None, *,
                 encoder_outputs: Any = None, generator: torch.Generator | None = None, seed: int | None = None,
                 stop_strings: str | list[str] | None = None, tokenizer: Any = None,
                 return_dict_in_generate: bool = False, **options: Any) -> torch.Tensor | GenerateOutput:
        """Generated token ids (B * num_return_sequences, T), long, on the model's device:
        the prompt (decoder-only) or the decoder start token (encoder-decoder), then the
        new tokens, pad after EOS.

        input_ids / attention_mask: (B, S) the prompt (decoder-only; 1 = real token) or the
        encoder's inputs (or `encoder_outputs`). Options (transformers' names and defaults):
        max_new_tokens (20), max_length, min_new_tokens, min_length, num_beams (1),
        do_sample (False), temperature (1.0), top_k (50), top_p (1.0), repetition_penalty
        (1.0; over the prompt's real tokens and the new ones), length_penalty (1.0),
        early_stopping (False / True / "never"), no_repeat_ngram_size (0),
        num_return_sequences (1), eos_token_id, pad_token_id, decoder_start_token_id,
        forced_bos_token_id, forced_eos_token_id (the last three default to the model config's:
        BART's EOS start and forced tokens),
        use_cache (True); stop_strings with `tokenizer` (anything with `decode(ids)`): a
        row ends when its text comes to contain one (the stop string is kept).
        Sampling draws from `generator`, or one seeded with `seed`, else torch's global RNG.
        return_dict_in_generate: a `GenerateOutput` (sequences and the prompt's length in
        them: the new tokens are sequences[:, prompt_length:]) instead of the tensor."""
        if is_encoder_decoder(self):
            settings = resolve_settings(self.config, 1, **options)
            steps = _seq2seq_steps(self, input_ids, attention_mask, encoder_outputs, settings)
        else:
            if encoder_outputs is not None:
                raise ConfigError("encoder_outputs: a decoder-only model has no encoder")
            prompt, prompt_mask = _decoder_prompt(self.config, input_ids, attention_mask)
            settings = resolve_settings(self.config, prompt.shape[1], encoder_decoder=False, **options)
            prompt, prompt_mask, settings = fit_context(prompt, prompt_mask, settings,
                                                        getattr(self.config, "position_limit", None))
            steps = DecoderOnlySteps(self, prompt, prompt_mask.long(), settings.use_cache, input_padding=True,
                                     copies=_copies(settings))
        if seed is not None and generator is None:
            generator = torch.Generator(steps.token_ids.device).manual_seed(seed)
        stops = StopStrings(stop_strings, tokenizer) if stop_strings is not None else None
        if stops is not None and settings.num_beams > 1:
            raise ConfigError("stop_strings: supported with greedy decoding and sampling (num_beams 1)")
        with packed_weights():  # the decoding steps' few rows: oneDNN's packed weights (bertkit.model.packed_linear)
            if settings.num_beams > 1:
                sequences = beam_search(steps, settings, generator)
            else:
                sequences = greedy_or_sample(steps, settings, generator, stops)
        return GenerateOutput(sequences, settings.prompt_length) if return_dict_in_generate else sequences


@dataclass
class GenerateOutput:
    """`generate(..., return_dict_in_generate=True)`: sequences (N, T) as `generate` returns
    them and prompt_length, the tokens each row starts with (the decoder start token of an
    encoder-decoder, the left-aligned, possibly cut prompt of a decoder-only model)."""

    sequences: torch.Tensor
    prompt_length: int

    @property
    def new_tokens(self) -> torch.Tensor:
        """(N, T - prompt_length): what was generated."""
        return self.sequences[:, self.prompt_length:]


def _copies(settings: GenerationSettings) -> int:
    """Rows per input: its beams, or its returned samples."""
    return settings.num_beams if settings.num_beams > 1 else settings.num_return_sequences


def _seq2seq_steps(model: Any, input_ids, attention_mask, encoder_outputs,
                   settings: GenerationSettings) -> EncoderDecoderSteps:
    """An encoder-decoder's rows: the encoder run once; each row starts from the start token."""
    if encoder_outputs is None:
        if input_ids is None:
            raise ConfigError("input_ids: required (or encoder_outputs)")
        encoder_outputs = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask)
    states = encoder_outputs.last_hidden_state
    if attention_mask is None:
        attention_mask = torch.ones(states.shape[:2], dtype=torch.long, device=states.device)
    return EncoderDecoderSteps(model, states, attention_mask, settings.decoder_start_token_id, settings.use_cache,
                               _copies(settings))


def _decoder_prompt(config: Any, input_ids: torch.Tensor | None, attention_mask: torch.Tensor | None):
    """A decoder-only model's prompt, left-aligned: (ids (B, P) long, mask (B, P) bool).

    No input_ids: the BOS token alone (transformers'). Right-padded rows are moved to the
    right end (their padding to the left); a row without a real token is an error."""
    if input_ids is None:
        bos = getattr(config, "bos_token_id", None)
        if bos is None:
            raise ConfigError("input_ids: required (the model config has no bos_token_id to start from)")
        input_ids = torch.tensor([[bos]], dtype=torch.long)
    if input_ids.dim() != 2 or input_ids.shape[1] == 0:
        raise ConfigError(f"input_ids: an empty prompt (shape {tuple(input_ids.shape)}); give at least one token")
    mask = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    empty = (~mask.any(dim=1)).nonzero()
    if empty.numel():
        raise ConfigError(f"input_ids: row {int(empty[0])} is an empty prompt (no real token in attention_mask)")
    if not bool(mask[:, -1].all()):  # right padding somewhere: real tokens to the right end, order kept
        order = torch.sort(mask.to(torch.int8), dim=1, stable=True).indices
        input_ids, mask = input_ids.gather(1, order), mask.gather(1, order)
    return input_ids, mask


def fit_context(prompt: torch.Tensor, prompt_mask: torch.Tensor, settings: GenerationSettings,
                limit: int | None) -> tuple[torch.Tensor, torch.Tensor, GenerationSettings]:
    """The prompt cut from the left, with a warning, so that prompt + max_new_tokens fit
    the model's `limit` positions; an error when max_new_tokens alone does not."""
    if limit is None or settings.max_length <= limit:
        return prompt, prompt_mask, settings
    keep = limit - settings.max_new_tokens
    if keep < 1:
        raise ConfigError(f"max_new_tokens: {settings.max_new_tokens} leaves no room for a prompt in the model's "
                          f"context of {limit} positions")
    longest = int(prompt_mask.sum(dim=1).max())
    if longest > keep:
        warnings.warn(f"prompt of {longest} tokens cut to its last {keep}: the context holds {limit} positions, "
                      f"{settings.max_new_tokens} of them for new tokens", UserWarning, stacklevel=3)
    prompt, prompt_mask = prompt[:, -keep:], prompt_mask[:, -keep:]
    return prompt, prompt_mask, dataclasses.replace(settings, prompt_length=prompt.shape[1])


def greedy_or_sample(steps: StepRows, settings: GenerationSettings, generator: torch.Generator | None,
                     stops: StopStrings | None = None) -> torch.Tensor:
    """Greedy decoding (argmax) or sampling, every hypothesis at once, to the end: the
    run-to-end schedule of `decode_step` (bertkit.model.decoding_step); a finished row
    gets the fill token. -> (rows, T) long, the prompt first."""
    groups = [RowGroup(settings, generator=generator, stops=stops)]
    stoppable = bool(settings.eos_token_ids) or stops is not None
    running = torch.ones(steps.rows * steps.copies, dtype=torch.bool, device=steps.token_ids.device) \
        if stoppable else None
    for _ in range(settings.max_new_tokens):
        result = decode_step(steps, groups, running)
        if stoppable:
            running &= ~result.eos
            if result.stopped is not None:
                running &= ~result.stopped
            if not running.any():  # the step's one host sync
                break
    return steps.token_ids


def beam_search(steps: StepRows, settings: GenerationSettings, generator: torch.Generator | None) -> torch.Tensor:
    """Beam search (with sampling when settings.do_sample) as transformers' `_beam_search`,
    over `steps` (one row per input before its first step: the prompt (batch, P)).

    Per input, `num_beams` running hypotheses and the `num_beams` best finished ones. Each
    step takes the top `candidates` = 2 * num_beams continuations over all beams (more
    than num_beams, so that enough survive when some end with EOS); those that end
    (EOS, or max_length) compete for the finished slots with score sum(log p) / len **
    length_penalty (len: new tokens), the best others run on.
    Stopping per input (early_stopping): True — as soon as num_beams hypotheses are
    finished; False — when the best running score divided by its current length could
    not beat the worst finished one; "never" — as False, but with a positive
    length_penalty the running score is divided by max_new_tokens (the best it could
    get). -> (batch * num_return_sequences, T) long, best first, the prompt first."""
    beams, device = settings.num_beams, steps.token_ids.device
    batch, prompt_length = steps.token_ids.shape
    eos_ids = torch.tensor(settings.eos_token_ids, dtype=torch.long, device=device)
    candidates = max(2, 1 + len(settings.eos_token_ids)) * beams
    max_length = settings.max_length

    start = torch.full((batch, max_length), settings.fill_token_id, dtype=torch.long, device=device)
    start[:, :prompt_length] = steps.token_ids
    running = start[:, None, :].repeat(1, beams, 1)  # (batch, beams, max_length)
    running_scores = torch.zeros(batch, beams, device=device)
    running_scores[:, 1:] = _NEG  # all beams start equal: let only the first one expand
    finished = running.clone()
    finished_scores = torch.full((batch, beams), _NEG, device=device)
    finished_lengths = torch.zeros(batch, beams, dtype=torch.long, device=device)  # new tokens, EOS included
    is_finished = torch.zeros(batch, beams, dtype=torch.bool, device=device)
    improvable = torch.ones(batch, 1, dtype=torch.bool, device=device)
    first_beams = torch.arange(candidates, device=device) < beams  # only these may enter the finished set
    row_offsets = torch.arange(batch, device=device)[:, None] * beams

    length = prompt_length  # tokens in every running hypothesis
    while True:
        log_probs = steps.next_logits().log_softmax(dim=-1)  # steps' tokens: running's, (batch * beams, length)
        log_probs = process_scores(log_probs, steps.token_ids, steps.self_mask.bool(), settings, eos_ids,
                                   len(settings.eos_token_ids) + 1, steps.generated)
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
        new_tokens = length + 1 - prompt_length
        just_finished = ends & first_beams[None, :]
        scores = top_scores / (new_tokens ** settings.length_penalty)
        if settings.early_stopping is True:
            scores = scores + (is_finished.all(dim=-1, keepdim=True)).float() * _NEG
        scores = scores + (~improvable).float() * _NEG
        scores = scores + (~just_finished).float() * _NEG
        merged_scores = torch.cat((finished_scores, scores), dim=1)
        best = torch.topk(merged_scores, beams, dim=-1).indices
        finished = torch.cat((finished, cand_sequences), dim=1).gather(1, best[:, :, None].expand(-1, -1, max_length))
        finished_scores = merged_scores.gather(1, best)
        new_lengths = torch.full_like(top_scores, new_tokens, dtype=torch.long)
        finished_lengths = torch.cat((finished_lengths, new_lengths), dim=1).gather(1, best)
        is_finished = torch.cat((is_finished, just_finished), dim=1).gather(1, best)

        steps.reorder((kept_source + row_offsets).view(-1))
        steps.append(running[:, :, length].reshape(-1))
        length += 1
        improvable = improvable & _may_improve(running_scores, finished_scores, is_finished, length, settings)
        done = ~improvable.any() | ends.all()  # nothing can improve, or every continuation ended
        if settings.early_stopping is True:
            done |= is_finished.all()
        if bool(done):  # the step's one host sync
            break

    returned = settings.num_return_sequences
    out_length = prompt_length + int(finished_lengths[:, :returned].max())
    sequences = finished[:, :returned, :out_length].reshape(batch * returned, out_length)
    return _pad_after_eos(sequences, eos_ids, settings.pad_token_id, prompt_length)


def _may_improve(running_scores: torch.Tensor, finished_scores: torch.Tensor, is_finished: torch.Tensor,
                 length: int, settings: GenerationSettings) -> torch.Tensor:
    """(batch, 1) bool: could the best running beam still beat a finished one (the early
    stopping heuristic of `beam_search`'s docstring, as transformers')."""
    if settings.early_stopping == "never" and settings.length_penalty > 0.0:
        best_length = settings.max_new_tokens
    else:
        best_length = length - settings.prompt_length
    best_running = running_scores[:, :1] / (best_length ** settings.length_penalty)
    worst_finished = torch.where(is_finished, finished_scores.min(dim=1, keepdim=True).values, _NEG)
    return (best_running > worst_finished).any(dim=-1, keepdim=True)


def _pad_after_eos(sequences: torch.Tensor, eos_ids: torch.Tensor, pad_token_id: int | None,
                   prompt_length: int = 1) -> torch.Tensor:
    """Every token after a row's first new EOS set to pad (an EOS in the prompt ends nothing)."""
    if pad_token_id is None or not eos_ids.numel():
        return sequences
    is_eos = torch.isin(sequences, eos_ids)
    is_eos[:, :prompt_length] = False
    after = (is_eos.cumsum(dim=1) - is_eos.long()) > 0
    return sequences.masked_fill(after, pad_token_id)
