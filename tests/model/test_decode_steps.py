"""`decode_steps` (bertkit.model.decoding): rows decoded together while they come and go —
a row joining a running batch (its caches left-padded to the others' length), rows
leaving it — get the tokens `generate` gives each input alone: T5 (an encoder-decoder,
relative positions), BART (an encoder-decoder with absolute positions, given per row),
GPT-2 and GPT-1 (decoder-only: prompts of different lengths prefilled left-padded, then
merged into the running batch), BART and the decoders also against transformers' `generate`."""

from __future__ import annotations

import pytest
import torch

from bertkit.model.packed_linear import packed_weights
from bertkit.model.t5 import T5Config, T5ForConditionalGeneration

INPUTS = [[5, 9, 14, 3, 22, 7, 1], [8, 4, 1], [30, 31, 32, 33, 1], [12, 1]]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    model = T5ForConditionalGeneration(T5Config(vocab_size=40, d_model=16, d_kv=4, d_ff=32, num_layers=2, num_heads=4,
                                                decoder_start_token_id=0, eos_token_id=1, pad_token_id=0)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.6)
    return model


def alone(model, ids, steps, **options):
    out = model.generate(input_ids=torch.tensor([ids]), max_new_tokens=steps, eos_token_id=[],  # no EOS: `steps` tokens
                         **options)
    return out[0].tolist()


def greedy(steps_object):
    steps_object.append(steps_object.next_logits().argmax(dim=-1))


def greedy_unrepeated(steps_object):
    """Greedy over the tokens each row has not had yet (`generate`'s no_repeat_ngram_size=1)."""
    scores = steps_object.next_logits()
    for i in range(steps_object.rows):
        scores[i, steps_object.tokens(i)] = float("-inf")
    steps_object.append(scores.argmax(dim=-1))


def test_rows_that_join_and_leave_get_their_own_tokens(model):
    histories = join_leave_join(model, INPUTS)
    assert histories[0] == alone(model, INPUTS[2], 10)
    assert histories[1] == alone(model, INPUTS[0], 12)
    assert histories[2] == alone(model, INPUTS[3], 6)


def join_leave_join(model, inputs, choose=greedy):
    """inputs[0] runs 3 steps; inputs[1:3] join; 4 steps; the second row leaves; inputs[3] joins;
    5 steps -> the histories of the rows left: inputs 2, 0, 3 after 10, 12 and 6 new tokens."""
    with torch.inference_mode(), packed_weights():
        running = model.decode_steps([inputs[0]])
        for _ in range(3):
            choose(running)
        joining = model.decode_steps(inputs[1:3])  # join after three steps: their caches are shorter
        choose(joining)
        running.merge(joining)
        for _ in range(4):
            choose(running)
        running.keep([2, 0])  # row 1 leaves; the others go on, reordered
        late = model.decode_steps([inputs[3]])
        choose(late)
        running.merge(late)
        for _ in range(5):
            choose(running)
        return [running.tokens(i) for i in range(running.rows)]


def test_a_model_whose_rows_cannot_merge_refuses_a_merge(model):
    steps = model.decode_steps([INPUTS[0]])
    steps.can_merge = False  # what GenerationMixin's default (merges_decode_steps = False) gives
    with pytest.raises(ValueError, match="cannot merge"):
        steps.merge(model.decode_steps([INPUTS[1]]))


# ---------------------------------------------------------------------------- BART: absolute positions

@pytest.fixture(scope="module")
def bart(tmp_path_factory):
    """(bertkit model, transformers model): a tiny random BART, the same weights."""
    import bertkit

    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BartConfig(vocab_size=40, d_model=16, encoder_layers=2, decoder_layers=2,
                                     encoder_ffn_dim=32, decoder_ffn_dim=32, encoder_attention_heads=4,
                                     decoder_attention_heads=4, max_position_embeddings=40, dropout=0.0,
                                     forced_eos_token_id=None)  # no forced EOS at max_length: raw argmax throughout
    reference = transformers.BartForConditionalGeneration(config).eval()
    with torch.no_grad():  # the layer norms kept as they are: random ones make every input's output alike
        for name, parameter in reference.named_parameters():
            if "norm" not in name:
                parameter.normal_(0.0, 0.6)
    directory = tmp_path_factory.mktemp("bart")
    reference.save_pretrained(directory)
    return bertkit.BartForConditionalGeneration.from_pretrained(directory).eval(), reference


def test_bart_rows_that_join_and_leave_get_their_own_tokens(bart):
    model, reference = bart
    assert model.decode_steps([INPUTS[0]]).can_merge  # its decoder takes each row's positions
    histories = join_leave_join(model, INPUTS, greedy_unrepeated)  # unrepeated: BART's greedy loops on one token
    for history, (index, new) in zip(histories, [(2, 10), (0, 12), (3, 6)]):
        assert history == alone(model, INPUTS[index], new, no_repeat_ngram_size=1)  # the start token, the new ones
        with torch.no_grad():  # transformers' generate, greedy, on the input alone
            theirs = reference.generate(torch.tensor([INPUTS[index]]), max_new_tokens=new, min_new_tokens=new,
                                        do_sample=False, num_beams=1, no_repeat_ngram_size=1)
        assert history == theirs[0].tolist()


def test_bart_left_padded_rows_take_their_own_positions(bart):
    """Rows whose caches are left-padded to the longest differ from the unpadded call only in the
    positions they are given: with the cache's positions instead, a late row's scores change."""
    model, _ = bart
    with torch.inference_mode(), packed_weights():
        running = model.decode_steps([INPUTS[0]])
        for _ in range(3):
            greedy(running)
        late = model.decode_steps([INPUTS[1]])
        greedy(late)
        alone_scores = late.next_logits()[0]  # its second step, unpadded
        late = model.decode_steps([INPUTS[1]])
        greedy(late)
        running.merge(late)  # its cache left-padded by two
        running.takes_positions = False  # the cache's positions instead: the late row's shift by its padding
        shifted = running.forward(True).logits[1, -1].float()
        running.takes_positions = True
        merged = running.next_logits()[1]
    torch.testing.assert_close(merged, alone_scores, rtol=1e-4, atol=1e-4)
    assert not torch.allclose(shifted, alone_scores, rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------------------- decoder-only models

PROMPTS = [[5, 9, 14, 3, 22, 7, 11, 6, 3], [8, 4], [30, 31, 32, 33, 21], [12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22]]
DECODERS = {"gpt2": ("GPT2Config", "GPT2LMHeadModel"), "openai-gpt": ("OpenAIGPTConfig", "OpenAIGPTLMHeadModel")}


@pytest.fixture(scope="module", params=list(DECODERS))
def decoders(request, tmp_path_factory):
    """(bertkit model, transformers model) of one decoder family, the same random weights."""
    import bertkit

    transformers = pytest.importorskip("transformers")
    config_name, model_name = DECODERS[request.param]
    torch.manual_seed(0)
    config = getattr(transformers, config_name)(vocab_size=40, n_positions=40, n_embd=16, n_layer=2, n_head=4,
                                                bos_token_id=1, eos_token_id=2, pad_token_id=0)
    reference = getattr(transformers, model_name)(config).eval()
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.normal_(0.0, 0.6)
    directory = tmp_path_factory.mktemp(request.param)
    reference.save_pretrained(directory)
    return getattr(bertkit, model_name).from_pretrained(directory).eval(), reference


def test_decoder_rows_that_join_and_leave_get_their_own_tokens(decoders):
    model, reference = decoders
    histories = join_leave_join(model, PROMPTS)
    for history, (index, new) in zip(histories, [(2, 10), (0, 12), (3, 6)]):
        assert history == alone(model, PROMPTS[index], new)  # the prompt, then the new tokens
        with torch.no_grad():  # transformers' generate, greedy, on the prompt alone
            theirs = reference.generate(torch.tensor([PROMPTS[index]]), attention_mask=torch.ones(1, len(PROMPTS[index]),
                                        dtype=torch.long), max_new_tokens=new, min_new_tokens=new, do_sample=False,
                                        pad_token_id=0)
        assert history == theirs[0].tolist()


def test_decoder_prompts_prefill_together_left_padded(decoders):
    model, _ = decoders
    with torch.inference_mode(), packed_weights():
        steps = model.decode_steps(PROMPTS)
        for _ in range(6):
            greedy(steps)
        histories = [steps.tokens(i) for i in range(steps.rows)]
    assert histories == [alone(model, prompt, 6) for prompt in PROMPTS]
    assert steps.can_merge


def test_decoder_settings_cut_the_prompt_to_the_context(decoders):
    model, _ = decoders
    with pytest.warns(UserWarning, match="cut to its last 30"):  # generate's warning: 35 + 10 > 40 positions
        ids, settings = model.resolve_decoding(list(range(3, 38)), max_new_tokens=10)
    assert ids == list(range(8, 38)) and settings.prompt_length == 30 and settings.max_length == 40
    ids, settings = model.resolve_decoding([5, 6], max_new_tokens=3)
    assert ids == [5, 6] and settings.prompt_length == 2 and settings.eos_token_ids == (2,)
