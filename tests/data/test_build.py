"""The data build end to end: shards, determinism, jobs, resume, static masking, real
text in three languages/formats, `PretrainingDataset`, and the `bertkit data` CLI.

Most tests use a synthetic corpus whose words name their document and sentence
("D3S7" = document 3, sentence 7), with a WordPiece vocabulary of exactly those words,
so every token of an instance says where it came from.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np
import pytest

from bertkit.cli import main
from bertkit.data.build import BuildOptions, SliceBuilder, build_dataset
from bertkit.data.dataset import PretrainingDataset
from bertkit.errors import BertkitError
from bertkit.tokenization import Tokenizer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
NUM_DOCS, MAX_SENTENCES, WORDS = 60, 24, 4
MAX_LEN = 32


def marker(d: int, j: int) -> str:
    return f"D{d}S{j}"


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory) -> Path:
    vocab = SPECIALS + ["."] + [marker(d, j).lower() for d in range(NUM_DOCS) for j in range(MAX_SENTENCES)]
    path = tmp_path_factory.mktemp("tok")
    Tokenizer.from_wordpiece_vocab(vocab).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[str]:
    """Two files; documents of 2..24 sentences of WORDS markers and a period; a paragraph
    (line) holds 1-3 sentences, so the splitter has work to do."""
    rng = random.Random(0)
    root = tmp_path_factory.mktemp("corpus")
    files = []
    for part, docs in enumerate([range(0, 35), range(35, NUM_DOCS)]):
        paragraphs_of_docs = []
        for d in docs:
            sentences = [" ".join([marker(d, j)] * WORDS) + "." for j in range(rng.randint(2, MAX_SENTENCES))]
            lines, i = [], 0
            while i < len(sentences):
                k = rng.randint(1, 3)
                lines.append(" ".join(sentences[i : i + k]))
                i += k
            paragraphs_of_docs.append("\n".join(lines))
        path = root / f"part{part}.txt" if part == 0 else root / f"part{part}.txt.gz"
        text = "\n\n".join(paragraphs_of_docs) + "\n"
        path.write_bytes(gzip.compress(text.encode()) if path.suffix == ".gz" else text.encode())
        files.append(str(path))
    return files


OPTIONS = BuildOptions(max_seq_length=MAX_LEN, slice_chars=1500, eval_fraction=0.05)


def build(corpus, tok_dir, out, options=OPTIONS, **kwargs):
    return build_dataset(corpus, tok_dir, out, options, workers=kwargs.pop("workers", 1), **kwargs)


def origins(tokenizer, ids) -> list[tuple[int, int]]:
    """(document, sentence) of each marker token in ids, in order (specials and "." skipped)."""
    out = []
    for token in tokenizer.convert_ids_to_tokens([int(i) for i in ids]):
        if token.startswith("d"):
            d, j = token[1:].split("s")
            out.append((int(d), int(j)))
    return out


def shard_files(directory: Path) -> dict[str, bytes]:
    """Every file of every shard (and the job record's slice count) by relative path."""
    files = {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.glob("*-*/*")) if p.is_file()}
    return {k: v for k, v in files.items() if not k.startswith("tokenizer")}


def check_layout(item: dict, max_len: int, cls_id: int, sep_id: int) -> int:
    """Checks [CLS] A [SEP] B [SEP] and token types; returns where B starts."""
    ids, types = item["input_ids"], item["token_type_ids"]
    assert ids.dtype == np.int64 and types.dtype == np.int64 and ids.shape == types.shape
    assert len(ids) <= max_len and ids[0] == cls_id and ids[-1] == sep_id
    seps = np.flatnonzero(ids == sep_id).tolist()
    assert len(seps) == 2
    b = seps[0] + 1
    assert types[:b].tolist() == [0] * b and types[b:].tolist() == [1] * (len(ids) - b)
    assert 1 < b < len(ids) - 1
    return b


@pytest.fixture(scope="module")
def nsp_dir(corpus, tok_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("nsp")
    build(corpus, tok_dir, out, workers=2)
    return out


def test_nsp_instances_continue_or_come_from_another_document(nsp_dir):
    train = PretrainingDataset.open(nsp_dir)
    tokenizer = train.tokenizer()
    info = train.info
    assert (info.instance_format, info.max_seq_length, info.masking, info.dupe_factor) == ("nsp", MAX_LEN, "dynamic", 1)
    assert info.num_shards > 3 and len(train) == info.num_instances > 150
    labels = []
    for index in range(len(train)):
        item = train[index]
        b = check_layout(item, MAX_LEN, tokenizer.cls_token_id, tokenizer.sep_token_id)
        a_origin, b_origin = origins(tokenizer, item["input_ids"][:b]), origins(tokenizer, item["input_ids"][b:])
        assert len({d for d, _ in a_origin}) == 1 and len({d for d, _ in b_origin}) == 1
        if item["next_sentence_label"] == 0:  # IsNext: B starts at the sentence after A's last
            assert b_origin[0] == (a_origin[-1][0], a_origin[-1][1] + 1)
        else:
            assert item["next_sentence_label"] == 1 and b_origin[0][0] != a_origin[0][0]
        labels.append(item["next_sentence_label"])
    assert 0.4 < np.mean(labels) < 0.6
    assert train[-1]["input_ids"].tolist() == train[len(train) - 1]["input_ids"].tolist()
    with pytest.raises(IndexError):
        train[len(train)]


def test_eval_documents_are_held_out(nsp_dir):
    train, held = PretrainingDataset.open(nsp_dir), PretrainingDataset.open(nsp_dir, "eval")
    tokenizer = train.tokenizer()

    def a_documents(dataset):
        docs = set()
        for i in range(len(dataset)):
            item = dataset[i]
            b = int(np.flatnonzero(item["token_type_ids"])[0])
            docs |= {d for d, _ in origins(tokenizer, item["input_ids"][:b])}
        return docs

    assert len(held) > 0 and held.info.split == "eval"
    train_docs, eval_docs = a_documents(train), a_documents(held)
    assert eval_docs and not eval_docs & train_docs
    assert len(train_docs | eval_docs) == NUM_DOCS  # every document is used


def test_same_seed_same_bytes_for_any_worker_count(corpus, tok_dir, nsp_dir, tmp_path):
    build(corpus, tok_dir, tmp_path / "one", workers=1)
    assert shard_files(tmp_path / "one") == shard_files(nsp_dir)  # nsp_dir was built with 2 workers
    other = BuildOptions(**{**OPTIONS.__dict__, "seed": 7})
    build(corpus, tok_dir, tmp_path / "seed7", other)
    assert shard_files(tmp_path / "seed7") != shard_files(nsp_dir)


def test_jobs_fill_one_directory(corpus, tok_dir, nsp_dir, tmp_path):
    out = tmp_path / "jobs"
    first = build(corpus, tok_dir, out, num_jobs=2, job_index=1)
    assert first.built == (first.num_slices) // 2
    with pytest.raises(BertkitError, match="incomplete.*--shard-index 0 of --num-shards 2"):
        PretrainingDataset.open(out)
    build(corpus, tok_dir, out, num_jobs=2, job_index=0)
    assert shard_files(out) == shard_files(nsp_dir)
    jobs, single = PretrainingDataset.open(out), PretrainingDataset.open(nsp_dir)
    assert len(jobs) == len(single) and jobs.info == single.info
    for i in range(0, len(jobs), 7):
        assert jobs[i]["input_ids"].tolist() == single[i]["input_ids"].tolist()


def test_an_interrupted_build_resumes(corpus, tok_dir, nsp_dir, tmp_path, monkeypatch):
    out = tmp_path / "resumed"
    original = SliceBuilder.__call__

    def crash_on_slice_3(self, piece):
        if piece.index == 3:
            (out / ".tmp-train-00003-deadbeef").mkdir()  # what a kill mid-write leaves
            raise KeyboardInterrupt
        return original(self, piece)

    monkeypatch.setattr(SliceBuilder, "__call__", crash_on_slice_3)
    with pytest.raises(KeyboardInterrupt):
        build(corpus, tok_dir, out)
    assert sorted(p.name for p in out.glob("train-*")) == ["train-00000", "train-00001", "train-00002"]
    with pytest.raises(BertkitError, match="has not finished"):
        PretrainingDataset.open(out)
    monkeypatch.setattr(SliceBuilder, "__call__", original)
    result = build(corpus, tok_dir, out)
    assert result.resumed == 3 and result.built == result.num_slices - 3
    assert shard_files(out) == shard_files(nsp_dir)
    assert not list(out.glob(".tmp-*"))


def test_static_masking_is_the_dynamic_data_masked(corpus, tok_dir, tmp_path):
    base = {**OPTIONS.__dict__, "dupe_factor": 3, "eval_fraction": 0.0}
    build(corpus, tok_dir, tmp_path / "static", BuildOptions(**{**base, "masking": "static", "max_predictions_per_seq": 4}))
    build(corpus, tok_dir, tmp_path / "dynamic", BuildOptions(**base))
    static, dynamic = PretrainingDataset.open(tmp_path / "static"), PretrainingDataset.open(tmp_path / "dynamic")
    assert static.info.masking == "static" and static.info.max_predictions_per_seq == 4
    assert len(static) == len(dynamic)
    tokenizer = static.tokenizer()
    chosen = candidates = masked = 0
    for i in range(len(static)):
        s, d = static[i], dynamic[i]
        assert "labels" not in d and s["labels"].shape == s["input_ids"].shape
        picked = s["labels"] != -100
        restored = np.where(picked, s["labels"], s["input_ids"])
        assert restored.tolist() == d["input_ids"].tolist()  # the same instance, masked
        assert s["token_type_ids"].tolist() == d["token_type_ids"].tolist()
        assert s["next_sentence_label"] == d["next_sentence_label"]
        assert 1 <= picked.sum() <= 4
        chosen += picked.sum()
        masked += (s["input_ids"][picked] == tokenizer.mask_token_id).sum()
        candidates += len(d["input_ids"]) - 3
    assert 0.7 < masked / chosen < 0.9  # 80% of the chosen positions become [MASK]
    assert chosen / candidates < 0.151  # 15%, capped at 4 per sequence


def test_packed_and_sop_builds(corpus, tok_dir, tmp_path):
    build(corpus, tok_dir, tmp_path / "packed", BuildOptions(**{**OPTIONS.__dict__, "instance_format": "packed"}))
    packed = PretrainingDataset.open(tmp_path / "packed")
    tokenizer = packed.tokenizer()
    lengths = []
    for i in range(len(packed)):
        item = packed[i]
        assert item["next_sentence_label"] == -100 and not item["token_type_ids"].any()
        assert item["input_ids"][0] == tokenizer.cls_token_id and item["input_ids"][-1] == tokenizer.sep_token_id
        lengths.append(len(item["input_ids"]))
    assert max(lengths) <= MAX_LEN and np.mean(lengths) > 0.8 * MAX_LEN  # packed full
    build(corpus, tok_dir, tmp_path / "sop", BuildOptions(**{**OPTIONS.__dict__, "instance_format": "sop"}))
    sop = PretrainingDataset.open(tmp_path / "sop")
    for i in range(len(sop)):
        item = sop[i]
        b = check_layout(item, MAX_LEN, tokenizer.cls_token_id, tokenizer.sep_token_id)
        first, second = origins(tokenizer, item["input_ids"][:b]), origins(tokenizer, item["input_ids"][b:])
        if item["next_sentence_label"] == 1:
            first, second = second, first
        assert second[0] == (first[-1][0], first[-1][1] + 1)  # consecutive, from one document


def test_real_text_with_a_byte_level_tokenizer(tmp_path):
    """Korean reviews (NSMC), WikiText and Austen, JSONL; a byte-level BPE tokenizer trained here (<s> </s> roles)."""
    from bertkit.tokenization.train import TrainOptions, train_tokenizer

    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("\n".join(json.dumps({"body": f"Document {i}. It has two sentences."}) for i in range(4)) + "\n")
    files = [FIXTURES / "nsmc_small.txt.gz", FIXTURES / "wikitext_small.raw", FIXTURES / "austen_small.txt"]
    train_tokenizer(files, tmp_path / "bbpe", TrainOptions(algorithm="bbpe", vocab_size=600, workers=1, show_progress=False))
    for name, inputs, field in [("mixed", files, "text"), ("jsonl", [jsonl], "body")]:
        options = BuildOptions(max_seq_length=64, text_field=field, eval_fraction=0.1)
        result = build_dataset(inputs, tmp_path / "bbpe", tmp_path / name, options, workers=1)
        data = PretrainingDataset.open(tmp_path / name)
        tokenizer = data.tokenizer()
        assert tokenizer.cls_token == "<s>" and data.info.cls_token_id == tokenizer.cls_token_id
        assert data.info.sep_token_id == tokenizer.sep_token_id and data.info.pad_token_id == tokenizer.pad_token_id
        assert len(data) == result.train_instances > 0
        for i in range(len(data)):
            check_layout(data[i], 64, tokenizer.cls_token_id, tokenizer.sep_token_id)
    korean = PretrainingDataset.open(tmp_path / "mixed")
    text = " ".join(tokenizer.decode(korean[i]["input_ids"], skip_special_tokens=False) for i in range(len(korean)))
    assert "영화" in text and "homarus" in text and "emma" in text  # all three sources, lower-cased


# ---------------------------------------------------------------------- CLI


def cli(*args: str) -> int:
    return main(["data", *map(str, args)])


def test_cli_build_and_info(corpus, tok_dir, tmp_path, capsys):
    out = tmp_path / "data"
    assert cli("build", "--tokenizer", tok_dir, "--max-seq-length", MAX_LEN, "--output", out, "--no-progress",
               "--format", "sop", "--masking", "static", "--dupe-factor", 2, "--whole-word-masking", *corpus) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("sop: ") and "train instances" in printed
    data = PretrainingDataset.open(out)
    assert (data.info.instance_format, data.info.dupe_factor, data.info.whole_word_masking) == ("sop", 2, True)
    assert data.info.max_predictions_per_seq == round(0.15 * MAX_LEN)
    assert cli("info", out) == 0
    info = capsys.readouterr().out
    assert "format         sop, max_seq_length 32" in info and f"{len(data):,} instances" in info
    assert "WordPiece" in info


@pytest.mark.parametrize("case", ["empty", "one_document", "bad_utf8", "no_tokenizer", "shard_index", "dynamic_wwm"])
def test_cli_errors(case, corpus, tok_dir, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["--tokenizer", tok_dir, "--output", out, "--no-progress"]
    path = tmp_path / "input.txt"
    if case == "empty":
        path.write_text("\n\n   \n")
        expected = "no text in .*input.txt: only empty documents .*, nothing can be built"
    elif case == "one_document":
        path.write_text("D1S1 D1S1. D1S2 D1S2.\nD1S3.\n")
        expected = "nsp needs at least 2 documents .* use --format packed or --format sop"
    elif case == "bad_utf8":
        path.write_bytes(b"D1S1.\n\nD2S1 \xff\n")
        expected = r"input.txt:3: not valid UTF-8"
    elif case == "no_tokenizer":
        path.write_text("D1S1.\n")
        args[1] = tmp_path / "missing"
        expected = "missing: no such tokenizer directory"
    elif case == "shard_index":
        path.write_text("D1S1.\n")
        args += ["--num-shards", "2", "--shard-index", "2"]
        expected = r"shard_index=2 must be in \[0, 2\)"
    else:
        path.write_text("D1S1.\n")
        args += ["--whole-word-masking"]
        expected = "whole_word_masking applies to static masking only"
    assert cli("build", *args, path) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("bertkit: error: ") and len(err.splitlines()) == 1
    assert __import__("re").search(expected, err), err
    assert not list(out.glob("train-*"))


def test_cli_refuses_another_dataset_unless_overwrite(corpus, tok_dir, tmp_path, capsys):
    out = tmp_path / "data"
    assert cli("build", "--tokenizer", tok_dir, "--output", out, "--no-progress", "--slice-chars", 1500, *corpus) == 0
    before = shard_files(out)
    other_tok = tmp_path / "other_tok"
    vocab = SPECIALS + ["."] + sorted(marker(d, j).lower() for d in range(NUM_DOCS) for j in range(MAX_SENTENCES))
    Tokenizer.from_wordpiece_vocab(vocab).save_pretrained(other_tok)
    capsys.readouterr()
    assert cli("build", "--tokenizer", other_tok, "--output", out, "--no-progress", "--slice-chars", 1500, *corpus) == 1
    assert "already holds a dataset built with another tokenizer" in capsys.readouterr().err
    assert cli("build", "--tokenizer", tok_dir, "--output", out, "--no-progress", "--format", "packed", *corpus) == 1
    assert "instance_format='nsp' (this build: 'packed')" in capsys.readouterr().err
    assert shard_files(out) == before  # nothing lost
    assert cli("build", "--tokenizer", other_tok, "--output", out, "--no-progress", "--overwrite", *corpus) == 0
    data = PretrainingDataset.open(out)
    assert data.tokenizer().get_vocab() == Tokenizer.from_pretrained(other_tok).get_vocab()


def test_open_rejects_mixed_or_damaged_shards(nsp_dir, tmp_path):
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(nsp_dir, out)
    meta_path = out / "train-00001" / "shard.json"
    meta = json.loads(meta_path.read_text())
    meta["recipe"]["max_seq_length"] = 64
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(BertkitError, match="shards disagree: train-00001 was built with max_seq_length=64"):
        PretrainingDataset.open(out)
    shutil.rmtree(out)
    shutil.copytree(nsp_dir, out)
    ids = out / "train-00002" / "input_ids.npy"
    ids.write_bytes(ids.read_bytes()[:-10])
    with pytest.raises(BertkitError, match="train-00002"):
        PretrainingDataset.open(out)
    with pytest.raises(BertkitError, match="no such data directory"):
        PretrainingDataset.open(tmp_path / "nowhere")


@pytest.mark.parametrize(("field", "value", "message"), [
    ("instance_format", "mlm", "instance_format='mlm' is not one of nsp, packed, sop"),
    ("max_seq_length", 4, "max_seq_length=4 must be an integer >= 8"),
    ("eval_fraction", 1.0, r"eval_fraction=1.0 must be a number in \[0, 1\)"),
    ("masking", "later", "masking='later' is not one of dynamic, static"),
])
def test_build_options_name_the_bad_field(field, value, message):
    from bertkit.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        BuildOptions(**{field: value})


def test_documents_by_split_are_the_documents_the_build_split(corpus, tok_dir, tmp_path):
    from bertkit.data.build import documents_by_split

    out = tmp_path / "packed"
    build(corpus, tok_dir, out, BuildOptions(**{**OPTIONS.__dict__, "instance_format": "packed"}))
    split = documents_by_split(corpus, out)
    tokenizer = Tokenizer.from_pretrained(tok_dir)

    def named(documents):  # the document numbers the texts' markers name
        return {int(line.split()[0][1:].split("S")[0]) for document in documents for line in document[:1]}

    def built(split_name):
        data = PretrainingDataset.open(out, split_name)
        return {d for i in range(len(data)) for d, _ in origins(tokenizer, data[i]["input_ids"])}

    assert split["eval"] and len(split["train"]) + len(split["eval"]) == NUM_DOCS
    assert named(split["eval"]) == built("eval") and named(split["train"]) == built("train")
    with pytest.raises(BertkitError, match="built from"):
        documents_by_split(corpus[:1], out)
