"""experiments/quality_table.py's Korean T5 helpers: the pre-training FLOPs that set the
T5's step count (against torch's FLOP counter on the real models), the invalid-output count
of a text-to-text run, and the random control written for a T5 checkpoint."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
from quality_table import (  # noqa: E402
    NSMC_LABEL_WORDS,
    invalid_outputs,
    sequence_multiply_adds,
    t5_steps_for_bert_flops,
    write_random_model,
)

from bertkit import BertConfig, BertForPreTraining, T5Config, T5ForConditionalGeneration  # noqa: E402


def counted_multiply_adds(model, **inputs) -> float:
    """Multiply-adds of one forward as torch.utils.flop_counter counts them (no_grad: the
    fused MLM / T5 head does its backward matmuls in the forward when grad is on)."""
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(**inputs)
    return counter.get_total_flops() / 2


@pytest.mark.parametrize("kind", ["bert", "t5"])
def test_sequence_multiply_adds_match_the_flop_counter(kind):
    torch.manual_seed(0)
    vocab, seq, targets = 1000, 64, 13
    ids = torch.randint(5, vocab, (1, seq))
    if kind == "bert":  # no labels: the MLM head at every position
        config = BertConfig.from_preset("tiny", vocab_size=vocab)
        counted = counted_multiply_adds(BertForPreTraining(config).eval(), input_ids=ids,
                                        attention_mask=torch.ones_like(ids))
        expected = sequence_multiply_adds(config, "bert", seq, seq)
        attention = config.num_hidden_layers * 2 * seq * seq * config.hidden_size
    else:
        config = T5Config.from_preset("t5-tiny", vocab_size=vocab)
        counted = counted_multiply_adds(T5ForConditionalGeneration(config).eval(), input_ids=ids,
                                        attention_mask=torch.ones_like(ids),
                                        labels=torch.randint(5, vocab, (1, targets)))
        expected = sequence_multiply_adds(config, "t5", seq, targets)
        inner = config.num_heads * config.d_kv
        attention = 2 * inner * (config.num_layers * seq * seq + config.num_decoder_layers * targets * (targets + seq))
    # the counter sees the weight matmuls (and the pooler / NSP head, < 0.1%), the attention
    # scores only where they run as bmm
    assert expected - attention <= counted <= expected * 1.001


def test_t5_steps_for_bert_flops():
    # Korean BERT: tiny, 16k vocabulary, 800 steps -> t5-tiny with the same vocabulary
    steps = t5_steps_for_bert_flops(800, 16000, "tiny", "t5-tiny")
    bert = sequence_multiply_adds(BertConfig.from_preset("tiny", vocab_size=16000), "bert", 128, 19)
    t5 = sequence_multiply_adds(T5Config.from_preset("t5-tiny", vocab_size=16000), "t5", 128, 29)
    assert steps == 482 and abs(steps * t5 - 800 * bert) <= t5 / 2


def test_invalid_outputs_counts_texts_that_are_no_label_word(tmp_path):
    path = tmp_path / "dev_predictions.jsonl"
    rows = [("부정", "부정"), ("긍정", " 긍정 "), ("긍정", "긍정적"), ("부정", "")]
    path.write_text("".join(json.dumps({"source": "s", "target": t, "generated_text": g}, ensure_ascii=False) + "\n"
                            for t, g in rows), encoding="utf-8")
    assert invalid_outputs(path, NSMC_LABEL_WORDS.values()) == 2


def test_write_random_model_keeps_a_t5_checkpoints_class_and_config(tmp_path):
    config = T5Config.from_preset("t5-tiny", vocab_size=300)
    torch.manual_seed(1)
    T5ForConditionalGeneration(config).save_pretrained(tmp_path / "trained")
    (tmp_path / "trained" / "tokenizer_config.json").write_text("{}")
    write_random_model(tmp_path / "trained", tmp_path / "random", seed=42)
    random = T5ForConditionalGeneration.from_pretrained(tmp_path / "random")
    trained = T5ForConditionalGeneration.from_pretrained(tmp_path / "trained")
    assert (tmp_path / "random" / "tokenizer_config.json").exists()
    assert random.config.to_dict() == trained.config.to_dict()
    assert not torch.equal(random.lm_head.weight, trained.lm_head.weight)


def test_write_random_model_of_a_pre_ln_bert_saved_in_transformers_layout(tmp_path):
    config = BertConfig.from_preset("tiny", vocab_size=300, pre_layer_norm=True)
    torch.manual_seed(1)
    BertForPreTraining(config).save_pretrained(tmp_path / "trained")  # config.json names RobertaPreLayerNormForMaskedLM
    write_random_model(tmp_path / "trained", tmp_path / "random", seed=42)
    random = BertForPreTraining.from_pretrained(tmp_path / "random")
    trained = BertForPreTraining.from_pretrained(tmp_path / "trained")
    assert random.config.to_dict() == trained.config.to_dict() and random.config.pre_layer_norm
    assert not torch.equal(random.bert.embeddings.word_embeddings.weight, trained.bert.embeddings.word_embeddings.weight)


def test_the_korean_bart_is_built_in_kobarts_layout_and_fine_tuned_both_ways(tmp_path):
    from quality_table import main, steps

    args = argparse.Namespace(ko_lr=1e-4, minilm_lr=5e-5, conll_lr=1e-4, conll_epochs=1, conll_batch_size=16,
                              conll_sentences=10, squad_lr=1e-4, squad_epochs=1, squad_train=1, squad_dev=1,
                              mc_lr=5e-5, mc_epochs=1, piqa_held_out=1, piqa_train=1, csqa_held_out=1, csqa_train=1,
                              nsmc_train=10, nsmc_held_out=5, minilm_korean_fraction=0.25, klue_nli_held_out=1,
                              klue_sts_held_out=1, t5_lr=1e-3, bart_lr=3e-5)
    table = steps(args)
    assert table["nsmc-bart-ko"].finetune[0] == "text2text" and "3e-05" in table["nsmc-bart-ko"].finetune
    assert table["nsmc-bartcls-ko"].finetune[0] == "classify" and table["nsmc-bartcls-random"].model == "bart-random"
    assert {"ko-bart-tokenizer", "ko-bart-data", "ko-bart-pretrain", "ko-bart-random"} <= set(table)
    assert {"ko-gpt-pretrain", "ko-gpt-random"} <= set(table) and table["nsmc-gpt-ko"].finetune[0] == "classify"
    # the tokenizer step's command: KoBART's specials (a tiny corpus, so it runs in a second)
    corpus = tmp_path / "ko.txt"
    corpus.write_text("이 영화 정말 좋다.\n배우들 연기가 별로였다.\n" * 50, encoding="utf-8")
    main(["--work-dir", str(tmp_path / "work"), "--ko-vocab", "400", "--ko-corpus", str(corpus), "--model", "none",
          "run", "ko-bart-tokenizer"])
    vocab = json.loads((tmp_path / "work" / "ko-bart" / "tok" / "vocab.json").read_text(encoding="utf-8"))
    assert [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])[:7]] == \
        ["<s>", "</s>", "<usr>", "<pad>", "<sys>", "<unk>", "<mask>"]  # KoBART's ids 0-6
    recorded = json.loads((tmp_path / "work" / "results.jsonl").read_text().splitlines()[0])
    assert "--layout kobart" in recorded["command"] and "--algorithm bbpe" in recorded["command"]


def test_write_random_model_keeps_a_bart_checkpoints_class_and_config(tmp_path):
    from bertkit import BartConfig, BartForConditionalGeneration

    config = BartConfig.from_preset("bart-tiny", vocab_size=300)
    torch.manual_seed(1)
    BartForConditionalGeneration(config).save_pretrained(tmp_path / "trained")
    write_random_model(tmp_path / "trained", tmp_path / "random", seed=42)
    random = BartForConditionalGeneration.from_pretrained(tmp_path / "random")
    trained = BartForConditionalGeneration.from_pretrained(tmp_path / "trained")
    assert random.config.to_dict() == trained.config.to_dict()
    assert not torch.equal(random.model.shared.weight, trained.model.shared.weight)
