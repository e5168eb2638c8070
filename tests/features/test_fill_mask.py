"""fill-mask against a transformers BertForMaskedLM with the same weights, its filled text
against transformers' fill-mask pipeline (English and Korean WordPiece), several texts and
the CLI's --file / JSONL paths."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import transformers

from bertkit.cli import main
from bertkit.errors import BertkitError
from bertkit.inference.masked_lm import fill_mask, filled_text, written_after
from bertkit.tokenization import Tokenizer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def mlm_dir(tmp_path_factory, minilm_dir):
    """A seeded random tiny BertForMaskedLM (HF-saved) with the real uncased vocab."""
    path = tmp_path_factory.mktemp("mlm")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=64, max_position_embeddings=64)
    transformers.BertForMaskedLM(cfg).save_pretrained(path)
    shutil.copy(minilm_dir / "vocab.txt", path / "vocab.txt")
    shutil.copy(minilm_dir / "tokenizer_config.json", path / "tokenizer_config.json")
    return path


def test_fill_mask_matches_transformers(mlm_dir):
    text = "Paris is a beautiful [MASK] and [MASK] too."
    got = fill_mask(text, model=mlm_dir, top_k=3)
    ref_tok = transformers.BertTokenizerFast.from_pretrained(mlm_dir)
    ref = transformers.BertForMaskedLM.from_pretrained(mlm_dir).eval()
    batch = ref_tok(text, return_tensors="pt")
    with torch.no_grad():
        probs = ref(**batch).logits[0].softmax(-1)
    positions = (batch["input_ids"][0] == ref_tok.mask_token_id).nonzero().flatten()
    assert len(got) == 2
    for predictions, pos in zip(got, positions):
        top = probs[pos].topk(3)
        assert [p["token_id"] for p in predictions] == top.indices.tolist()
        assert [p["score"] for p in predictions] == pytest.approx(top.values.tolist(), abs=1e-5)
    first = got[0][0]
    assert first["sequence"].startswith("Paris is a beautiful ") and first["sequence"].endswith("and [MASK] too.")
    assert first["token"] in first["sequence"]


def test_checkpoint_without_mlm_head_is_a_clear_error(minilm_dir):
    with pytest.raises(BertkitError, match="checkpoint has no MLM head"):
        fill_mask("Paris is a [MASK].", model=minilm_dir)


def test_text_without_mask(mlm_dir):
    with pytest.raises(BertkitError, match=r"text has no \[MASK\] token"):
        fill_mask("Paris is nice.", model=mlm_dir)


# ---------------------------------------------------------------- the filled text, several texts, the CLI

def _pipeline_sequences(directory: Path, text: str, top_k: int) -> dict[int, str]:
    """transformers' fill-mask pipeline: token id -> its `sequence` (the filled ids decoded)."""
    pipe = transformers.pipeline("fill-mask", model=str(directory), top_k=top_k)
    return {p["token"]: p["sequence"] for p in pipe(text)}


def _assert_pipeline_sequences(directory: Path, texts: list[str], top_k: int = 300) -> set[str]:
    """Our `sequence` equals the pipeline's for every non-special prediction; returns the kinds seen."""
    tokenizer = Tokenizer.from_pretrained(directory)
    kinds = set()
    for text, masks in zip(texts, fill_mask(texts, model=directory, top_k=top_k)):
        reference = _pipeline_sequences(directory, text, top_k)
        compared = [p for p in masks[0] if p["token_id"] in reference and p["token_id"] not in tokenizer.all_special_ids]
        assert len(compared) > top_k * 0.9
        for p in compared:
            assert p["sequence"] == reference[p["token_id"]], (text, p["token"])
            kinds.add("continuation" if p["token"].startswith("##") else "word" if p["token"].isalnum() else "other")
    return kinds


def test_filled_text_is_what_the_transformers_pipeline_decodes(mlm_dir):
    # lowercase, tokenizer-spaced texts: the pipeline decodes the whole input, so only these compare character for character
    texts = ["paris is a beautiful [MASK].", "[MASK] is a city.", "it was un [MASK] good."]
    assert _assert_pipeline_sequences(mlm_dir, texts) == {"continuation", "word", "other"}


@pytest.fixture(scope="module")
def korean_dir(tmp_path_factory):
    """A WordPiece vocabulary trained by bertkit on Korean movie reviews (Hangul kept whole), tiny random BERT."""
    from bertkit.tokenization.train import TrainOptions, train_tokenizer

    path = tmp_path_factory.mktemp("ko")
    train_tokenizer([FIXTURES / "nsmc_reviews_50.txt"], path,
                    TrainOptions(algorithm="wordpiece", vocab_size=1200, workers=1, show_progress=False))
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=len(Tokenizer.from_pretrained(path)), hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
                                  initializer_range=0.5)
    transformers.BertForMaskedLM(cfg).save_pretrained(path)
    return path


def test_korean_wordpiece_pieces_join_as_the_pipeline_writes_them(korean_dir):
    texts = ["정말 [MASK] 있었다.", "[MASK] 재미있었다", "이 영화 [MASK]!"]
    assert "continuation" in _assert_pipeline_sequences(korean_dir, texts, top_k=200)
    tokenizer = Tokenizer.from_pretrained(korean_dir)
    piece = next(t for t in tokenizer.get_vocab() if t.startswith("##") and "\uac00" <= t[2] <= "\ud7a3")
    left = tokenizer.convert_tokens_to_ids("정말")
    word = written_after(tokenizer, left, tokenizer.convert_tokens_to_ids(piece))
    assert filled_text("정말 [MASK] 있었다", "[MASK]", 0, word) == f"정말{piece[2:]} 있었다"


def test_filled_text_joins_pieces_and_punctuation_keeping_the_users_text(minilm_dir):
    tokenizer = Tokenizer.from_pretrained(minilm_dir)
    text = "Paris is a beautiful [MASK]."
    left = tokenizer.convert_tokens_to_ids("beautiful")

    def fill(token: str, at: str = text, index: int = 0) -> str:
        return filled_text(at, "[MASK]", index, written_after(tokenizer, left, tokenizer.convert_tokens_to_ids(token)))

    assert fill("city") == "Paris is a beautiful city."
    assert fill(",") == "Paris is a beautiful,."  # was "Paris is a beautiful ,."
    assert fill("##ly") == "Paris is a beautifully."
    assert fill("city", "[MASK] and [MASK]", 1) == "[MASK] and city"  # other masks stay
    assert filled_text("[MASK] is a city.", "[MASK]", 0, written_after(tokenizer, None, 3000)) == \
        tokenizer.decode([3000]) + " is a city."


def test_several_texts_in_batches_equal_one_at_a_time(mlm_dir):
    texts = ["Paris is a [MASK].", "A much longer text with a [MASK] in the middle of many words here.", "[MASK] [MASK]!"]
    together = fill_mask(texts, model=mlm_dir, top_k=3, batch_size=2)
    for text, got in zip(texts, together):
        alone = fill_mask(text, model=mlm_dir, top_k=3)
        assert [[p["token_id"] for p in m] for m in got] == [[p["token_id"] for p in m] for m in alone]
        for got_mask, alone_mask in zip(got, alone):
            assert [p["score"] for p in got_mask] == pytest.approx([p["score"] for p in alone_mask], abs=1e-5)
            assert [p["sequence"] for p in got_mask] == [p["sequence"] for p in alone_mask]
    with pytest.raises(BertkitError, match=r"texts\[1\] has no \[MASK\] token: 'no mask'"):
        fill_mask(["a [MASK]", "no mask"], model=mlm_dir)


def test_cli_several_texts_file_and_jsonl(mlm_dir, tmp_path, capsys):
    texts = ["Paris is a beautiful [MASK].", "The [MASK] sat on the [MASK]."]
    expected = fill_mask(texts, model=mlm_dir, top_k=2)
    capsys.readouterr()
    assert main(["fill-mask", "--model", str(mlm_dir), "--top-k", "2", *texts]) == 0
    out = capsys.readouterr().out
    assert out.startswith(texts[0] + "\n") and f"\n\n{texts[1]}\nmask 1:\n" in out and "mask 2:" in out
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    records = tmp_path / "texts.jsonl"
    records.write_text("".join(json.dumps({"id": i, "body": t}) + "\n" for i, t in enumerate(texts)), encoding="utf-8")
    for args in (["--file", str(source)], ["--file", str(records), "--text-field", "body"]):
        assert main(["fill-mask", "--model", str(mlm_dir), "--top-k", "2", "--format", "jsonl", *args]) == 0
        rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [row["text"] for row in rows] == texts
        assert [len(row["predictions"]) for row in rows] == [1, 2]
        for row, masks in zip(rows, expected):
            assert [[p["sequence"] for p in m] for m in row["predictions"]] == [[p["sequence"] for p in m] for m in masks]
            assert [[p["token_id"] for p in m] for m in row["predictions"]] == [[p["token_id"] for p in m] for m in masks]


@pytest.mark.parametrize("content, message", [
    (b"Paris is a [MASK].\n\nThe [MASK] sat.\n", "texts.txt:2: empty text; every text needs a [MASK] token"),
    (b"Paris is a [MASK].\nNo mask here.\n", "texts.txt:2: no [MASK] token in 'No mask here.'"),
    (b"Paris is a [MASK].\nCaf\xe9 [MASK].\n", "texts.txt:2: not valid UTF-8 (byte 0xe9 at column 4)"),
])
def test_cli_bad_lines_name_file_and_line(mlm_dir, tmp_path, capsys, content, message):
    source = tmp_path / "texts.txt"
    source.write_bytes(content)
    assert main(["fill-mask", "--model", str(mlm_dir), "--file", str(source)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path}/{message}" in err


def test_cli_jsonl_without_the_text_field(mlm_dir, tmp_path, capsys):
    source = tmp_path / "texts.jsonl"
    source.write_text('{"text": "a [MASK]"}\n{"txt": "b [MASK]"}\n', encoding="utf-8")
    assert main(["fill-mask", "--model", str(mlm_dir), "--file", str(source)]) == 1
    assert "texts.jsonl:2: no field 'text' (did you mean 'txt'?)" in capsys.readouterr().err
