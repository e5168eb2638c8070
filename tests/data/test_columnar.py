"""Parquet and Arrow in: `tokenizer train`, `data build` and the task readers read .parquet
files, folders of them and datasets' save_to_disk folders, written here by pyarrow."""

from __future__ import annotations

import json

import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

from bertkit.cli import main  # noqa: E402
from bertkit.errors import BertkitError  # noqa: E402

SENTENCES = [f"The cat number {i} sat on the mat. A dog ran after it." for i in range(80)]


def write_parquet(path, columns: dict, row_group_size: int = 16) -> None:
    pq.write_table(pa.table(columns), path, row_group_size=row_group_size)


def write_save_to_disk(folder, columns: dict, shards: int = 2) -> None:
    """The layout `datasets.Dataset.save_to_disk` writes: Arrow IPC stream files + state + info."""
    folder.mkdir()
    table, names = pa.table(columns), []
    per = -(-table.num_rows // shards)
    for k in range(shards):
        name = f"data-{k:05d}-of-{shards:05d}.arrow"
        with pa.OSFile(str(folder / name), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            for batch in table.slice(k * per, per).to_batches(max_chunksize=10):
                writer.write_batch(batch)
        names.append({"filename": name})
    (folder / "state.json").write_text(json.dumps({"_data_files": names, "_fingerprint": "x", "_split": "train"}))
    (folder / "dataset_info.json").write_text(json.dumps({"features": {n: {"dtype": "string"} for n in columns}}))


def test_tokenizer_train_and_data_build_read_parquet_like_jsonl(tmp_path, capsys):
    jsonl = tmp_path / "corpus.jsonl"
    jsonl.write_text("".join(json.dumps({"body": s, "id": i}) + "\n" for i, s in enumerate(SENTENCES)))
    parquet = tmp_path / "corpus.parquet"
    write_parquet(parquet, {"id": list(range(len(SENTENCES))), "body": SENTENCES})
    for name, source in (("j", jsonl), ("p", parquet)):
        assert main(["tokenizer", "train", "--vocab-size", "100", "--text-field", "body", "--no-progress",
                     "--output", str(tmp_path / f"tok-{name}"), str(source)]) == 0
    assert (tmp_path / "tok-j" / "vocab.txt").read_text() == (tmp_path / "tok-p" / "vocab.txt").read_text()
    for name, source in (("j", jsonl), ("p", parquet)):
        assert main(["data", "build", "--tokenizer", str(tmp_path / "tok-j"), "--max-seq-length", "32",
                     "--text-field", "body", "--format", "packed", "--no-progress",
                     "--output", str(tmp_path / f"data-{name}"), str(source)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].split(" in ")[0] == out[-2].split(" in ")[0]  # the same instances and tokens


def test_a_folder_of_parquet_and_a_save_to_disk_folder(tmp_path):
    from bertkit.tokenization.train.corpus import CorpusSource, existing_files, iter_texts

    shards = tmp_path / "shards"
    shards.mkdir()
    write_parquet(shards / "part-0.parquet", {"text": SENTENCES[:40]})
    write_parquet(shards / "part-1.parquet", {"text": SENTENCES[40:]})
    saved = tmp_path / "saved"
    write_save_to_disk(saved, {"text": SENTENCES})
    for folder in (shards, saved):
        files = existing_files([folder])
        assert len(files) == 2
        assert list(iter_texts(CorpusSource(files))) == SENTENCES


def test_task_readers_take_columns_as_for_csv(tmp_path):
    from bertkit.tasks import classification

    labels = ["good" if i % 2 else "bad" for i in range(len(SENTENCES))]
    parquet = tmp_path / "train.parquet"
    write_parquet(parquet, {"review": SENTENCES, "label": labels, "stars": list(range(len(SENTENCES)))})
    examples = classification.read_examples(parquet, text_column="review", label_column="label")
    assert [(e.text, e.label) for e in examples] == list(zip(SENTENCES, labels))
    saved = tmp_path / "saved"
    write_save_to_disk(saved, {"sentence": SENTENCES, "label": [i % 2 for i in range(len(SENTENCES))]})
    glue = classification.read_examples(saved, glue_task="sst2")  # HF's glue/sst2 columns, int labels named
    assert glue[3].label == "positive" and glue[0].text == SENTENCES[0] and len(glue) == len(SENTENCES)


def test_a_missing_column_or_an_unreadable_file_is_one_line(tmp_path):
    from bertkit.tasks import classification

    parquet = tmp_path / "train.parquet"
    write_parquet(parquet, {"review": SENTENCES})
    with pytest.raises(BertkitError, match=r"train.parquet:1: no column 'text'.*'review'"):
        classification.read_examples(parquet, text_column="text", label_column=None)
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not really parquet")
    with pytest.raises(BertkitError) as caught:
        classification.read_examples(broken, text_column="text", label_column=None)
    assert str(caught.value).startswith(f"{broken}: cannot read as Parquet") and "\n" not in str(caught.value)
    from bertkit.tokenization.train.corpus import CorpusSource, iter_texts

    with pytest.raises(BertkitError, match=r"train.parquet: no column 'body' \(columns: 'review'\)"):
        list(iter_texts(CorpusSource((str(parquet),), text_field="body")))


def test_reading_is_batched_not_whole_file(tmp_path, monkeypatch):
    from bertkit import columnar

    parquet = tmp_path / "big.parquet"
    write_parquet(parquet, {"text": SENTENCES * 20}, row_group_size=64)
    sizes = []
    real = columnar._batches

    def spy(pa_module, path, columns):
        for batch in real(pa_module, path, columns):
            sizes.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(columnar, "BATCH_ROWS", 100)
    monkeypatch.setattr(columnar, "_batches", spy)
    assert sum(1 for _ in columnar.iter_column_texts(parquet, "text")) == 1600
    assert max(sizes) <= 100 and len(sizes) >= 16


def test_inference_commands_read_a_parquet_column(tmp_path):
    from bertkit.commands.inputs import read_texts

    parquet = tmp_path / "texts.parquet"
    write_parquet(parquet, {"id": [1, 2], "text": ["one text", "another"]})
    texts = read_texts([], str(parquet))
    assert [t.text for t in texts] == ["one text", "another"] and texts[1].source.endswith("texts.parquet:row 2")
