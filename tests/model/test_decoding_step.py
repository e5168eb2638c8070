"""One decoding engine (bertkit.model.decoding_step): `generate` and the server's continuous
batching run the same step function, and rows that differ in settings, lengths and
sampling generators, decoded together by it, each get what `generate` gives them alone."""

from __future__ import annotations

import torch

import bertkit.model.generation as generation
import bertkit.serving.generation as serving
from bertkit.model.decoding_step import RowGroup, decode_step
from bertkit.model.gpt.config import GPT2Config
from bertkit.model.gpt import GPT2LMHeadModel
from bertkit.model.packed_linear import packed_weights

PROMPTS = [[5, 9, 14, 3, 22, 7, 11, 6, 3], [8, 4], [30, 31, 32, 33, 21], [12, 13, 14]]
OPTIONS = [dict(repetition_penalty=1.5), dict(no_repeat_ngram_size=2),
           dict(forced_bos_token_id=7, repetition_penalty=1.2), dict(do_sample=True, top_k=5, temperature=0.7)]
SEEDS = [None, None, None, 3]


def test_generate_and_the_server_run_one_step_function():
    assert generation.decode_step is serving.decode_step is decode_step


def _model():
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=40, n_positions=40, n_embd=16, n_layer=2, n_head=4,
                                       bos_token_id=1, eos_token_id=2, pad_token_id=0)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.6)
    return model


def test_rows_with_their_own_settings_decoded_together_get_their_own_answers():
    model, new = _model(), 8
    resolved = [model.resolve_decoding(p, max_new_tokens=new, eos_token_id=[], **o) for p, o in zip(PROMPTS, OPTIONS)]
    generators = [None if s is None else torch.Generator().manual_seed(s) for s in SEEDS]
    groups = [RowGroup(settings, [i], generator) for i, ((_, settings), generator) in enumerate(zip(resolved,
                                                                                                    generators))]
    with torch.inference_mode(), packed_weights():
        steps = model.decode_steps([ids for ids, _ in resolved])  # left-padded to the longest prompt
        for _ in range(new):
            decode_step(steps, groups)
        together = [steps.tokens(i) for i in range(steps.rows)]
    alone = [model.generate(input_ids=torch.tensor([p]), max_new_tokens=new, eos_token_id=[], seed=s, **o)[0].tolist()
             for p, o, s in zip(PROMPTS, OPTIONS, SEEDS)]
    assert together == alone
