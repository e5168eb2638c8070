"""Loading Unigram tokenizer.json files of the Hugging Face layout (XLNet, T5, ALBERT):
the same ids, offsets, type ids, attention mask and padding side as transformers.

Two kinds of directory, both built here without network:
  * written by transformers itself (its XLNetTokenizer / T5Tokenizer / AlbertTokenizer
    around a Unigram vocabulary, then save_pretrained): compared with the same classes
    (AutoTokenizer) loading them;
  * tokenizer.json as transformers 4's SentencePiece converters wrote them (the
    Precompiled normalizer, which needs a SentencePiece model, replaced by NFKC; Metaspace
    pre-tokenizer; Replace("  ", " ")): compared with PreTrainedTokenizerFast running the
    file as it is (what XLNetTokenizerFast & co. did in transformers 4).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers, processors, trainers
from tokenizers import Tokenizer as RustTokenizer
from transformers import AlbertTokenizer, AutoTokenizer, PreTrainedTokenizerFast, T5Tokenizer, XLNetTokenizer

from bertkit.tokenization import Tokenizer
from bertkit.textio import iter_lines

FIXTURES = Path(__file__).parents[1] / "fixtures"
TEXTS = [
    "아 더빙.. 진짜 짜증나네요 목소리",
    "Hello <mask> world, ``quoted'' café naïve",
    "ＦＵＬＬ width  and\ttabs   spaces",
    "x",
    "The <extra_id_0> walks in <extra_id_1> park.",
]
PAIRS = ["흠...포스터보고 초딩영화줄", "Mr. Darcy", "second  text", "y z", "a"]
CALLS = (
    {},
    {"padding": True},
    {"padding": "max_length", "max_length": 48, "truncation": True},
    {"truncation": True, "max_length": 10, "padding": True},
    {"truncation": "only_second", "max_length": 40, "padding": True},
)
XLNET_SPECIALS = ["<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>"]


@pytest.fixture(scope="module")
def pieces() -> list[tuple[str, float]]:
    """A Unigram vocabulary (piece, log-probability) learned by the tokenizers library, no specials."""
    texts = [t for path in (FIXTURES / "nsmc_small.txt.gz", FIXTURES / "austen_small.txt") for _, t in iter_lines(path)]
    draft = RustTokenizer(models.Unigram())
    draft.normalizer = normalizers.NFKC()
    draft.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=1200, special_tokens=["<unk>"], unk_token="<unk>", show_progress=False)
    draft.train_from_iterator(texts, trainer)
    return [tuple(p) for p in json.loads(draft.to_str())["model"]["vocab"][1:]]


def compare(ours: Tokenizer, theirs, label: str) -> None:
    assert ours.padding_side == theirs.padding_side, label
    assert len(ours) == len(theirs), label
    for kwargs in CALLS:
        for pairs in (None, PAIRS):
            if pairs is None and kwargs.get("truncation") == "only_second":
                continue
            a = ours(TEXTS, pairs, return_offsets_mapping=True, return_token_type_ids=True, **kwargs)
            b = theirs(TEXTS, pairs, return_offsets_mapping=True, return_token_type_ids=True, **kwargs)
            for name in ("input_ids", "token_type_ids", "attention_mask", "offset_mapping"):
                got = [[tuple(x) if isinstance(x, (list, tuple)) else x for x in row] for row in a[name]]
                want = [[tuple(x) if isinstance(x, (list, tuple)) else x for x in row] for row in b[name]]
                assert got == want, (label, name, kwargs, pairs is not None)
    for text in TEXTS:
        assert ours.decode(ours.encode(text)) == theirs.decode(theirs.encode(text), skip_special_tokens=True), label


def saved_by_transformers(tmp_path: Path, family: str, pieces) -> Path:
    out = tmp_path / f"hf-{family}"
    if family == "xlnet":
        tokenizer = XLNetTokenizer(vocab=[(t, 0.0) for t in XLNET_SPECIALS] + pieces, unk_id=0)
    elif family == "t5":
        sentinels = [(f"<extra_id_{i}>", 0.0) for i in range(9, -1, -1)]
        tokenizer = T5Tokenizer(vocab=[("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)] + pieces + sentinels, extra_ids=10)
    else:
        specials = [("<pad>", 0.0), ("<unk>", 0.0), ("[CLS]", 0.0), ("[SEP]", 0.0), ("[MASK]", 0.0)]
        tokenizer = AlbertTokenizer(vocab=specials + pieces)
    tokenizer.save_pretrained(out)
    return out


@pytest.mark.parametrize("family", ["xlnet", "t5", "albert"])
def test_directories_written_by_transformers(tmp_path, pieces, family):
    directory = saved_by_transformers(tmp_path, family, pieces)
    ours, theirs = Tokenizer.from_pretrained(directory), AutoTokenizer.from_pretrained(directory)
    assert type(theirs).__name__ == {"xlnet": "XLNetTokenizer", "t5": "T5Tokenizer", "albert": "AlbertTokenizer"}[family]
    compare(ours, theirs, family)
    assert ours.eos_token_id == theirs.eos_token_id and ours.pad_token_id == theirs.pad_token_id
    if family == "xlnet":  # the class pads on the left; its config does not say so
        assert ours.padding_side == "left" and (ours.cls_token, ours.sep_token, ours.mask_token) == ("<cls>", "<sep>", "<mask>")
        assert ours.additional_special_tokens == ["<eop>", "<eod>"]
    if family == "t5":
        assert ours.get_sentinel_token_ids() == [theirs.convert_tokens_to_ids(f"<extra_id_{i}>") for i in range(10)]
        assert ours.get_sentinel_token_ids()[0] == len(ours) - 1


def test_xlnet_checkpoint_without_tokenizer_class_pads_left(tmp_path, pieces):
    """Older hub XLNet checkpoints name no tokenizer class; AutoTokenizer goes by config.json."""
    directory = saved_by_transformers(tmp_path, "xlnet", pieces)
    config_path = directory / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    del config["tokenizer_class"]
    config_path.write_text(json.dumps(config))
    (directory / "config.json").write_text(json.dumps({"model_type": "xlnet"}))
    ours, theirs = Tokenizer.from_pretrained(directory), AutoTokenizer.from_pretrained(directory)
    assert type(theirs).__name__ == "XLNetTokenizer"
    compare(ours, theirs, "xlnet without tokenizer_class")


def converter_style_file(family: str, pieces) -> tuple[RustTokenizer, dict]:
    """tokenizer.json as transformers 4's XLNet/ALBERT/T5 converters laid it out, and the roles."""
    if family == "xlnet":
        specials, unk = XLNET_SPECIALS, 0
        steps = [normalizers.Replace("``", '"'), normalizers.Replace("''", '"'), normalizers.NFKD(), normalizers.StripAccents()]
        single, pair = "$A:0 <sep>:0 <cls>:2", "$A:0 <sep>:0 $B:1 <sep>:1 <cls>:2"
        roles = dict(unk_token="<unk>", bos_token="<s>", eos_token="</s>", cls_token="<cls>", sep_token="<sep>",
                     pad_token="<pad>", mask_token="<mask>", additional_special_tokens=["<eop>", "<eod>"])
    elif family == "albert":
        specials, unk = ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"], 1
        steps = [normalizers.Replace("``", '"'), normalizers.Replace("''", '"'), normalizers.NFKD(),
                 normalizers.StripAccents(), normalizers.Lowercase()]
        single, pair = "[CLS]:0 $A:0 [SEP]:0", "[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1"
        roles = dict(unk_token="<unk>", bos_token="[CLS]", eos_token="[SEP]", cls_token="[CLS]", sep_token="[SEP]",
                     pad_token="<pad>", mask_token="[MASK]")
    else:
        specials, unk = ["<pad>", "</s>", "<unk>"], 2
        steps = []
        single, pair = "$A:0 </s>:0", "$A:0 </s>:0 $B:0 </s>:0"
        roles = dict(pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                     additional_special_tokens=[f"<extra_id_{i}>" for i in range(10)])
    sentinels = [f"<extra_id_{i}>" for i in range(9, -1, -1)] if family == "t5" else []
    vocab = [(t, 0.0) for t in specials] + pieces + [(t, 0.0) for t in sentinels]
    tokenizer = RustTokenizer(models.Unigram(vocab, unk_id=unk, byte_fallback=False))
    # NFKC stands in for Precompiled (SentencePiece's nmt_nfkc charsmap)
    tokenizer.normalizer = normalizers.Sequence([*steps, normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    mask = roles.get("mask_token")
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False, lstrip=t == mask) for t in specials + sentinels])
    used = [t for t in specials if t in single + pair]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=single, pair=pair, special_tokens=[(t, tokenizer.token_to_id(t)) for t in used]
    )
    return tokenizer, roles


@pytest.mark.parametrize("family", ["xlnet", "t5", "albert"])
def test_converter_style_files(tmp_path, pieces, family):
    backend, roles = converter_style_file(family, pieces)
    directory = tmp_path / f"conv-{family}"
    directory.mkdir()
    backend.save(str(directory / "tokenizer.json"))
    hf_class = {"xlnet": "XLNetTokenizerFast", "t5": "T5TokenizerFast", "albert": "AlbertTokenizerFast"}[family]
    config = {"tokenizer_class": hf_class, "model_max_length": 512, **roles}
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    ours = Tokenizer.from_pretrained(directory)
    side = "left" if family == "xlnet" else "right"
    theirs = PreTrainedTokenizerFast(tokenizer_file=str(directory / "tokenizer.json"), padding_side=side, **roles)
    compare(ours, theirs, family)
    # the file is run as it is: the NFKC step folds full-width letters
    assert ours.tokenize("ＡＢＣ") == ours.tokenize("ABC")
