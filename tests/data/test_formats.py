"""Instance formats are registered: a new one is its class plus one line in
bertkit.data.formats.FORMATS, and `data build --format` and the build take it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bertkit.cli import main
from bertkit.data import formats
from bertkit.data.dataset import PretrainingDataset
from bertkit.data.formats.base import InstanceFormat

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "austen_small.txt"


class SentenceFormat(InstanceFormat):
    """One sentence per instance (a format made up for this test)."""

    name = "sentence"
    help = "one sentence per instance"

    def make(self, documents, recipe, rng, cls_id, sep_id, random_documents=None):
        room = recipe["max_seq_length"] - 2
        return [([cls_id, *sentence[:room], sep_id], 0, -100) for document in documents for sentence in document]


def test_the_registered_formats_are_the_build_choices(capsys):
    assert list(formats.FORMATS) == ["nsp", "packed", "sop", "xlnet"]
    assert all(formats.get_format(name).name == name for name in formats.FORMATS)
    with pytest.raises(SystemExit):
        main(["data", "build", "--help"])
    assert "nsp: BERT sentence pairs" in capsys.readouterr().out


def test_a_new_format_is_one_class_and_one_registry_line(monkeypatch, tmp_path):
    monkeypatch.setitem(formats.FORMATS, "sentence", f"{__name__}:SentenceFormat")
    tok = tmp_path / "tok"
    assert main(["tokenizer", "train", "--vocab-size", "300", "--output", str(tok), "--no-progress", str(FIXTURE)]) == 0
    assert main(["data", "build", "--tokenizer", str(tok), "--format", "sentence", "--max-seq-length", "32",
                 "--workers", "1", "--no-progress", "--output", str(tmp_path / "data"), str(FIXTURE)]) == 0
    data = PretrainingDataset.open(tmp_path / "data", "train")
    assert data.info.instance_format == "sentence" and len(data) > 100
    assert all(len(data[i]["input_ids"]) <= 32 and data[i]["next_sentence_label"] == -100 for i in range(len(data)))
