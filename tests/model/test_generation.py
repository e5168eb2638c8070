"""`generate`'s decoding algorithms (bertkit.model.generation) on a toy encoder-decoder,
and its score rules against transformers' logits processors.

Parity of whole outputs with transformers' `generate` on T5 checkpoints is in
tests/model/test_t5_generation.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from bertkit.errors import ConfigError
from bertkit.model import logits_processing as rules
from _toy_seq2seq import ToySeq2Seq

IDS = torch.tensor([[3, 4, 5, 6, 7], [7, 8, 2, 0, 0], [9, 10, 0, 0, 0]])
MASK = (IDS != 0).long()
DECODINGS = [dict(), dict(num_beams=2), dict(num_beams=4, length_penalty=0.5), dict(num_beams=3, early_stopping=True),
             dict(num_beams=3, early_stopping="never", length_penalty=2.0), dict(no_repeat_ngram_size=2),
             dict(num_beams=4, num_return_sequences=3, no_repeat_ngram_size=3),
             dict(do_sample=True, seed=3, top_k=4, top_p=0.9, temperature=0.8),
             dict(do_sample=True, num_beams=3, seed=5, num_return_sequences=2)]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("options", DECODINGS)
def test_the_cache_changes_nothing(seed, options):
    model = ToySeq2Seq(seed=seed)
    cached = model.generate(IDS, MASK, max_new_tokens=10, **options)
    assert torch.equal(cached, model.generate(IDS, MASK, max_new_tokens=10, use_cache=False, **options))


@pytest.mark.parametrize("options", [o for o in DECODINGS if not o.get("do_sample")])
def test_a_padded_batch_gives_each_input_s_own_result(options):
    model = ToySeq2Seq(seed=1)
    batched = model.generate(IDS, MASK, max_new_tokens=10, **options)
    rows = batched.shape[0] // IDS.shape[0]
    for i in range(IDS.shape[0]):
        length = int(MASK[i].sum())
        alone = model.generate(IDS[i:i + 1, :length], max_new_tokens=10, **options)
        mine = batched[i * rows:(i + 1) * rows, :alone.shape[1]]
        assert torch.equal(mine, alone)
        assert (batched[i * rows:(i + 1) * rows, alone.shape[1]:] == 0).all()  # the batch's longer rows: pad


def test_encoder_once_then_one_new_token_a_step_on_the_cache():
    model = ToySeq2Seq(seed=1)
    encoder_calls = []
    encoder = model.get_encoder()
    model.get_encoder = lambda: (lambda **kw: encoder_calls.append(1) or encoder(**kw))
    out = model.generate(IDS, MASK, max_new_tokens=6, num_beams=3)
    assert len(encoder_calls) == 1
    assert model.calls[0] == (1, 0)
    assert model.calls[1:] == [(1, step) for step in range(1, len(model.calls))]
    assert out.shape[1] <= 7


def test_rows_start_with_the_start_token_and_are_padded_after_eos():
    model = ToySeq2Seq(seed=2)
    for options in (dict(), dict(num_beams=3, num_return_sequences=3)):
        out = model.generate(IDS, MASK, max_new_tokens=12, **options)
        assert (out[:, 0] == 0).all()
        for row in out.tolist():
            if 1 in row:
                assert all(t == 0 for t in row[row.index(1) + 1:]), row


def test_max_length_counts_the_start_token_and_20_new_tokens_by_default():
    model = ToySeq2Seq(seed=1)  # never ends on its own
    assert model.generate(IDS, MASK).shape == (3, 21)
    assert model.generate(IDS, MASK, max_length=5).shape == (3, 5)
    assert model.generate(IDS, MASK, max_length=5, max_new_tokens=7).shape == (3, 8)


def test_min_new_tokens_holds_eos_back():
    model = ToySeq2Seq(seed=2)  # ends early when free to
    assert (model.generate(IDS, MASK, max_new_tokens=12)[:, 1:6] == 1).any()
    for options in (dict(), dict(num_beams=3), dict(do_sample=True, seed=0)):
        out = model.generate(IDS, MASK, max_new_tokens=12, min_new_tokens=5, **options)
        assert (out[:, 1:6] != 1).all()
        assert torch.equal(out, model.generate(IDS, MASK, max_new_tokens=12, min_length=6, **options))


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("beams", [1, 3])
def test_no_repeat_ngram_size_leaves_no_repeated_ngram(n, beams):
    model = ToySeq2Seq(seed=1)  # repeats "2 3 4" when free to
    out = model.generate(IDS, MASK, max_new_tokens=10, num_beams=beams, no_repeat_ngram_size=n)
    for row in out.tolist():
        row = row[:row.index(1) + 1] if 1 in row else row
        ngrams = [tuple(row[i:i + n]) for i in range(len(row) - n + 1)]
        assert len(ngrams) == len(set(ngrams)), row


def test_sampling_is_seeded():
    model = ToySeq2Seq(seed=0)
    options = dict(do_sample=True, max_new_tokens=8, num_return_sequences=4, temperature=1.5)
    first = model.generate(IDS, MASK, seed=7, **options)
    assert torch.equal(first, model.generate(IDS, MASK, seed=7, **options))
    assert torch.equal(first, model.generate(IDS, MASK, generator=torch.Generator().manual_seed(7), **options))
    assert not torch.equal(first, model.generate(IDS, MASK, seed=8, **options))
    torch.manual_seed(3)  # no seed, no generator: torch's global RNG, as transformers
    again = model.generate(IDS, MASK, **options)
    torch.manual_seed(3)
    assert torch.equal(again, model.generate(IDS, MASK, **options))


def _reference_allowed(logits: np.ndarray, temperature: float, top_k: int, top_p: float) -> set[int]:
    """The tokens top-k then top-p keep, computed directly from the definition."""
    scores = logits / temperature
    order = np.argsort(-scores, kind="stable")
    kept = [t for t in order if scores[t] >= scores[order[top_k - 1]]] if top_k else list(order)
    probs = np.exp(scores[kept] - scores[kept].max())
    probs /= probs.sum()
    # nucleus: the most likely tokens until their mass reaches top_p (the first one always)
    allowed, mass = set(), 0.0
    for token, p in zip(kept, probs):
        if mass >= top_p - 1e-6:
            break
        allowed.add(int(token))
        mass += p
    return allowed


@pytest.mark.parametrize("top_k,top_p,temperature", [(3, 1.0, 1.0), (0, 0.7, 1.0), (5, 0.8, 0.7), (2, 0.5, 2.0)])
def test_sampled_tokens_are_always_in_the_filtered_set(top_k, top_p, temperature):
    model = ToySeq2Seq(seed=0, scale=1.0)  # flat enough that the filters matter
    ids = IDS.repeat(20, 1)
    out = model.generate(ids, (ids != 0).long(), do_sample=True, seed=11, max_new_tokens=8, top_k=top_k,
                         top_p=top_p, temperature=temperature)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=(ids != 0).long(), decoder_input_ids=out).logits.numpy()
    checked = 0
    for row, tokens in enumerate(out.tolist()):
        for t in range(1, len(tokens)):
            if tokens[t - 1] == 1:  # finished: pad follows
                break
            assert tokens[t] in _reference_allowed(logits[row, t - 1].astype(np.float64), temperature, top_k, top_p)
            checked += 1
    assert checked > 200


@pytest.mark.parametrize("temperature,top_k", [(1.0, 0), (0.6, 0), (1.7, 0), (1.0, 4)])
def test_sampled_frequencies_follow_softmax_of_logits_over_temperature(temperature, top_k):
    model = ToySeq2Seq(seed=0, scale=1.0)
    draws = 20000
    ids = IDS[:1].repeat(draws, 1)
    first = model.generate(ids, do_sample=True, seed=1, max_new_tokens=1, temperature=temperature, top_k=top_k)[:, 1]
    with torch.no_grad():
        logits = model(input_ids=IDS[:1], decoder_input_ids=torch.zeros(1, 1, dtype=torch.long)).logits[0, 0].double()
    scores = logits / temperature
    if top_k:
        scores[scores < scores.topk(top_k).values[-1]] = float("-inf")
    expected = torch.softmax(scores, dim=0).numpy() * draws
    observed = np.bincount(first.numpy(), minlength=len(expected))
    support = expected > 0
    assert observed[~support].sum() == 0
    assert stats.chisquare(observed[support], expected[support]).pvalue > 1e-3


@pytest.mark.parametrize("options,field", [(dict(num_beams=2, num_return_sequences=3), "num_return_sequences"),
                                           (dict(num_return_sequences=2), "num_return_sequences"),
                                           (dict(max_new_tokens=0), "max_new_tokens"),
                                           (dict(top_p=0.0), "top_p"), (dict(temperature=0), "temperature"),
                                           (dict(early_stopping="sometimes"), "early_stopping"),
                                           (dict(num_beam=2), "num_beam")])
def test_bad_settings_name_the_argument(options, field):
    with pytest.raises(ConfigError, match=f"^{field}:"):
        ToySeq2Seq().generate(IDS, MASK, **options)


# ---------------------------------------------------------------------------- the score rules vs transformers'


def _scores(rows=6, vocab=50, seed=0):
    return torch.randn(rows, vocab, generator=torch.Generator().manual_seed(seed)) * 3


@pytest.mark.parametrize("k,min_keep", [(1, 1), (5, 1), (5, 7), (80, 1)])
def test_keep_top_k_is_transformers(k, min_keep):
    from transformers.generation.logits_process import TopKLogitsWarper

    scores = _scores()
    assert torch.equal(rules.keep_top_k(scores, k, min_keep), TopKLogitsWarper(k, min_tokens_to_keep=min_keep)(None, scores))


@pytest.mark.parametrize("p,min_keep", [(0.1, 1), (0.5, 1), (0.9, 2), (0.99, 1)])
def test_keep_top_p_is_transformers(p, min_keep):
    from transformers.generation.logits_process import TopPLogitsWarper

    scores = _scores()
    assert torch.equal(rules.keep_top_p(scores, p, min_keep), TopPLogitsWarper(p, min_tokens_to_keep=min_keep)(None, scores))


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_ban_repeated_ngrams_is_transformers(n):
    from transformers.generation.logits_process import NoRepeatNGramLogitsProcessor

    tokens = torch.randint(0, 6, (8, 12), generator=torch.Generator().manual_seed(n))
    for length in range(1, 13):
        scores = _scores(8, 6, seed=length)
        ours = rules.ban_repeated_ngrams(scores, tokens[:, :length], n)
        assert torch.equal(ours, NoRepeatNGramLogitsProcessor(n)(tokens[:, :length], scores.clone()))


def test_temperature_and_eos_ban_are_transformers():
    from transformers.generation.logits_process import MinLengthLogitsProcessor, TemperatureLogitsWarper

    scores = _scores()
    assert torch.equal(rules.scale_temperature(scores, 0.7), TemperatureLogitsWarper(0.7)(None, scores))
    eos = torch.tensor([1, 4])
    reference = MinLengthLogitsProcessor(5, eos)(torch.zeros(6, 2, dtype=torch.long), scores.clone())
    assert torch.equal(rules.ban_eos(scores, eos), reference)


@pytest.mark.parametrize("penalty", [0.7, 1.3, 2.0])
def test_repetition_penalty_is_transformers(penalty):
    from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

    tokens = torch.randint(0, 20, (6, 9), generator=torch.Generator().manual_seed(1))
    scores = _scores(6, 20)
    reference = RepetitionPenaltyLogitsProcessor(penalty)(tokens, scores.clone())
    assert torch.equal(rules.penalize_repetitions(scores, tokens, penalty), reference)


def test_repetition_penalty_makes_generate_repeat_less():
    model = ToySeq2Seq(seed=2)
    plain = model.generate(IDS, MASK, max_new_tokens=12)
    penalized = model.generate(IDS, MASK, max_new_tokens=12, repetition_penalty=3.0)
    repeats = lambda rows: sum(len(r) - len(set(r)) for r in rows.tolist())  # noqa: E731
    assert repeats(penalized) < repeats(plain)
