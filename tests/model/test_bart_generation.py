"""bertkit's `generate` on BART against transformers' `generate` on the same random tiny
checkpoints (tied and scaled/untied, several seeds, padded batches): greedy and beam
search token for token; sampling draw for draw from the same global seed, and its token
frequencies against the model's own distribution. BART's defaults hold: the decoder
starts from EOS (`decoder_start_token_id`), `forced_bos_token_id` makes BOS the first
new token and `forced_eos_token_id` EOS the last one max_length allows."""

from __future__ import annotations

import pytest
import torch
from scipy.stats import chi2

transformers = pytest.importorskip("transformers")

from bertkit import BartForConditionalGeneration  # noqa: E402

BOS, PAD, EOS = 0, 1, 2
VARIANTS = {"tied": {}, "scaled-untied": dict(scale_embedding=True, tie_word_embeddings=False)}


def _pair(tmp_path_factory, variant: str, seed: int, forced_bos: bool):
    """(transformers model, bertkit model) with the same random weights, eval mode."""
    torch.manual_seed(seed)
    config = transformers.BartConfig(vocab_size=48, d_model=16, encoder_layers=2, decoder_layers=2,
                                     encoder_ffn_dim=24, decoder_ffn_dim=24, encoder_attention_heads=4,
                                     decoder_attention_heads=4, max_position_embeddings=40, dropout=0.0,
                                     forced_bos_token_id=BOS if forced_bos else None, **VARIANTS[variant])
    reference = transformers.BartForConditionalGeneration(config).eval()
    with torch.no_grad():  # larger than BART's init, so the outputs vary and end at different steps
        for parameter in reference.parameters():
            parameter.normal_(0.0, 0.6)
        reference.final_logits_bias.normal_(0.0, 0.5)
        reference.lm_head.weight[EOS] *= 3.0
    directory = tmp_path_factory.mktemp(f"bart-{variant}-{seed}")
    reference.save_pretrained(directory)
    ours = BartForConditionalGeneration.from_pretrained(directory).eval()
    return reference, ours


@pytest.fixture(scope="module", params=[("tied", 0, True), ("scaled-untied", 2, False)],
                ids=lambda p: f"{p[0]}-seed{p[1]}-{'forced_bos' if p[2] else 'free'}")
def models(request, tmp_path_factory):
    return _pair(tmp_path_factory, *request.param)


def _batch(seed: int):
    generator = torch.Generator().manual_seed(100 + seed)
    lengths = torch.tensor([9, 4, 7, 2])
    ids = torch.randint(3, 48, (4, 9), generator=generator)
    ids[:, 0] = BOS
    mask = (torch.arange(9)[None, :] < lengths[:, None]).long()
    ids[torch.arange(4), lengths - 1] = EOS
    return ids.masked_fill(mask == 0, PAD), mask


SETTINGS = [
    dict(max_new_tokens=12), dict(max_length=7), dict(max_new_tokens=10, min_new_tokens=4),
    dict(max_new_tokens=12, no_repeat_ngram_size=2), dict(max_new_tokens=10, num_beams=4),
    dict(max_new_tokens=10, num_beams=3, early_stopping=True, length_penalty=2.0),
    dict(max_new_tokens=10, num_beams=4, num_return_sequences=3),
]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) or "defaults")
def test_greedy_and_beam_search_equal_transformers_token_for_token(models, settings):
    reference, ours = models
    ids, mask = _batch(0)
    with torch.no_grad():
        expected = reference.generate(input_ids=ids, attention_mask=mask, **settings)
    got = ours.generate(input_ids=ids, attention_mask=mask, **settings)
    assert torch.equal(got, expected), f"\nours:\n{got}\ntransformers:\n{expected}"
    assert torch.equal(got, ours.generate(input_ids=ids, attention_mask=mask, use_cache=False, **settings))


def test_bart_defaults_eos_start_forced_bos_and_eos(models):
    reference, ours = models
    ids, mask = _batch(0)
    out = ours.generate(input_ids=ids, attention_mask=mask, max_new_tokens=6, num_beams=4)
    assert (out[:, 0] == EOS).all()  # decoder_start_token_id = EOS
    if ours.config.forced_bos_token_id is not None:
        assert (out[:, 1] == BOS).all()
    unfinished = (out == EOS)[:, 1:].sum(dim=1) == 0
    assert not unfinished.any()  # forced EOS at max_length: every row ends with EOS


@pytest.mark.parametrize("settings", [dict(do_sample=True, temperature=0.7, top_k=5),
                                      dict(do_sample=True, top_p=0.8, num_return_sequences=3)])
def test_sampling_from_the_same_global_seed_draws_transformers_tokens(models, settings):
    reference, ours = models
    ids, mask = _batch(1)
    torch.manual_seed(7)
    with torch.no_grad():
        expected = reference.generate(input_ids=ids, attention_mask=mask, max_new_tokens=10, **settings)
    torch.manual_seed(7)
    assert torch.equal(ours.generate(input_ids=ids, attention_mask=mask, max_new_tokens=10, **settings), expected)


def test_sampled_first_tokens_follow_the_model_distribution(tmp_path_factory):
    """4,000 one-token samples (no forced BOS) against the softmax of the first step: a
    chi-square over the tokens with expected count >= 5 stays under its 0.999 quantile."""
    _, ours = _pair(tmp_path_factory, "tied", 4, forced_bos=False)
    ours.config.forced_eos_token_id = None
    ids, mask = _batch(2)
    ids, mask = ids[:1], mask[:1]
    with torch.no_grad():
        probs = ours(input_ids=ids, attention_mask=mask,
                     decoder_input_ids=torch.tensor([[EOS]])).logits[0, -1].softmax(-1).double()
    draws = ours.generate(input_ids=ids.expand(4000, -1), attention_mask=mask.expand(4000, -1), max_new_tokens=1,
                          do_sample=True, top_k=0, seed=11)[:, 1]
    counts = torch.bincount(draws, minlength=probs.numel()).double()
    expected = probs * 4000
    kept = expected >= 5
    other = (counts[~kept].sum(), expected[~kept].sum())
    statistic = float((((counts[kept] - expected[kept]) ** 2) / expected[kept]).sum())
    if other[1] >= 5:
        statistic += float((other[0] - other[1]) ** 2 / other[1])
    degrees = int(kept.sum()) - (0 if other[1] >= 5 else 1)

    assert statistic < chi2.ppf(0.999, degrees), (statistic, degrees)
