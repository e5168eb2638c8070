"""experiments/ablations.py's FLOPs formulas for the t5 and xlnet arms of ablation (f) and the bart arms of (h),
checked against torch's own count of the models' matmul FLOPs (FlopCounterMode) on one
forward pass: a training step is 3 forward passes in the formulas."""

import sys
from pathlib import Path

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
from ablations import step_flops  # noqa: E402

from bertkit.model.t5.config import T5_PRESETS  # noqa: E402

from bertkit.model.t5 import T5Config, T5ForConditionalGeneration
from bertkit.model.xlnet import XLNetLMHeadModel  # noqa: E402
from bertkit.model.xlnet.config import XLNetConfig  # noqa: E402

VOCAB = 512


def forward_flops(model: torch.nn.Module, **inputs) -> int:
    model.train()  # the explicit attention path: FlopCounterMode does not count every fused CPU kernel
    with FlopCounterMode(display=False) as counter:
        model(**inputs)
    return counter.get_total_flops()


@pytest.mark.parametrize("preset", ["t5-tiny", "t5-small"])
def test_t5_formula_matches_the_models_matmuls(preset):
    sizes = {**T5_PRESETS[preset], "vocab_size": VOCAB}
    if preset == "t5-small":  # v1.0's relu FFN, fewer layers to keep it quick; 3 decoder layers
        sizes.update(num_layers=2, num_decoder_layers=3)
    torch.manual_seed(0)
    model = T5ForConditionalGeneration(T5Config(**sizes, decoder_start_token_id=0))
    batch, input_len, target_len = 3, 40, 11
    # decoder inputs, not labels: the fused head + loss also runs the head's backward matmul in forward
    counted = forward_flops(model, input_ids=torch.randint(2, VOCAB, (batch, input_len)),
                            decoder_input_ids=torch.randint(2, VOCAB, (batch, target_len)))
    formula = step_flops("t5", sizes, batch, input_len, 0.0, target_len=target_len) / 3
    assert formula == pytest.approx(counted, rel=1e-6)  # every matmul counted


def test_t5_formula_grows_with_the_target_length_only_in_the_decoder():
    sizes = {**T5_PRESETS["t5-tiny"], "vocab_size": VOCAB}
    short = step_flops("t5", sizes, 2, 64, 0.0, target_len=8)
    longer = step_flops("t5", sizes, 2, 64, 0.0, target_len=16)
    no_decoder = step_flops("t5", {**sizes, "num_decoder_layers": 0}, 2, 64, 0.0, target_len=8)
    d, a = sizes["d_model"], sizes["num_heads"] * sizes["d_kv"]
    assert no_decoder == pytest.approx(6.0 * 2 * 8 * d * VOCAB + 6.0 * 2 * 64 * sizes["num_layers"] * (
        4 * d * a + 3 * d * sizes["d_ff"] + 2 * 64 * a))  # encoder + LM head
    assert short < longer


def xlnet_inputs(batch: int, seq_len: int, targets: int) -> dict:
    """Every row with `targets` targets at random positions: perm_mask hides them from each other
    (any order does for counting), target_mapping selects them."""
    generator = torch.Generator().manual_seed(0)
    mapping = torch.zeros(batch, targets, seq_len)
    perm_mask = torch.zeros(batch, seq_len, seq_len)
    for row in range(batch):
        positions = torch.randperm(seq_len, generator=generator)[:targets].sort().values
        mapping[row, torch.arange(targets), positions] = 1.0
        perm_mask[row, :, positions] = 1.0
    return {"input_ids": torch.randint(10, VOCAB, (batch, seq_len), generator=generator), "perm_mask": perm_mask,
            "target_mapping": mapping}


def test_xlnet_formula_matches_the_models_matmuls():
    sizes = {**XLNetConfig.presets["tiny"], "vocab_size": VOCAB}
    torch.manual_seed(0)
    model = XLNetLMHeadModel(XLNetConfig(**sizes, mem_len=None))
    batch, seq_len, targets = 3, 48, 8
    counted = forward_flops(model, **xlnet_inputs(batch, seq_len, targets))
    formula = step_flops("xlnet", sizes, batch, seq_len, 0.0, predicted=batch * targets) / 3
    assert formula == pytest.approx(counted, rel=1e-6)  # (no token_type_ids: no segment scores, not counted)


def test_xlnet_query_stream_costs_what_its_targets_do():
    sizes = {**XLNetConfig.presets["tiny"], "vocab_size": VOCAB}
    d, f, layers = sizes["d_model"], sizes["d_inner"], sizes["n_layer"]
    seq_len = 32
    extra = step_flops("xlnet", sizes, 1, seq_len, 0.0, predicted=5) - step_flops("xlnet", sizes, 1, seq_len, 0.0,
                                                                                 predicted=4)
    assert extra == pytest.approx(6.0 * (layers * (2 * d * d + 2 * d * f + 4 * seq_len * d) + d * VOCAB))


def test_unknown_objective_is_refused():
    with pytest.raises(ValueError, match="no FLOPs formula"):
        step_flops("sop", {"hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1, "vocab_size": 8},
                   1, 8, 1.0)


@pytest.mark.parametrize("sizes", [{}, {"decoder_layers": 3, "decoder_ffn_dim": 96, "encoder_ffn_dim": 64}])
def test_bart_formula_matches_the_models_matmuls(sizes):
    """(h): the encoder on the noised input, the decoder with cross-attention on the target, the
    tied LM head at every target position; encoder and decoder sizes may differ."""
    from ablations import bart_step_flops

    from bertkit.model.bart import BartConfig, BartForConditionalGeneration

    fields = {"d_model": 32, "encoder_layers": 2, "decoder_layers": 2, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
              "encoder_attention_heads": 2, "decoder_attention_heads": 2, "vocab_size": VOCAB, **sizes}
    torch.manual_seed(0)
    model = BartForConditionalGeneration(BartConfig(**fields, max_position_embeddings=64))
    batch, input_len, target_len = 3, 37, 45  # infilling: the noised input shorter than the document
    with sdpa_kernel(SDPBackend.MATH):  # the counter sees the math backend's attention matmuls, not the fused kernel's
        counted = forward_flops(model, input_ids=torch.randint(4, VOCAB, (batch, input_len)),
                                decoder_input_ids=torch.randint(4, VOCAB, (batch, target_len)))
    step = step_flops("bart", fields, batch, input_len, 0.0, target_len=target_len)
    assert step == bart_step_flops(fields, batch, input_len, target_len)
    assert step / 3 == pytest.approx(counted, rel=1e-6)  # every matmul counted


def test_bart_and_t5_share_the_encoder_decoder_count():
    """A BART config that is T5's in other names (relu FFN, heads x d_kv = d_model) costs the same."""
    t5 = {"d_model": 64, "d_ff": 128, "num_heads": 4, "d_kv": 16, "num_layers": 2, "num_decoder_layers": 3,
          "feed_forward_proj": "relu", "vocab_size": VOCAB}
    bart = {"d_model": 64, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "encoder_layers": 2, "decoder_layers": 3,
            "vocab_size": VOCAB}
    assert step_flops("bart", bart, 4, 50, 0.0, target_len=60) == step_flops("t5", t5, 4, 50, 0.0, target_len=60)
