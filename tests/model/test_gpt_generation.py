"""bertkit's `generate` on GPT-2 and GPT-1 against transformers' `generate` on the same random
tiny checkpoints (several seeds, left-padded batches): greedy and beam search token for
token, sampling draw for draw from the same global seed and, apart from any reference,
first-token frequencies against the softmax (chi-square); and what decoders add: the
prompt left-aligned and positions from the mask, repetition_penalty, min_new_tokens,
stop strings, the context limit, bad input.

One difference is normalized, not hidden (as for T5): transformers' beam search fills a
finished beam with EOS instead of pad (its `pad_token_id or eos_token_id` meets pad id 0);
ours pads with pad_token_id, as greedy decoding does in both."""

from __future__ import annotations

import pytest
import torch
from scipy import stats

transformers = pytest.importorskip("transformers")

import bertkit  # noqa: E402
from bertkit.errors import ConfigError  # noqa: E402

VOCAB, BOS, EOS, PAD = 48, 1, 2, 0
SIZES = dict(vocab_size=VOCAB, n_positions=40, n_embd=16, n_layer=2, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
             attn_pdrop=0.0)
VARIANTS = {"gpt2": ("GPT2Config", "GPT2LMHeadModel"), "openai-gpt": ("OpenAIGPTConfig", "OpenAIGPTLMHeadModel")}


def _pair(tmp_path_factory, variant: str, seed: int):
    """(transformers model, bertkit model) with the same random weights, eval mode."""
    config_name, model_name = VARIANTS[variant]
    torch.manual_seed(seed)
    config = getattr(transformers, config_name)(**SIZES, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)
    reference = getattr(transformers, model_name)(config).eval()
    with torch.no_grad():  # larger than the init, so the outputs vary and end at different steps
        for parameter in reference.parameters():
            parameter.normal_(0.0, 0.5)
        reference.get_input_embeddings().weight[EOS] *= 2.5  # EOS more often the best or the worst token
    directory = tmp_path_factory.mktemp(f"{variant}-{seed}")
    reference.save_pretrained(directory)
    return reference, getattr(bertkit, model_name).from_pretrained(directory).eval()


@pytest.fixture(scope="module", params=[("gpt2", 0), ("gpt2", 1), ("openai-gpt", 2)],
                ids=lambda p: f"{p[0]}-seed{p[1]}")
def models(request, tmp_path_factory):
    return _pair(tmp_path_factory, *request.param)


def _batch(seed: int, side: str = "left"):
    """Prompts of 9, 4, 7 and 2 tokens, padded on `side`."""
    generator = torch.Generator().manual_seed(100 + seed)
    lengths = torch.tensor([9, 4, 7, 2])
    ids = torch.randint(3, VOCAB, (4, 9), generator=generator)
    positions = torch.arange(9)[None, :]
    real = positions >= 9 - lengths[:, None] if side == "left" else positions < lengths[:, None]
    return ids * real, real.long()


def _pad_after_eos(sequences: torch.Tensor, prompt_length: int = 9) -> torch.Tensor:
    is_eos = (sequences == EOS).long()
    is_eos[:, :prompt_length] = 0
    return sequences.masked_fill(is_eos.cumsum(dim=1) - is_eos > 0, PAD)


SETTINGS = [
    dict(max_new_tokens=12), dict(), dict(max_length=16), dict(max_new_tokens=10, min_new_tokens=4),
    dict(max_new_tokens=12, no_repeat_ngram_size=2), dict(max_new_tokens=12, repetition_penalty=1.5),
    dict(max_new_tokens=12, repetition_penalty=0.7), dict(max_new_tokens=10, num_beams=4),
    dict(max_new_tokens=10, num_beams=4, length_penalty=0.3), dict(max_new_tokens=10, num_beams=3, early_stopping=True),
    dict(max_new_tokens=10, num_beams=3, early_stopping="never", length_penalty=1.5),
    dict(max_new_tokens=12, num_beams=4, no_repeat_ngram_size=2, repetition_penalty=1.3),
    dict(max_new_tokens=10, num_beams=4, num_return_sequences=3),
    dict(max_new_tokens=10, num_beams=2, num_return_sequences=2, min_new_tokens=3, length_penalty=0.7),
]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) or "defaults")
def test_greedy_and_beam_search_equal_transformers_token_for_token(models, settings):
    reference, ours = models
    ids, mask = _batch(0)
    with torch.no_grad():
        expected = reference.generate(input_ids=ids, attention_mask=mask, **settings)
    got = ours.generate(input_ids=ids, attention_mask=mask, **settings)
    assert got.dtype == torch.long
    if settings.get("num_beams", 1) > 1:  # transformers fills finished beams with EOS (its `pad or eos`, pad 0)
        expected = _pad_after_eos(expected)
    assert torch.equal(got, expected), f"\nours:\n{got}\ntransformers:\n{expected}"
    assert torch.equal(got, ours.generate(input_ids=ids, attention_mask=mask, use_cache=False, **settings))


def test_the_cases_end_at_different_steps(tmp_path_factory):
    """The parity above means something: rows end with EOS at different steps, some run to max_length."""
    _, ours = _pair(tmp_path_factory, "gpt2", 0)
    ids, mask = _batch(0)
    lengths = set()
    for options in (dict(), dict(num_beams=4, num_return_sequences=4)):
        out = ours.generate(input_ids=ids, attention_mask=mask, max_new_tokens=12, **options)
        lengths |= {int((row[9:] != PAD).sum()) for row in out}
    assert len(lengths) >= 2 and 12 in lengths


@pytest.mark.parametrize("settings", [dict(do_sample=True), dict(do_sample=True, temperature=0.7, top_k=5),
                                      dict(do_sample=True, top_p=0.8, repetition_penalty=1.2),
                                      dict(do_sample=True, num_return_sequences=3)])
def test_sampling_from_the_same_global_seed_draws_transformers_tokens(models, settings):
    reference, ours = models
    ids, mask = _batch(1)
    torch.manual_seed(7)
    with torch.no_grad():
        expected = reference.generate(input_ids=ids, attention_mask=mask, max_new_tokens=10, **settings)
    torch.manual_seed(7)
    assert torch.equal(ours.generate(input_ids=ids, attention_mask=mask, max_new_tokens=10, **settings), expected)


@pytest.mark.parametrize("options", [dict(), dict(temperature=0.6, top_k=8), dict(top_p=0.7, temperature=1.3)])
def test_first_sampled_tokens_follow_the_filtered_softmax(tmp_path_factory, options):
    _, ours = _pair(tmp_path_factory, "gpt2", 5)
    prompt = torch.tensor([[5, 9, 11, 3]])
    with torch.no_grad():
        scores = ours(input_ids=prompt).logits[0, -1] / options.get("temperature", 1.0)
    allowed = torch.ones(VOCAB, dtype=torch.bool)
    if "top_k" in options:
        allowed &= scores >= scores.topk(options["top_k"]).values[-1]
    probs = torch.where(allowed, scores, float("-inf")).softmax(-1)
    if "top_p" in options:
        ordered, order = probs.sort(descending=True)
        kept = ordered.cumsum(0) - ordered < options["top_p"]  # the smallest set reaching top_p
        keep = torch.zeros(VOCAB, dtype=torch.bool)
        keep[order[kept]] = True
        probs = torch.where(keep, probs, 0.0)
        probs = probs / probs.sum()
    draws = 6000
    out = ours.generate(input_ids=prompt, max_new_tokens=1, do_sample=True, top_k=options.get("top_k", 0),
                        num_return_sequences=draws, seed=11,
                        **{k: v for k, v in options.items() if k != "top_k"})
    observed = torch.bincount(out[:, -1], minlength=VOCAB).double()
    assert observed[probs == 0].sum() == 0  # never a filtered-out token
    support = probs > 0
    expected = probs[support].double() * draws
    assert stats.chisquare(observed[support], expected * observed.sum() / expected.sum()).pvalue > 1e-3


def test_right_padding_is_left_aligned_and_positions_come_from_the_mask(tmp_path_factory):
    _, ours = _pair(tmp_path_factory, "gpt2", 0)
    left, left_mask = _batch(2, "left")
    right, right_mask = torch.zeros_like(left), torch.zeros_like(left_mask)
    for i, row in enumerate(left):  # the same prompts, padded on the right
        real = row[left_mask[i].bool()]
        right[i, :len(real)], right_mask[i, :len(real)] = real, 1
    assert torch.equal(ours.generate(input_ids=right, attention_mask=right_mask, max_new_tokens=8),
                       ours.generate(input_ids=left, attention_mask=left_mask, max_new_tokens=8))
    batched = ours.generate(input_ids=left, attention_mask=left_mask, max_new_tokens=8)
    for i in range(4):  # each prompt alone gives its row of the batch
        alone = ours.generate(input_ids=left[i:i + 1, left_mask[i].bool()], max_new_tokens=8)
        assert torch.equal(batched[i, 9:9 + alone.shape[1] - int(left_mask[i].sum())],
                           alone[0, int(left_mask[i].sum()):])


def test_repetition_penalty_is_transformers_and_skips_prompt_padding():
    from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

    from bertkit.model import logits_processing as rules

    tokens = torch.randint(0, 20, (5, 9), generator=torch.Generator().manual_seed(0))
    scores = torch.randn(5, 20, generator=torch.Generator().manual_seed(1)) * 3
    assert torch.equal(rules.penalize_repetitions(scores, tokens, 1.3),
                       RepetitionPenaltyLogitsProcessor(1.3)(tokens, scores.clone()))
    padding = torch.tensor([0, 3, 0, 5, 1])
    counted = torch.arange(9)[None, :] >= padding[:, None]
    reference = RepetitionPenaltyLogitsProcessor(1.3, prompt_ignore_length=padding)(tokens, scores.clone())
    assert torch.equal(rules.penalize_repetitions(scores, tokens, 1.3, counted), reference)


class _LetterTokenizer:
    """Token id i decodes to one letter (a..z by i % 26)."""

    def decode(self, ids):
        return "".join(chr(ord("a") + i % 26) for i in ids)


def test_stop_strings_end_a_row_at_the_token_that_completes_them(tmp_path_factory):
    _, ours = _pair(tmp_path_factory, "openai-gpt", 2)
    ids, mask = _batch(3)
    free = ours.generate(input_ids=ids, attention_mask=mask, max_new_tokens=12, eos_token_id=None)
    text = _LetterTokenizer().decode(free[0, 9:].tolist())
    stop = text[3:5]  # the first row's 4th and 5th new letters
    out = ours.generate(input_ids=ids, attention_mask=mask, max_new_tokens=12, eos_token_id=None,
                        stop_strings=[stop], tokenizer=_LetterTokenizer())
    first = _LetterTokenizer().decode(out[0, 9:].tolist())
    end = text.index(stop) + len(stop)
    assert first[:end] == text[:end] and (out[0, 9 + end:] == PAD).all()  # stopped, the stop string kept
    for row in range(4):  # every row is the free run up to its first stop string
        generated = _LetterTokenizer().decode(free[row, 9:].tolist())
        cut = generated.index(stop) + len(stop) if stop in generated else len(generated)
        assert torch.equal(out[row, 9:9 + cut], free[row, 9:9 + cut])
    with pytest.raises(ConfigError, match="^stop_strings:"):
        ours.generate(input_ids=ids, stop_strings=["x"])


def test_a_prompt_longer_than_the_context_is_cut_from_the_left_with_a_warning(tmp_path_factory):
    _, ours = _pair(tmp_path_factory, "gpt2", 1)
    long = torch.randint(3, VOCAB, (1, 50), generator=torch.Generator().manual_seed(4))  # n_positions: 40
    with pytest.warns(UserWarning, match="prompt of 50 tokens cut to its last 30"):
        out = ours.generate(input_ids=long, max_new_tokens=10, eos_token_id=None)
    assert torch.equal(out, ours.generate(input_ids=long[:, -30:], max_new_tokens=10, eos_token_id=None))
    with pytest.raises(ConfigError, match="^max_new_tokens:"):
        ours.generate(input_ids=long, max_new_tokens=40)


@pytest.mark.parametrize("call,field", [
    (dict(input_ids=torch.zeros(1, 0, dtype=torch.long)), "input_ids"),
    (dict(input_ids=torch.ones(2, 3, dtype=torch.long), attention_mask=torch.tensor([[1, 1, 1], [0, 0, 0]])), "input_ids"),
    (dict(input_ids=torch.ones(1, 3, dtype=torch.long), repetition_penalty=0.0), "repetition_penalty"),
    (dict(input_ids=torch.ones(1, 3, dtype=torch.long), num_beams=2, stop_strings=["a"]), "stop_strings"),
    (dict(input_ids=torch.ones(1, 3, dtype=torch.long), max_new_token=3), "max_new_token"),
])
def test_bad_input_names_the_argument(tmp_path_factory, call, field):
    _, ours = _pair(tmp_path_factory, "gpt2", 0)
    with pytest.raises(ConfigError, match=f"^{field}:"):
        ours.generate(tokenizer=_LetterTokenizer(), **call)


def test_no_prompt_starts_from_bos(tmp_path_factory):
    reference, ours = _pair(tmp_path_factory, "gpt2", 0)
    with torch.no_grad():
        expected = reference.generate(max_new_tokens=6)
    assert torch.equal(ours.generate(max_new_tokens=6), expected)
