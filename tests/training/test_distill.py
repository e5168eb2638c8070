"""Distillation maths and student construction: soft targets with temperature and T^2 on
hand-made logits, the cosine / hidden / attention losses, which teacher layer each student
layer starts from, weight copying, and the one-line errors on impossible students."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from bertkit import BertConfig, BertForPreTraining
from bertkit.errors import ConfigError
from bertkit.distillation import (
    attention_layer_map,
    attention_mse,
    cosine_loss,
    hidden_layer_map,
    hidden_mse,
    init_student_from_teacher,
    soft_target_loss,
    student_config,
    student_layer_sources,
)


def test_soft_target_loss_by_hand():
    student = torch.tensor([[0.0, 0.0]])
    teacher = torch.tensor([[math.log(3.0), 0.0]])  # p_t = (3/4, 1/4) at T = 1
    kl = 0.75 * math.log(0.75 / 0.5) + 0.25 * math.log(0.25 / 0.5)
    assert soft_target_loss(student, teacher, 1.0).item() == pytest.approx(kl, rel=1e-6)
    # T = 2: p_t = softmax(log(3) / 2, 0) = (sqrt 3, 1) / (1 + sqrt 3); the student stays uniform; times T^2 = 4
    p = math.sqrt(3) / (1 + math.sqrt(3))
    kl2 = p * math.log(p / 0.5) + (1 - p) * math.log((1 - p) / 0.5)
    assert soft_target_loss(student, teacher, 2.0).item() == pytest.approx(4 * kl2, rel=1e-6)
    # "ce" = KL + the teacher's entropy (same gradient)
    entropy = -(p * math.log(p) + (1 - p) * math.log(1 - p))
    assert soft_target_loss(student, teacher, 2.0, "ce").item() == pytest.approx(4 * (kl2 + entropy), rel=1e-6)
    assert soft_target_loss(teacher, teacher, 3.0).item() == pytest.approx(0.0, abs=1e-7)


def test_soft_target_loss_sums_rows_like_kl_div():
    generator = torch.Generator().manual_seed(0)
    s, t = torch.randn(5, 7, generator=generator), torch.randn(5, 7, generator=generator)
    reference = F.kl_div(F.log_softmax(s / 3, -1), F.log_softmax(t / 3, -1), log_target=True, reduction="sum") * 9
    torch.testing.assert_close(soft_target_loss(s, t, 3.0), reference)
    # the T^2 factor keeps the gradient's scale: d/ds at large T ~ (s - t) / (K T^0) up to the centring
    s.requires_grad_(True)
    soft_target_loss(s, t, 50.0).backward()
    centred = lambda x: x - x.mean(-1, keepdim=True)  # noqa: E731
    torch.testing.assert_close(s.grad, (centred(s.detach()) - centred(t)) / 7, atol=2e-3, rtol=0.05)


def test_cosine_loss_by_hand():
    student = torch.tensor([[[1.0, 0.0], [1.0, 1.0], [5.0, -3.0]]])
    teacher = torch.tensor([[[0.0, 1.0], [2.0, 2.0], [1.0, 1.0]]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])  # the third token is padding
    assert cosine_loss(student, teacher, mask).item() == pytest.approx(1.0 + 0.0, abs=1e-6)
    opposite = cosine_loss(torch.tensor([[[1.0, 0.0]]]), torch.tensor([[[-2.0, 0.0]]]), torch.ones(1, 1))
    assert opposite.item() == pytest.approx(2.0)


def test_hidden_and_attention_mse_by_hand():
    student = torch.tensor([[[1.0, 2.0], [0.0, 0.0]]])
    teacher = torch.tensor([[[1.0, 4.0], [9.0, 9.0]]])
    mask = torch.tensor([[1.0, 0.0]])
    assert hidden_mse(student, teacher, mask).item() == pytest.approx((0 + 4) / 2)
    s_att = torch.tensor([[[[0.5, 0.5], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]]])  # (1, 2 heads, 2, 2)
    t_att = torch.tensor([[[[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [1.0, 0.0]]]])
    # query 0: head 0 sums 0.25 + 0.25 = 0.5, head 1 sums 0 -> mean 0.25; query 1 is masked
    assert attention_mse(s_att, t_att, mask).item() == pytest.approx(0.25)
    assert attention_mse(s_att, t_att, torch.ones(1, 2)).item() == pytest.approx(0.25 + 1.0)


def test_layer_selection():
    assert student_layer_sources(12, 6) == [0, 2, 4, 6, 8, 10]  # every other layer
    assert student_layer_sources(6, 3) == [0, 2, 4]
    assert student_layer_sources(6, 4) == [0, 1, 3, 4]  # evenly spaced when N != L / 2
    assert student_layer_sources(6, 2) == [0, 3]
    assert student_layer_sources(4, 4) == [0, 1, 2, 3]
    assert student_layer_sources(5, 1) == [0]
    assert hidden_layer_map(6, 3) == [(0, 0), (1, 2), (2, 4), (3, 6)]  # embeddings and last layers meet
    assert attention_layer_map(6, 3) == [(0, 1), (1, 3), (2, 5)]
    assert attention_layer_map(4, 4) == [(0, 0), (1, 1), (2, 2), (3, 3)]


def _tiny(layers: int, hidden: int = 32, vocab: int = 90) -> BertConfig:
    return BertConfig.from_preset("tiny", vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                                  num_attention_heads=2, intermediate_size=2 * hidden, max_position_embeddings=32)


def test_init_student_from_every_other_teacher_layer():
    torch.manual_seed(0)
    teacher = BertForPreTraining(_tiny(4))
    student = BertForPreTraining(student_config(teacher.config, 2, {}, "teacher"))
    fresh = init_student_from_teacher(student, teacher, student_layer_sources(4, 2))
    assert fresh == []
    t_state, s_state = teacher.state_dict(), student.state_dict()
    for key, value in s_state.items():
        source = key.replace("encoder.layer.1.", "encoder.layer.2.")  # student 0 <- 0, student 1 <- 2
        torch.testing.assert_close(value, t_state[source], rtol=0, atol=0)
    assert len(student.bert.encoder.layer) == 2

    # a narrower student copies nothing of the encoder: it starts from BERT's initialisation
    narrow = BertForPreTraining(student_config(teacher.config, 2, {"hidden_size": 16, "intermediate_size": 32}, "t"))
    fresh = init_student_from_teacher(narrow, teacher, student_layer_sources(4, 2))
    assert "bert.embeddings.word_embeddings.weight" in fresh and "bert.encoder.layer.0.attention.self.query.weight" in fresh
    assert "bert.embeddings.token_type_embeddings.weight" in fresh


def test_student_errors_name_the_field():
    teacher = _tiny(4)
    with pytest.raises(ConfigError, match=r"student_layers' \(6\): the student is deeper than the teacher \(4 layers in T/config.json\)"):
        student_config(teacher, 6, {}, "T")
    with pytest.raises(ConfigError, match=r"student.hidden_size' \(64\): the student is wider than the teacher"):
        student_config(teacher, 2, {"hidden_size": 64, "intermediate_size": 128}, "T")
    with pytest.raises(ConfigError, match=r"student.vocab_size' \(50\) must equal the teacher's vocab_size \(90"):
        student_config(teacher, 2, {"vocab_size": 50}, "T")
    with pytest.raises(ConfigError, match="student_layers' must be at least 1"):
        student_config(teacher, 0, {}, "T")
    assert student_config(teacher, None, {}, "T").num_hidden_layers == 2  # default: half
