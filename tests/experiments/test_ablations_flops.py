"""experiments/ablations.py's FLOPs accounting against torch's FLOP counter on transformers' models.

`step_flops` (matmul FLOPs of forward + backward) must equal what
`torch.utils.flop_counter.FlopCounterMode` counts for one training step of the reference
implementation of each objective's model (transformers, eager attention so that the
attention matmuls are visible to the counter; HF heads score every position, so the
formula is given masked = B x T): BertForPreTraining (MLM+NSP), BertForMaskedLM (MLM),
BertLMHeadModel (left-to-right), ElectraForMaskedLM generator + ElectraForPreTraining
discriminator with an embedding projection. (bertkit's own fused MLM loss adds into its
weight gradient in place, which the counter does not see, hence the reference models.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

transformers = pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
from ablations import step_flops  # noqa: E402

B, T, V = 3, 16, 120
SIZES = {"vocab_size": V, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64}
COMMON = {**SIZES, "max_position_embeddings": 64, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
          "attn_implementation": "eager"}


def counted(*steps) -> float:
    """FLOPs torch counts for forward + backward of the sum of each `step()` loss."""
    with FlopCounterMode(display=False) as counter:
        sum(step() for step in steps).backward()
    return float(counter.get_total_flops())


def inputs(seed: int = 0) -> dict:
    input_ids = torch.randint(5, V, (B, T), generator=torch.Generator().manual_seed(seed))
    return {"input_ids": input_ids, "token_type_ids": torch.zeros(B, T, dtype=torch.long),
            "attention_mask": torch.ones(B, T, dtype=torch.long)}


@pytest.mark.parametrize("objective", ["mlm_nsp", "mlm"])
def test_mlm_flops(objective):
    torch.manual_seed(0)
    batch = inputs()
    if objective == "mlm_nsp":
        model = transformers.BertForPreTraining(transformers.BertConfig(**COMMON)).train()
        got = counted(lambda: model(**batch, labels=batch["input_ids"], next_sentence_label=torch.tensor([0, 1, 0])).loss)
    else:
        model = transformers.BertForMaskedLM(transformers.BertConfig(**COMMON)).train()
        got = counted(lambda: model(**batch, labels=batch["input_ids"]).loss)
    assert got == pytest.approx(step_flops(objective, SIZES, B, T, masked=B * T), rel=1e-12)


def test_ltr_flops():
    torch.manual_seed(0)
    model = transformers.BertLMHeadModel(transformers.BertConfig(**COMMON, is_decoder=True)).train()
    batch = inputs(1)
    got = counted(lambda: model(**batch, labels=batch["input_ids"]).loss)
    assert got == pytest.approx(step_flops("ltr", SIZES, B, T, masked=0, predicted=B * T), rel=1e-12)


def test_electra_flops():
    """Generator (width 8 = 0.25 x 32) and discriminator share embeddings of width 24 (both project)."""
    from bertkit.model.electra.config import generator_config
    from bertkit.model.electra import ElectraConfig

    disc = {**SIZES, "embedding_size": 24}
    gen = generator_config(ElectraConfig(**disc), 0.25).to_dict()
    assert (gen["hidden_size"], gen["intermediate_size"], gen["num_hidden_layers"]) == (8, 16, 2)
    torch.manual_seed(0)
    common = {k: v for k, v in COMMON.items() if k not in SIZES}
    discriminator = transformers.ElectraForPreTraining(transformers.ElectraConfig(**common, **disc)).train()
    generator = transformers.ElectraForMaskedLM(transformers.ElectraConfig(
        **common, **{k: gen[k] for k in SIZES}, embedding_size=24)).train()
    batch = inputs(2)
    got = counted(lambda: generator(**batch, labels=batch["input_ids"]).loss,
                  lambda: discriminator(**batch, labels=torch.zeros(B, T, dtype=torch.long)).loss)
    assert got == pytest.approx(step_flops("electra", disc, B, T, masked=B * T, generator=gen), rel=1e-12)


def test_electra_step_costs_a_little_more_than_mlm_at_tiny():
    """The experiment's setting (tiny, 8k vocabulary, generator 0.25): equal FLOPs give ELECTRA ~7% fewer steps."""
    config = {"hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 2, "vocab_size": 8192,
              "embedding_size": 128}
    gen = {"hidden_size": 32, "intermediate_size": 128, "num_hidden_layers": 2}
    masked = 32 * 0.15 * 116
    ratio = step_flops("electra", config, 32, 128, masked, generator=gen) / step_flops("mlm", config, 32, 128, masked)
    assert 1.0 < ratio < 1.2


def test_the_left_to_right_arm_of_f_runs_at_mlm_s_flops_and_shares_a_s_control():
    """(f)'s `ltr_flops`: (a)'s left-to-right LM on the same data, its steps set by FLOPs
    (2,000 MLM steps buy ~837 of it), fine-tuned on (f)'s tasks and seeds; its no-pre-training
    control is (a)'s random BERT, so it gets no `_random` variant of its own."""
    from argparse import Namespace

    from ablations import ARMS, FINETUNE, FLOPS_MATCHED, build_steps, select

    steps = build_steps(Namespace(seeds=[1, 2, 3]))
    assert "ltr_flops" in FLOPS_MATCHED and ARMS["ltr_flops"][:2] == ("ltr", "data")
    assert steps["pt-ltr_flops"].deps == ("data", "pt-mlm")
    wanted = {f"ft-ltr_flops-{task}-s{seed}" for task in ("mrpc", "sst2", "qnli") for seed in (1, 2, 3)}
    assert wanted <= set(select(["f"], steps))
    assert "ltr_flops_random" not in FINETUNE
    # at (a)'s sizes and data (mean 119.2 tokens per sequence): the LTR head scores every position
    from ablations import pretrain_flops

    sizes = {**SIZES, "hidden_size": 128, "intermediate_size": 512, "vocab_size": 8192}
    args = Namespace(batch_size=32, max_seq_length=128)
    ratio = pretrain_flops("mlm", sizes, args, 119.2) / pretrain_flops("ltr", sizes, args, 119.2)
    assert round(2000 * ratio) == 837


def test_pinned_steps_come_from_the_recorded_pretraining_lines(tmp_path):
    """--pin-steps FILE: the step counts of FILE's pre-training lines (the recorded (f) arms
    ran at the FLOPs formula of their day: pt-xlnet's 1,444 steps rebuild that model)."""
    import json

    from ablations import REPO, recorded_steps

    results = tmp_path / "results.jsonl"
    results.write_text("\n".join(json.dumps(r) for r in (
        {"step": "pt-xlnet", "steps": 1444}, {"step": "ft-xlnet-mrpc-s1", "steps": 3}, {"step": "tok-t5"}, {})) + "\n\n")
    assert recorded_steps(results) == {"pt-xlnet": 1444}
    shipped = recorded_steps(REPO / "docs" / "ablations" / "results_f.jsonl")
    assert shipped["pt-xlnet"] == 1444 and shipped["pt-t5"] == 1156


def test_the_bart_arms_of_h_run_at_mlm_s_flops_or_a_share_of_them():
    """(h): `bart` (the recipe) at pt-mlm's FLOPs with its random control and every seed; the
    noising comparison (infilling only, token masking) beside it, or, below a share of 1, at
    that share with the recipe run again as bart_infill_perm; the noising arms' fine-tuning
    after the main arm's (a cut-short run loses them first, MRPC before SST-2)."""
    from argparse import Namespace

    from ablations import ARMS, BART, FLOPS_MATCHED, build_steps, select

    full = build_steps(Namespace(seeds=[1, 2]))
    assert "pt-bart_infill_perm" not in full
    assert {"pt-bart", "pt-bart_infill", "pt-bart_mask"} <= set(full)
    assert all(ARMS[arm][0] == "bart" and arm in FLOPS_MATCHED for arm in BART["noising"])
    assert full["pt-bart_mask"].options["settings"] == {"permute_sentences": 0.0, "mask_length": "token"}
    assert full["pt-bart"].deps == ("data-bart", "pt-mlm") and full["pt-bart_random"].deps == ("pt-bart",)
    shared = build_steps(Namespace(seeds=[1, 2], bart_noising_share=0.25))
    wanted = select(["h"], shared)
    assert {"tok-bart", "data-bart", "pt-mlm", "pt-bart_random", "pt-bart_infill_perm"} <= set(wanted)
    assert shared["pt-bart"].options["flops_share"] == 1.0
    assert {shared[f"pt-{arm}"].options["flops_share"] for arm in ("bart_infill_perm", "bart_infill", "bart_mask")} == {0.25}
    finetuned = [n for n in wanted if n.startswith("ft-")]
    main = [n for n in finetuned if n.startswith(("ft-bart-", "ft-bart_random-"))]
    assert len(main) == 2 * 2 * 2 and finetuned[:len(main)] == main  # the main arm and its control first
    noising = finetuned[len(main):]
    assert len(noising) == 3 * 2 * 2 and all("-sst2-" in n for n in noising[:6])


def test_bart_steps_are_set_by_the_padded_batch_shapes():
    """A BART step at (h)'s sizes costs ~3.4x an MLM step (the tied head scores all 128 target
    positions), less when infilling shortens the input."""
    from argparse import Namespace

    from ablations import pretrain_flops

    mlm = {**SIZES, "hidden_size": 128, "intermediate_size": 512, "vocab_size": 8192}
    bart = {"d_model": 128, "encoder_layers": 2, "decoder_layers": 2, "encoder_ffn_dim": 512, "decoder_ffn_dim": 512,
            "vocab_size": 8192}
    args = Namespace(batch_size=32, max_seq_length=128)
    masking = pretrain_flops("bart", bart, args, 106.6, [(128, 128)] * 2)
    infilling = pretrain_flops("bart", bart, args, 106.6, [(110, 128), (112, 128)])
    assert infilling < masking
    assert 3.3 < infilling / pretrain_flops("mlm", mlm, args, 119.2) < 3.5
