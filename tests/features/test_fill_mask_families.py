"""fill-mask for every model family: RoBERTa (byte-level BPE, <mask>), ALBERT and an ELECTRA
generator against transformers' AutoModelForMaskedLM on the same input ids; one-line
errors for checkpoints without an MLM head (an ELECTRA discriminator); the CLI on RoBERTa."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import transformers
from tokenizers import AddedToken

from bertkit.cli import main
from bertkit.errors import BertkitError
from bertkit.inference.loading import load_mlm_model
from bertkit.inference.masked_lm import fill_mask
from bertkit.model.families import MODEL_FAMILIES
from bertkit.tokenization import Tokenizer

AUSTEN = Path(__file__).resolve().parents[1] / "fixtures" / "austen_small.txt"
# weights drawn wider than BERT's 0.02, so the distributions are peaked: a 1e-5 tolerance
# on probabilities then means something, and the top-k order has no near-ties
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, initializer_range=0.5)
TEXT = "It is a truth universally {mask}, that a single man in possession of a good {mask} must be in want of a wife."


def _save(directory: Path, model_class, config, tokenizer_files: Path) -> Path:
    torch.manual_seed(0)
    model_class(config).save_pretrained(directory)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json"):
        if (tokenizer_files / name).is_file():
            shutil.copy(tokenizer_files / name, directory / name)
    return directory


@pytest.fixture(scope="module")
def bbpe_dir(tmp_path_factory) -> Path:
    """A 400-token byte-level BPE tokenizer trained by bertkit (RoBERTa's specials, <mask> = 4)."""
    from bertkit.tokenization.train import TrainOptions, train_tokenizer

    path = tmp_path_factory.mktemp("bbpe")
    train_tokenizer([AUSTEN], path, TrainOptions(algorithm="bbpe", vocab_size=400, workers=1, show_progress=False))
    return path


@pytest.fixture(scope="module")
def roberta_dir(tmp_path_factory, bbpe_dir) -> Path:
    vocab = len(Tokenizer.from_pretrained(bbpe_dir))
    config = transformers.RobertaConfig(vocab_size=vocab, max_position_embeddings=72, type_vocab_size=1, pad_token_id=1,
                                        bos_token_id=0, eos_token_id=2, **TINY)
    return _save(tmp_path_factory.mktemp("roberta"), transformers.RobertaForMaskedLM, config, bbpe_dir)


@pytest.fixture(scope="module")
def hf_roberta_tokenizer_dir(tmp_path_factory, roberta_dir, bbpe_dir) -> Path:
    """The same model with transformers' own RoBERTa tokenizer files (its <mask> absorbs the space before it)."""
    path = tmp_path_factory.mktemp("roberta-hf-tokenizer")
    for name in ("config.json", "model.safetensors"):
        shutil.copy(roberta_dir / name, path / name)
    model = json.loads((bbpe_dir / "tokenizer.json").read_text())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    mask = AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False, special=True)  # as roberta-base's files
    transformers.RobertaTokenizer(vocab=model["vocab"], merges=merges, mask_token=mask).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def wordpiece_dir(minilm_dir) -> Path:
    """BERT's uncased 30522 WordPiece vocabulary ([MASK]), as ALBERT and ELECTRA checkpoints use here."""
    return minilm_dir


@pytest.fixture(scope="module")
def albert_dirs(tmp_path_factory, wordpiece_dir) -> dict[str, Path]:
    config = transformers.AlbertConfig(vocab_size=30522, embedding_size=16, max_position_embeddings=64, **TINY)
    root = tmp_path_factory.mktemp("albert")
    return {name: _save(root / name, getattr(transformers, name), config, wordpiece_dir)
            for name in ("AlbertForMaskedLM", "AlbertForPreTraining")}


@pytest.fixture(scope="module")
def electra_dirs(tmp_path_factory, wordpiece_dir) -> dict[str, Path]:
    config = transformers.ElectraConfig(vocab_size=30522, embedding_size=16, max_position_embeddings=64, **TINY)
    root = tmp_path_factory.mktemp("electra")
    return {"generator": _save(root / "generator", transformers.ElectraForMaskedLM, config, wordpiece_dir),
            "discriminator": _save(root / "discriminator", transformers.ElectraForPreTraining, config, wordpiece_dir)}


@pytest.fixture(params=["roberta", "roberta-hf-tokenizer", "AlbertForMaskedLM", "AlbertForPreTraining",
                        "electra-generator"])
def checkpoint(request) -> tuple[Path, str]:
    """(directory, the bertkit class fill-mask loads it with)."""
    name = request.param
    if name == "roberta":
        return request.getfixturevalue("roberta_dir"), "RobertaForMaskedLM"
    if name == "roberta-hf-tokenizer":
        return request.getfixturevalue("hf_roberta_tokenizer_dir"), "RobertaForMaskedLM"
    if name.startswith("Albert"):
        return request.getfixturevalue("albert_dirs")[name], "AlbertForMaskedLM"
    return request.getfixturevalue("electra_dirs")["generator"], "ElectraForMaskedLM"


def test_top_k_equals_transformers_softmax(checkpoint):
    directory, class_name = checkpoint
    assert type(load_mlm_model(directory)).__name__ == class_name
    tokenizer = Tokenizer.from_pretrained(directory)
    text = TEXT.format(mask=tokenizer.mask_token)
    got = fill_mask(text, model=directory, top_k=4)

    batch = tokenizer([text], return_tensors="pt")
    reference = transformers.AutoModelForMaskedLM.from_pretrained(directory).eval()
    with torch.no_grad():
        probs = reference(**batch).logits[0].softmax(-1)  # the inputs the tokenizer gives (RoBERTa: no token types)
    positions = (batch["input_ids"][0] == tokenizer.mask_token_id).nonzero().flatten()
    assert len(got) == len(positions) == 2
    for predictions, position in zip(got, positions):
        top = probs[position].topk(4)
        assert top.values[0] > 20 / probs.shape[-1]  # a peaked distribution, not near-uniform
        assert [p["token_id"] for p in predictions] == top.indices.tolist()
        assert [p["score"] for p in predictions] == pytest.approx(top.values.tolist(), abs=1e-5)
        assert [p["token"] for p in predictions] == [tokenizer.convert_ids_to_tokens(i) for i in top.indices.tolist()]


@pytest.mark.parametrize("tokenizer_files", ["bbpe", "hf"])
def test_roberta_mask_token_and_filled_text(tokenizer_files, roberta_dir, hf_roberta_tokenizer_dir):
    directory = roberta_dir if tokenizer_files == "bbpe" else hf_roberta_tokenizer_dir
    tokenizer = Tokenizer.from_pretrained(directory)
    assert (tokenizer.mask_token, tokenizer.mask_token_id) == ("<mask>", 4)
    text = TEXT.format(mask="<mask>")
    ids = tokenizer(text)["input_ids"]
    assert ids == transformers.AutoTokenizer.from_pretrained(directory)(text)["input_ids"]
    # the space before <mask> is not a token of its own: the mask stands for a whole word with its space
    assert tokenizer(text.replace(" <mask>", "<mask>"))["input_ids"] == ids
    before, after = "It is a truth universally", TEXT.format(mask="<mask>").split("<mask>", 1)[1]
    for p in fill_mask(text, model=directory, top_k=5)[0]:
        word = tokenizer.decode([p["token_id"]])  # " city" for a word start "Ġcity", "ity" for a continuation
        assert p["sequence"] == before + word + after  # a continuation joins "universally", as the model reads it
        assert "  " not in p["sequence"]
        assert p["token_str"] == (word.strip() or p["token"])


def test_discriminator_checkpoint_is_a_one_line_error(electra_dirs, tmp_path):
    directory = electra_dirs["discriminator"]
    with pytest.raises(BertkitError) as caught:
        fill_mask("Paris is a [MASK].", model=directory)
    message = str(caught.value)
    assert message.startswith(f"{directory}: checkpoint has no MLM head") and "\n" not in message
    assert "needs a generator (ElectraForMaskedLM) checkpoint" in message

    run = tmp_path / "electra-run"  # a pre-training run's folder: discriminator + generator/
    shutil.copytree(directory, run)
    shutil.copytree(electra_dirs["generator"], run / "generator")
    with pytest.raises(BertkitError, match=f"this run's generator: {run / 'generator'}"):
        fill_mask("Paris is a [MASK].", model=run)
    assert fill_mask("Paris is a [MASK].", model=run / "generator", top_k=1)[0][0]["token_id"] >= 0


def test_encoder_only_roberta_checkpoint_is_a_one_line_error(tmp_path, bbpe_dir):
    config = transformers.RobertaConfig(vocab_size=len(Tokenizer.from_pretrained(bbpe_dir)), max_position_embeddings=72,
                                        type_vocab_size=1, pad_token_id=1, **TINY)
    directory = _save(tmp_path / "encoder", transformers.RobertaModel, config, bbpe_dir)
    with pytest.raises(BertkitError, match=r"checkpoint has no MLM head \(lm_head\.\* weights missing\); "
                                           r"fill-mask needs a RobertaForMaskedLM checkpoint$"):
        fill_mask("Paris is a <mask>.", model=directory)


def test_roberta_text_with_bert_mask_names_the_right_token(roberta_dir):
    with pytest.raises(BertkitError, match="text has no <mask> token"):
        fill_mask("Paris is a [MASK].", model=roberta_dir)


def test_every_family_names_its_masked_lm_head():
    for family in (family for family in MODEL_FAMILIES.values() if family.can_fill_mask):
        mlm = family.masked_lm()
        config_class = family.config_class()  # BERT's tiny, else the family's first (own-named) preset
        preset = "tiny" if "tiny" in config_class.presets else next(iter(config_class.presets))
        config = config_class.from_preset(preset, vocab_size=64, pad_token_id=0)
        keys = list(mlm.model_class()(config).state_dict())
        # a family may list its head under alternative layouts (DeBERTa's cls.predictions / lm_predictions.lm_head):
        # a fresh model holds one of them, and every listed prefix names head weights only
        assert any(key.startswith(prefix) for prefix in mlm.head_prefixes for key in keys), family.model_type
        backbone = family.backbone_attribute + "."
        assert not any(prefix.startswith(backbone) for prefix in mlm.head_prefixes), family.model_type


def test_cli_on_a_roberta_checkpoint(roberta_dir, capsys):
    text = "It is a truth universally <mask>."
    expected = fill_mask(text, model=roberta_dir, top_k=3)[0]
    capsys.readouterr()
    assert main(["fill-mask", "--model", str(roberta_dir), "--top-k", "3", text]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    for rank, (line, p) in enumerate(zip(lines, expected), start=1):
        assert line.split()[:3] == [f"{rank}.", p["token_str"], f"{p['score']:.4f}"]
        assert line.endswith(f"  {p['sequence']}")


def test_roberta_filled_text_is_what_the_transformers_pipeline_decodes(hf_roberta_tokenizer_dir):
    """Byte-level BPE: a "Ġ" word brings its space, a continuation joins the word before the
    mask (which absorbed its space), a "\\t" or "\\x1f" byte token is text, not a separator."""
    directory = hf_roberta_tokenizer_dir
    pipe = transformers.pipeline("fill-mask", model=str(directory), top_k=150)
    special = set(Tokenizer.from_pretrained(directory).all_special_ids)
    texts = [TEXT.format(mask="<mask>").replace("good <mask>", "good fortune"), "It was a good<mask> day.",
             "<mask> is a truth."]
    seen = set()
    for text, masks in zip(texts, fill_mask(texts, model=directory, top_k=150)):
        reference = {p["token"]: p["sequence"] for p in pipe(text)}
        for p in masks[0]:
            if p["token_id"] in special or p["token_id"] not in reference:
                continue
            expected = reference[p["token_id"]]
            if text.startswith("<mask>"):  # the pipeline keeps a first word's own space (" with is ..."); we drop it
                expected = expected.removeprefix(" ")
            assert p["sequence"] == expected, (text, p["token"])
            seen.add(p["token"].startswith("\u0120"))
    assert seen == {True, False}  # word starts and continuations both compared
