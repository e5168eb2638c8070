"""`--min-frequency` with `--algorithm unigram` (tokenizers' UnigramTrainer has no count
threshold) is refused in one line naming the flag, not validated and dropped."""

from pathlib import Path

from bertkit.cli import main

NSMC = Path(__file__).parent.parent / "fixtures" / "nsmc_small.txt.gz"


def test_unigram_refuses_min_frequency(tmp_path, capsys):
    out = tmp_path / "uni"
    code = main(["tokenizer", "train", "--algorithm", "unigram", "--min-frequency", "5", "-o", str(out), str(NSMC)])
    err = capsys.readouterr().err
    assert code != 0 and "--min-frequency" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (out / "tokenizer.json").exists()
