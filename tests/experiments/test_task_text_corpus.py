"""experiments/task_text_corpus.py: the tasks' training text as pre-training documents, and
never an evaluation row in it."""

from __future__ import annotations

import collections
import gzip
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
import task_text_corpus  # noqa: E402
from quality_table import SEED, cut_nsmc, split_indices  # noqa: E402


def test_documents_chunk_first_seen_lines():
    text = task_text_corpus.documents(["a b", " c ", "", "a b", "d", "e"], per_document=2)
    assert text == "a b\nc\n\nd\ne\n"
    assert task_text_corpus.documents(["x"], per_document=20) == "x\n"


def test_tsv_column_reads_past_a_bom_and_short_rows(tmp_path):
    path = tmp_path / "t.tsv"
    path.write_text("\ufeffsentence\tlabel\nfine film\t1\nshort\n", encoding="utf-8")
    assert task_text_corpus.tsv_column(path, "sentence") == ["fine film", "short"]
    assert task_text_corpus.tsv_column(path, "label") == ["1"]


def test_nsmc_reviews_are_the_split_less_its_held_out_rows(tmp_path):
    path = tmp_path / "nsmc.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("id\tdocument\tlabel\n" + "".join(f"{i}\treview {i}\t{i % 2}\n" for i in range(300)))
    kept = task_text_corpus.nsmc_train_reviews(40, path)
    train, held_out = split_indices(300, 40, SEED)  # cut_nsmc's split
    assert kept == [f"review {i}" for i in train] and len(kept) == 260
    assert not {f"review {i}" for i in held_out} & set(kept)


@pytest.mark.skipif(not task_text_corpus.NSMC_FILE.is_file(), reason="no ../shared/data/nsmc beside this checkout")
def test_nsmc_reviews_leave_out_the_evaluated_ones(tmp_path):
    all_rows = task_text_corpus.tsv_column(task_text_corpus.NSMC_FILE, "document")
    kept = task_text_corpus.nsmc_train_reviews(nsmc_held_out=1000)
    assert len(kept) == len(all_rows) - 1000
    (tmp_path / "data").mkdir()
    evaluated = cut_nsmc(tmp_path, train=100, held_out=1000)["dev"].read_text(encoding="utf-8").splitlines()[1:]
    evaluated_texts = [row.split("\t")[1] for row in evaluated]
    assert len(evaluated_texts) == 1000
    # an evaluated review's text is in the corpus only where another, unevaluated row repeats it
    other_rows = collections.Counter(all_rows) - collections.Counter(evaluated_texts)
    kept_set = set(kept)
    assert all(other_rows[text] > 0 for text in evaluated_texts if text in kept_set)
    assert sum(text in kept_set for text in evaluated_texts) < 50  # only the site's stock phrases repeat
