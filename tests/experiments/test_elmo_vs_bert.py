"""experiments/elmo_vs_bert.py: the biLM's planned batch shapes are the objective's own batches,
the steps' order and dependencies, the table's rows."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS.parent / "experiments"))
sys.path.insert(0, str(TESTS / "objectives"))
import elmo_vs_bert as driver  # noqa: E402
from _successor_data import build_data  # noqa: E402


def test_planned_batch_shapes_are_the_objectives_batches(tmp_path):
    from bertkit.data.dataset import PretrainingDataset
    from bertkit.model.elmo import ElmoBiLM
    from bertkit.objectives.bilm import BilmObjective, BilmSettings

    data = build_data(tmp_path, "wordpiece", "packed")
    settings = BilmSettings(softmax_words=50)
    train = PretrainingDataset.open(data)
    config = BilmObjective.model_config("elmo-tiny", train, {}, settings)
    objective = BilmObjective(ElmoBiLM(config), train, None, None, 0, settings=settings)
    batches = driver.sample_batches(len(train), 4, 3, seed=0)
    shapes = driver.bilm_batch_shapes(data, config.to_dict(), batches)
    for batch, (words, chars, predicted) in zip(batches, shapes):
        collated = objective.collate([objective.example(train, int(i), 0, 0) for i in batch])
        characters = collated["character_ids"]
        assert words == characters.shape[1]
        assert chars == objective.model.char_encoder.crop(characters).shape[-1]
        assert predicted == int((collated["next_word_ids"] != -100).sum() + (collated["previous_word_ids"] != -100).sum())
    one = driver.elmo_step_flops(config.to_dict(), shapes[:1], 4)
    assert one == driver.bilm_step_flops(config.to_dict(), 4, *shapes[0])


def test_steps_come_with_what_they_need_in_running_order():
    assert driver.needed(["ner-elmo_wall-s2"], [1, 2]) == ["tokenizer", "data", "pt-bert", "pt-elmo_wall",
                                                         "ner-elmo_wall-s2"]
    assert driver.needed(["ner-random_elmo-s1"], [1]) == ["tokenizer", "data", "pt-bert", "pt-elmo_flops",
                                                        "random-elmo", "ner-random_elmo-s1"]
    names = driver.needed([], [1, 2])
    assert names.index("ner-random_elmo-s1") < names.index("ner-bert_finetune-s2")  # whole seeds first
    with pytest.raises(SystemExit, match="unknown step 'ner-gpt-s1'"):
        driver.needed(["ner-gpt-s1"], [1])


def test_table_rows_summarise_the_seeds_of_each_arm():
    results = {
        "pt-bert": {"step": "pt-bert", "steps": 1000, "tokens_seen": 3.4e6, "flops_total": 1.45e13, "seconds": 390.0,
                    "final_eval": {"eval_mlm_accuracy": 12.34, "eval_mlm_perplexity": 321.0}},
        "ner-bert_finetune-s1": {"step": "ner-bert_finetune-s1", "arm": "bert_finetune", "seed": 1, "f1": 60.0},
        "ner-bert_finetune-s2": {"step": "ner-bert_finetune-s2", "arm": "bert_finetune", "seed": 2, "f1": 62.0},
        "ner-random_elmo-s1": {"step": "ner-random_elmo-s1", "arm": "random_elmo", "seed": 1, "f1": 50.0},
    }
    rows = driver.table_rows(results)
    assert len(rows) == 2 + 3  # header, rule; fine-tuned and features of pt-bert, the random biLM
    assert rows[2] == ("| BERT (MLM), fine-tuned | `pt-bert` | 1000 | 3.40 M | 14.50 T | 6.5 min | MLM acc 12.3%, ppl 321 | "
                       f"61.0 ± {np.std([60.0, 62.0], ddof=1):.1f} (60.0, 62.0) |")
    assert rows[3].endswith("| - |")  # the features arm has not run yet
    assert rows[4].startswith("| ELMo, random init, features | none (`random-elmo`) | 0 |") and rows[4].endswith("| 50.0 (50.0) |")
