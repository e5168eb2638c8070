"""KorQuAD 1.0 scoring: bertkit's rule against a step-by-step transcription of the official
evaluate-v1.0.py procedure on hand-made Korean cases (particles, spaced vs unspaced
answers, the bracket and quote characters), the choice of rule from the file's version,
and `bertkit evaluate squad --metric`."""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from pathlib import Path

import pytest

from bertkit.cli import main
from bertkit.errors import ConfigError
from bertkit.evaluation.squad import (KORQUAD_SPACED_CHARACTERS, answer_metric_for_version, character_f1,
                                      evaluate_squad, korquad_exact_match, korquad_normalize_answer,
                                      parse_squad_dataset, token_f1)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "korquad_v1.0-handmade.json"


# ---- the official procedure, one step per line of its definition (the reference)
def official_normalize(text: str) -> str:
    for ch in "'\"《》<>〈〉()‘’":  # remove_(): each of these becomes a space, one re.sub at a time
        text = re.sub(re.escape(ch), " ", text)
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    return " ".join(text.split())


def official_f1(prediction: str, gold: str) -> float:
    predicted = [ch for token in official_normalize(prediction).split() for ch in token]
    golden = [ch for token in official_normalize(gold).split() for ch in token]
    same = sum((Counter(predicted) & Counter(golden)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(golden)
    return 2 * precision * recall / (precision + recall)


def official_evaluate(document: dict, predictions: dict[str, str]) -> dict[str, float]:
    exact = f1 = total = 0.0
    for article in document["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                if qa["id"] not in predictions:
                    continue
                golds = [answer["text"] for answer in qa["answers"]]
                prediction = predictions[qa["id"]]
                exact += max(float(official_normalize(prediction) == official_normalize(g)) for g in golds)
                f1 += max(official_f1(prediction, g) for g in golds)
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}


CASES = [
    ("서울특별시에", "서울특별시"),  # a particle attached: word F1 0, character F1 10/11
    ("김부식이", "김부식"),
    ("서울 특별시", "서울특별시"),  # spaced vs unspaced: EM 0 (spaces count), character F1 1
    ("《삼국사기》", "삼국사기"),
    ("〈아리랑〉은", "아리랑"),
    ("‘한국의 민요’", "한국의 민요"),
    ("유네스코 인류무형문화유산(대표목록)", "유네스코 인류무형문화유산 대표목록"),  # ( ) become spaces
    ("인류무형문화유산(대표목록)", "인류무형문화유산대표목록"),  # ...so EM differs from SQuAD's rule here
    ("1145년.", "1145년"),
    ("<b>Seoul</b>", "b seoul b"),
    ("“따옴표”", "따옴표"),  # curly double quotes are not in the official list: they stay
    ("The Beatles", "Beatles"),  # no article removal
    ("", "김부식"),
    ("", ""),
]


@pytest.mark.parametrize("prediction,gold", CASES)
def test_rule_matches_the_official_procedure(prediction, gold):
    assert korquad_normalize_answer(prediction) == official_normalize(prediction)
    assert korquad_exact_match(prediction, gold) == float(official_normalize(prediction) == official_normalize(gold))
    assert character_f1(prediction, gold) == pytest.approx(official_f1(prediction, gold))


def test_hand_worked_values():
    assert character_f1("서울특별시에", "서울특별시") == pytest.approx(10 / 11)  # p = 5/6, r = 1
    assert token_f1("서울특별시에", "서울특별시") == 0.0  # SQuAD's word rule: no word in common
    assert korquad_exact_match("서울 특별시", "서울특별시") == 0.0 and character_f1("서울 특별시", "서울특별시") == 1.0
    assert korquad_exact_match("《삼국사기》", "삼국사기") == 1.0
    assert korquad_exact_match("인류무형문화유산(대표목록)", "인류무형문화유산 대표목록") == 1.0
    assert korquad_normalize_answer("The (Seoul) ‘City’") == "the seoul city"
    assert set(KORQUAD_SPACED_CHARACTERS) == set("'\"《》<>〈〉()‘’")


def test_version_string_picks_the_rule():
    assert answer_metric_for_version("KorQuAD_v1.0_dev") == "korquad"
    assert answer_metric_for_version("KorQuAD_v1.0_train") == "korquad"
    for version in ("1.1", "v2.0", None, "KorQuAD_2.0_dev"):
        assert answer_metric_for_version(version) == "squad"


PREDICTIONS = {"k1": "김부식이", "k2": "1145년", "k3": "서울특별시에 있는 국립중앙박물관", "k4": "민요",
               "k5": "2012년 유네스코", "k6": "유네스코 인류무형문화유산"}


def test_dataset_scores_match_the_official_procedure_and_differ_from_squads():
    document = json.loads(FIXTURE.read_text(encoding="utf-8"))
    dataset = parse_squad_dataset(document)
    assert dataset.answer_metric() == "korquad"
    ours = evaluate_squad(dataset, PREDICTIONS)  # auto: the file's version asks for KorQuAD's rule
    reference = official_evaluate(document, PREDICTIONS)
    assert ours == pytest.approx(reference)
    squad = evaluate_squad(dataset, PREDICTIONS, metric="squad")
    assert squad["f1"] < ours["f1"] - 20  # word-level F1 undercounts Korean near misses
    assert evaluate_squad(dataset, PREDICTIONS, metric="korquad") == ours
    with pytest.raises(ConfigError, match="metric 'korquad'"):
        evaluate_squad(dataset, {"k1": ""}, version=2, metric="korquad")
    with pytest.raises(ConfigError, match="expected auto, squad or korquad"):
        evaluate_squad(dataset, PREDICTIONS, metric="bleu")


def test_cli_metric_option(tmp_path, capsys):
    predictions = tmp_path / "predictions.json"
    predictions.write_text(json.dumps(PREDICTIONS, ensure_ascii=False), encoding="utf-8")
    reference = official_evaluate(json.loads(FIXTURE.read_text(encoding="utf-8")), PREDICTIONS)
    assert main(["evaluate", "squad", "--data", str(FIXTURE), "--predictions", str(predictions)]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == pytest.approx(reference)
    assert "KorQuAD 1.0's official rule" in out.err and "KorQuAD_v1.0_dev" in out.err
    assert main(["evaluate", "squad", "--data", str(FIXTURE), "--predictions", str(predictions),
                 "--metric", "squad"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["f1"] < reference["f1"] and out.err == ""
    assert main(["evaluate", "squad", "--data", str(FIXTURE), "--predictions", str(predictions),
                 "--version", "2", "--metric", "korquad"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "korquad" in err and "Traceback" not in err
