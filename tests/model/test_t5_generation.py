"""bertkit's `generate` on T5 against transformers' `generate` on the same random tiny
checkpoints (v1.0 and v1.1, several seeds, padded batches): greedy and beam search
token for token; sampling draw for draw from the same global seed.

One difference is normalized, not hidden: transformers' beam search fills a finished
T5 beam with EOS instead of pad (its `pad_token_id or eos_token_id` meets pad id 0);
ours pads with pad_token_id, as both do in greedy decoding."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from bertkit.model.t5 import T5ForConditionalGeneration  # noqa: E402

EOS, PAD = 1, 0
VARIANTS = {"v1.0": dict(feed_forward_proj="relu", tie_word_embeddings=True),
            "v1.1": dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False)}


def _pair(tmp_path_factory, variant: str, seed: int):
    """(transformers model, bertkit model) with the same random weights, eval mode."""
    torch.manual_seed(seed)
    config = transformers.T5Config(vocab_size=48, d_model=16, d_kv=4, d_ff=24, num_layers=2, num_decoder_layers=2,
                                   num_heads=4, decoder_start_token_id=0, eos_token_id=EOS, pad_token_id=PAD,
                                   dropout_rate=0.0, **VARIANTS[variant])
    reference = transformers.T5ForConditionalGeneration(config).eval()
    with torch.no_grad():  # larger than T5's init, so the outputs vary and end at different steps
        for parameter in reference.parameters():
            parameter.normal_(0.0, 0.6)
        reference.lm_head.weight[EOS] *= 3.0  # EOS more often the best or the worst token (tied in v1.0)
    directory = tmp_path_factory.mktemp(f"t5-{variant}-{seed}")
    reference.save_pretrained(directory)
    ours = T5ForConditionalGeneration.from_pretrained(directory).eval()
    return reference, ours


@pytest.fixture(scope="module", params=[("v1.0", 0), ("v1.0", 1), ("v1.1", 2), ("v1.1", 3)],
                ids=lambda p: f"{p[0]}-seed{p[1]}")
def models(request, tmp_path_factory):
    return _pair(tmp_path_factory, *request.param)


def _batch(seed: int):
    generator = torch.Generator().manual_seed(100 + seed)
    lengths = torch.tensor([9, 4, 7, 2])
    ids = torch.randint(2, 48, (4, 9), generator=generator)
    mask = (torch.arange(9)[None, :] < lengths[:, None]).long()
    return ids * mask, mask


def _pad_after_eos(sequences: torch.Tensor) -> torch.Tensor:
    is_eos = (sequences == EOS).long()
    is_eos[:, 0] = 0
    return sequences.masked_fill(is_eos.cumsum(dim=1) - is_eos > 0, PAD)


SETTINGS = [
    dict(max_new_tokens=12), dict(), dict(max_length=7), dict(max_new_tokens=10, min_new_tokens=4),
    dict(max_new_tokens=12, no_repeat_ngram_size=2),
    dict(max_new_tokens=10, num_beams=2), dict(max_new_tokens=10, num_beams=4),
    dict(max_new_tokens=10, num_beams=4, length_penalty=0.3), dict(max_new_tokens=10, num_beams=4, length_penalty=2.0),
    dict(max_new_tokens=10, num_beams=3, early_stopping=True),
    dict(max_new_tokens=10, num_beams=3, early_stopping="never", length_penalty=1.5),
    dict(max_new_tokens=10, num_beams=3, early_stopping="never", length_penalty=-0.5),
    dict(max_new_tokens=12, num_beams=4, no_repeat_ngram_size=2),
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
    assert torch.equal(got, _pad_after_eos(expected) if settings.get("num_beams", 1) > 1 else expected), \
        f"\nours:\n{got}\ntransformers:\n{expected}"
    assert torch.equal(got, ours.generate(input_ids=ids, attention_mask=mask, use_cache=False, **settings))


def test_the_cases_end_at_different_steps(models):
    """The parity above means something: rows end with EOS at different steps, some run to max_length."""
    reference, ours = models
    ids, mask = _batch(0)
    out = ours.generate(input_ids=ids, attention_mask=mask, max_new_tokens=12, num_beams=4, num_return_sequences=4)
    lengths = {int((row != PAD).sum()) for row in out}
    assert len(lengths) >= 2


@pytest.mark.parametrize("settings", [dict(do_sample=True), dict(do_sample=True, temperature=0.7, top_k=5),
                                      dict(do_sample=True, top_p=0.8), dict(do_sample=True, num_return_sequences=3)])
def test_sampling_from_the_same_global_seed_draws_transformers_tokens(models, settings):
    reference, ours = models
    ids, mask = _batch(1)
    torch.manual_seed(7)
    with torch.no_grad():
        expected = reference.generate(input_ids=ids, attention_mask=mask, max_new_tokens=10, **settings)
    torch.manual_seed(7)
    assert torch.equal(ours.generate(input_ids=ids, attention_mask=mask, max_new_tokens=10, **settings), expected)
