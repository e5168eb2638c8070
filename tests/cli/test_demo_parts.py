"""The demo's parts that decide its outcome: held-out examples, the time split, the summary line."""

from __future__ import annotations

from pathlib import Path

from bertkit.demos import downstream
from bertkit.demos.fill_mask_examples import AUSTEN_EXAMPLES, MASK, held_out_corpus


def test_the_embedded_examples_are_left_out_of_the_training_text(tmp_path):
    from bertkit.demos.pretraining import embedded_corpus
    from bertkit.textio import iter_lines

    corpus = tmp_path / "corpus.txt"
    removed = held_out_corpus([embedded_corpus()], AUSTEN_EXAMPLES, corpus)
    text = corpus.read_text(encoding="utf-8")
    assert removed == len(AUSTEN_EXAMPLES)  # one paragraph each
    assert not any(example.sentence in text for example in AUSTEN_EXAMPLES)
    assert all(MASK in example.text and example.text.count(MASK) == 1 for example in AUSTEN_EXAMPLES)
    original = sum(1 for _, line in iter_lines(embedded_corpus()) if line.strip())
    assert sum(1 for line in text.splitlines() if line.strip()) == original - removed


def test_the_downstream_arms_get_what_the_measured_speed_affords(monkeypatch):
    monkeypatch.setattr(downstream, "encode", lambda model_dir, texts: None)
    clock = iter([0.0, 1.0])  # 64 sentences in one second
    monkeypatch.setattr(downstream.time, "perf_counter", lambda: next(clock))
    plan = downstream.plan(60.0, Path("m"), "M")
    dev = len(downstream.read_task(downstream.DEV_ASSET)[0])
    assert dev == 872 and plan.texts_per_second == 64.0
    assert plan.train_rows == max(downstream.MIN_TRAIN, int(60 * 64 / 2 - dev))
    assert abs(plan.expected_seconds - 2 * (plan.train_rows + dev) / 64) < 1e-9


def test_the_probe_separates_informative_features_from_noise():
    import numpy as np

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    informative = rng.normal(size=(400, 8)) + y[:, None] * 1.5
    noise = rng.normal(size=(400, 8))
    good = downstream.probe_accuracy(informative[:300], y[:300], informative[300:], y[300:], seed=0)
    chance = downstream.probe_accuracy(noise[:300], y[:300], noise[300:], y[300:], seed=0)
    assert good > 90 and chance < 70


def test_the_summary_line_is_machine_readable():
    import re

    line = downstream.summary_line(81.234, 55.0)
    assert line == "downstream: SST-2 dev accuracy pre-trained 81.2 vs random init 55.0"
    assert re.fullmatch(r"downstream: \S+ dev \S+ pre-trained [\d.]+ vs random init [\d.]+", line)


def test_an_unknown_preset_fails_before_any_work(tmp_path, capsys):
    from bertkit.cli import main

    assert main(["demo", "--preset", "nosuch", "--output-dir", str(tmp_path / "demo")]) == 1
    assert "--preset 'nosuch': unknown; choose one of tiny" in capsys.readouterr().err
    assert not (tmp_path / "demo").exists()
