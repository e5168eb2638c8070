"""Extractive QA data: SQuAD v1.1 / v2.0 reading, sliding windows against transformers'
BertTokenizerFast, answer positions against the run_qa rule, oracle-logit round trips
scored with the official SQuAD metric (answers in later windows included), span
constraints against a brute-force search, and the v2.0 null threshold on hand-set scores."""

from __future__ import annotations

import dataclasses
import gzip
import json

import numpy as np
import pytest

from bertkit.errors import BertkitError, ConfigError
from bertkit.evaluation.squad import evaluate_squad, read_squad_dataset
from bertkit.tasks import get_family, qa

FILES = {"dev": "squad_dev-v1.1.json", "train": "squad_train-v1.1.json", "v2": "squad_v2-handmade.json"}
SMALL = {"max_seq_length": 64, "doc_stride": 16}  # forces several windows per passage


def _path(fixtures, name):
    return fixtures / FILES[name]


def _raw_questions(path):
    """(context, qa object) of every question, by a plain walk of the JSON."""
    document = json.loads(path.read_text(encoding="utf-8"))
    return [(p["context"], q) for a in document["data"] for p in a["paragraphs"] for q in p["qas"]]


def _write(path, document):
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------- reading


def test_registry_and_model_class():
    assert get_family("squad") is qa and get_family("QA") is qa
    assert qa.model_class().__name__ == "BertForQuestionAnswering"


def test_read_dev_v1_matches_the_json(fixtures):
    path = _path(fixtures, "dev")
    examples = qa.read_examples(path)
    raw = _raw_questions(path)
    assert len(examples) == len(raw) == 28
    for ex, (context, q) in zip(examples, raw, strict=True):
        assert (ex.qid, ex.question, ex.context) == (q["id"], q["question"], context)
        assert ex.answers == [(a["text"], a["answer_start"]) for a in q["answers"]] and not ex.is_impossible
    assert examples[0].source == f"{path}: data[0].paragraphs[0].qas[0]"
    assert len(examples[0].answers) == 3
    gold = read_squad_dataset(path)
    assert qa.to_squad_dataset(examples).questions == gold.questions
    assert qa.to_squad_dataset(examples).scoring_version() == 1


def test_read_v2_unanswerable_questions(fixtures):
    path = _path(fixtures, "v2")
    examples = qa.read_examples(path)
    raw = _raw_questions(path)
    assert [ex.is_impossible for ex in examples] == [q["is_impossible"] for _, q in raw]
    assert sum(ex.is_impossible for ex in examples) == 3
    for ex in examples:
        assert (ex.answers == []) == ex.is_impossible  # plausible_answers are not answers
    assert qa.to_squad_dataset(examples).scoring_version() == 2
    with pytest.raises(BertkitError, match=r"hm-rail-5\): no answers \(a SQuAD v1.1 question"):
        qa.read_examples(path, version=1)


def test_v2_without_is_impossible_fields(fixtures, tmp_path):
    document = json.loads(_path(fixtures, "v2").read_text(encoding="utf-8"))
    expected = [q["is_impossible"] for p in document["data"][0]["paragraphs"] for q in p["qas"]]
    for paragraph in document["data"][0]["paragraphs"]:
        for q in paragraph["qas"]:
            q.pop("is_impossible")
            q.pop("plausible_answers", None)
    path = _write(tmp_path / "v2.json", document)
    assert [ex.is_impossible for ex in qa.read_examples(path)] == expected  # "version": "v2.0"
    document["version"] = "1.1"
    with pytest.raises(BertkitError, match="no answers"):
        qa.read_examples(_write(path, document))
    assert [ex.is_impossible for ex in qa.read_examples(path, version="2.0")] == expected


def test_train_file_gz_and_accented_offsets(fixtures, tmp_path):
    path = _path(fixtures, "train")
    gz = tmp_path / "train.json.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    examples = qa.read_examples(gz, training=True)
    assert [dataclasses.astuple(ex)[:5] for ex in examples] == [
        dataclasses.astuple(ex)[:5] for ex in qa.read_examples(path)
    ]
    accented = [ex for ex in examples if "é" in ex.context]
    assert accented
    for ex in accented:
        text, start = ex.answers[0]
        assert ex.context[start : start + len(text)] == text


def test_answer_mismatch_names_file_and_question_id(fixtures, tmp_path):
    document = json.loads(_path(fixtures, "train").read_text(encoding="utf-8"))
    q = document["data"][1]["paragraphs"][0]["qas"][2]
    q["answers"][0]["answer_start"] += 3
    path = _write(tmp_path / "train.json", document)
    with pytest.raises(BertkitError) as info:
        qa.read_examples(path, training=True)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and q["id"] in message
    assert f"{q['answers'][0]['text']!r} is not at answer_start {q['answers'][0]['answer_start']}" in message
    assert f"the text occurs at {q['answers'][0]['answer_start'] - 3}" in message
    examples = qa.read_examples(path)  # evaluation needs only the texts
    assert len(examples) == 30
    with pytest.raises(BertkitError, match=q["id"]):  # encode(training=True) checks too
        qa.encode(examples, None, training=True)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"  \n", "empty file"),
        (b'{"version": "1.1"}', "not a SQuAD file"),
        (b'{"data": [}', "not valid JSON"),
        (b'{"data": []}', "no questions"),
        (b'{"data": [{"paragraphs": [{"context": " \\n", "qas": [{"id": "a", "question": "Why?", "answers": []}]}]}]}',
         r"data\[0\].paragraphs\[0\]: the 'context' is missing, empty or whitespace only"),
        (b'{"data": [{"paragraphs": [{"context": "Yes.", "qas": [{"id": "q7", "question": "\\t ",'
         b' "answers": [{"text": "Yes", "answer_start": 0}]}]}]}]}',
         r"qas\[0\] \(id q7\): the 'question' is missing, empty or whitespace only"),
        (b'{"data": [{"paragraphs": [{"context": "Yes.", "qas": [{"id": "q", "question": "A?", "answers":'
         b' [{"text": "Yes", "answer_start": 0}]}, {"id": "q", "question": "B?", "answers": [{"text": "Yes",'
         b' "answer_start": 0}]}]}]}]}', r"qas\[1\] \(id q\): the same id as .*qas\[0\]$"),
    ],
)
def test_malformed_files_give_one_line_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(BertkitError, match=message) as info:
        qa.read_examples(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


# ---------------------------------------------------------------------------- encoding


def _reference_position(offsets, sequence_ids, start_char, end_char):
    """The run_qa rule over the passage tokens: the last token starting at or before the
    answer's start, the first token ending at or after its end; (0, 0) when outside."""
    passage = [i for i, s in enumerate(sequence_ids) if s == 1]
    if offsets[passage[0]][0] > start_char or offsets[passage[-1]][1] < end_char:
        return 0, 0
    start = max(i for i in passage if offsets[i][0] <= start_char)
    end = min(i for i in passage if offsets[i][1] >= end_char)
    return start, end


@pytest.mark.parametrize("name", ["dev", "train", "v2"])
def test_windows_match_transformers(fixtures, tokenizer, hf_tokenizer, name):
    examples = qa.read_examples(_path(fixtures, name), training=True)
    evaluation = qa.encode(examples, tokenizer, **SMALL)
    training = qa.encode(examples, tokenizer, **SMALL, training=True)
    ref = hf_tokenizer(
        [ex.question for ex in examples], [ex.context for ex in examples], truncation="only_second",
        max_length=64, stride=16, return_overflowing_tokens=True, return_offsets_mapping=True,
    )
    assert len(evaluation) == len(training) == len(ref["input_ids"]) > 2 * len(examples)
    assert [f["_example_index"] for f in evaluation] == list(ref["overflow_to_sample_mapping"])
    for row, (ev, tr) in enumerate(zip(evaluation, training, strict=True)):
        assert ev["input_ids"].tolist() == ref["input_ids"][row] == tr["input_ids"].tolist()
        assert ev["token_type_ids"].tolist() == ref["token_type_ids"][row] == tr["token_type_ids"].tolist()
        assert ev["input_ids"].dtype == np.int32 and ev["_offsets"].shape == (len(ev["input_ids"]), 2)
        sequence_ids = ref.sequence_ids(row)
        expected = [list(o) if s == 1 else [-1, -1] for o, s in zip(ref["offset_mapping"][row], sequence_ids)]
        assert ev["_offsets"].tolist() == expected
        ex = examples[ev["_example_index"]]
        if ex.is_impossible:
            wanted = (0, 0)
        else:
            text, start = ex.answers[0]
            wanted = _reference_position(ref["offset_mapping"][row], sequence_ids, start, start + len(text))
        assert (tr["start_positions"], tr["end_positions"]) == wanted
        assert set(tr) == {"input_ids", "token_type_ids", "start_positions", "end_positions"}


def test_long_question_keeps_max_query_length_tokens(fixtures, tokenizer, hf_tokenizer):
    ex = qa.read_examples(_path(fixtures, "dev"))[0]
    long = dataclasses.replace(ex, question=" ".join(["Which unusually elaborate pre-game ceremony"] * 12) + "?")
    features = qa.encode([long, ex], tokenizer, 128, doc_stride=32, max_query_length=16)
    question = hf_tokenizer(long.question, add_special_tokens=False, truncation=True, max_length=16)["input_ids"]
    first = features[0]
    assert first["input_ids"][1:17].tolist() == question and first["input_ids"][17] == tokenizer.sep_token_id
    assert first["token_type_ids"][:18].tolist() == [0] * 18 and first["token_type_ids"][18] == 1
    full = hf_tokenizer(ex.question, add_special_tokens=False)["input_ids"]
    short = next(f for f in features if f["_example_index"] == 1)
    assert short["input_ids"][1 : 1 + len(full)].tolist() == full  # short questions are untouched


def test_doc_stride_too_large_is_a_clear_error(fixtures, tokenizer):
    examples = qa.read_examples(_path(fixtures, "dev"))[:2]
    with pytest.raises(BertkitError, match=rf"id {examples[0].qid}\): max_seq_length=30 leaves 16 passage .* doc_stride=16"):
        qa.encode(examples, tokenizer, 30, doc_stride=16)
    assert qa.encode(examples, tokenizer, 31, doc_stride=16)  # 17 passage tokens per window: fine
    with pytest.raises(ConfigError, match="doc_stride=-1"):
        qa.encode(examples, tokenizer, 64, doc_stride=-1)


def test_collate_feeds_the_model(fixtures, tokenizer):
    import torch

    from bertkit import BertConfig

    examples = qa.read_examples(_path(fixtures, "v2"))
    evaluation = qa.encode(examples, tokenizer, **SMALL)
    training = qa.encode(examples, tokenizer, **SMALL, training=True)
    batch = qa.collate(evaluation[:4], tokenizer.pad_token_id)
    assert set(batch) == {"input_ids", "token_type_ids", "attention_mask"} and batch["input_ids"].shape == (4, 64)
    batch = qa.collate(training[:6], tokenizer.pad_token_id)
    assert batch["start_positions"].tolist() == [f["start_positions"] for f in training[:6]]
    config = BertConfig.from_preset("tiny", hidden_size=32, num_attention_heads=4, intermediate_size=64,
                                    num_hidden_layers=1, max_position_embeddings=64, num_labels=2)
    torch.manual_seed(0)
    out = qa.model_class()(config)(**batch)
    assert out.start_logits.shape == (6, 64) and torch.isfinite(out.loss)


# ---------------------------------------------------------------------------- post-processing


def _oracle_logits(examples, features):
    """Per feature: 10 at the start and end token of the first gold answer whose characters
    are exactly a token span in that window, 10 at [CLS] when there is none (no answer)."""
    starts, ends = [], []
    for f in features:
        ex = examples[f["_example_index"]]
        start, end = np.zeros(len(f["input_ids"])), np.zeros(len(f["input_ids"]))
        offsets = f["_offsets"]
        spans = [
            (np.flatnonzero(offsets[:, 0] == a), np.flatnonzero(offsets[:, 1] == a + len(text)))
            for text, a in ex.answers
        ]
        spans = [(s[0], e[0]) for s, e in spans if len(s) and len(e)]
        i, j = spans[0] if spans else (0, 0)
        start[i] = end[j] = 10.0
        starts.append(start)
        ends.append(end)
    return starts, ends


@pytest.mark.parametrize("name", ["dev", "train", "v2"])
def test_oracle_logits_recover_the_gold_answers(fixtures, tokenizer, name):
    path = _path(fixtures, name)
    examples = qa.read_examples(path)
    features = qa.encode(examples, tokenizer, **SMALL)
    starts, ends = _oracle_logits(examples, features)
    version = 2 if name == "v2" else 1
    out = qa.postprocess(examples, features, starts, ends, version=version)
    scores = evaluate_squad(read_squad_dataset(path), out.predictions)
    assert scores["exact_match" if version == 1 else "exact"] == 100.0
    for ex in examples:
        assert out.predictions[ex.qid] in ({""} if ex.is_impossible else {text for text, _ in ex.answers})
        assert out.nbest[ex.qid][0]["text"] == out.predictions[ex.qid]
        assert sum(c["probability"] for c in out.nbest[ex.qid]) == pytest.approx(1.0)
    # some answers lie only in a later window (not in the example's first one)
    later = {f["_example_index"] for f, s in zip(features, starts, strict=True) if s.argmax() > 0}
    firsts = {}
    for k, f in enumerate(features):
        firsts.setdefault(f["_example_index"], k)
    assert any(starts[firsts[i]].argmax() == 0 for i in later)
    if version == 2:
        assert all(out.null_diffs[ex.qid] > 0 for ex in examples if ex.is_impossible)
        assert all(out.null_diffs[ex.qid] < 0 for ex in examples if not ex.is_impossible)
        assert all(c["text"] == "" for ex in examples if ex.is_impossible for c in out.nbest[ex.qid][:1])
    else:
        assert out.null_diffs is None


def test_training_positions_as_logits_give_the_covering_tokens(fixtures, tokenizer):
    """The labels of encode(training=True) used as logits: the answer comes back, or (for
    a gold answer inside a longer word, e.g. "gold" in "golden") the whole word piece."""
    examples = qa.read_examples(_path(fixtures, "dev"), training=True)
    evaluation = qa.encode(examples, tokenizer, **SMALL)
    training = qa.encode(examples, tokenizer, **SMALL, training=True)
    starts = [np.eye(len(t["input_ids"]))[t["start_positions"]] * 10 for t in training]
    ends = [np.eye(len(t["input_ids"]))[t["end_positions"]] * 10 for t in training]
    out = qa.postprocess(examples, evaluation, starts, ends)
    exact = 0
    for ex in examples:
        text, start = ex.answers[0]
        predicted = out.nbest[ex.qid][0]
        assert predicted["start_char"] <= start and start + len(text) <= predicted["end_char"]
        exact += out.predictions[ex.qid] == text
    assert exact == len(examples) - 2  # "gold" (in "golden") and "8" (in "20–18") are inside tokens


def _brute_force_best(ex, features, starts, ends, max_answer_length):
    """Best (score, text) over every window and every valid passage span, by loops."""
    best = (-np.inf, "")
    for f, s, e in zip(features, starts, ends, strict=True):
        offsets = f["_offsets"]
        for i in range(len(s)):
            for j in range(i, min(i + max_answer_length, len(s))):
                if offsets[i, 0] >= 0 and offsets[j, 0] >= 0 and s[i] + e[j] > best[0]:
                    best = (s[i] + e[j], ex.context[offsets[i, 0] : offsets[j, 1]])
    return best


def test_random_logits_respect_span_rules(fixtures, tokenizer):
    rng = np.random.default_rng(7)
    examples = qa.read_examples(_path(fixtures, "train"))[:6]
    features = qa.encode(examples, tokenizer, **SMALL)
    starts = [rng.normal(size=len(f["input_ids"])) for f in features]
    ends = [rng.normal(size=len(f["input_ids"])) for f in features]
    for s, e, f in zip(starts, ends, features, strict=True):  # the highest logits on question / special tokens
        outside = f["_offsets"][:, 0] < 0
        s[outside] += 100
        e[outside] += 100
    padded_starts = np.full((len(features), 64), 1e9)  # (N, T') rows padded past each feature's length
    padded_ends = np.full((len(features), 64), 1e9)
    for k, (s, e) in enumerate(zip(starts, ends, strict=True)):
        padded_starts[k, : len(s)], padded_ends[k, : len(e)] = s, e
    out = qa.postprocess(examples, features, padded_starts, padded_ends, n_best_size=5, max_answer_length=4)
    for ex in examples:
        groups = [k for k, f in enumerate(features) if f["_example_index"] == examples.index(ex)]
        score, text = _brute_force_best(ex, [features[k] for k in groups], [starts[k] for k in groups],
                                        [ends[k] for k in groups], 4)
        assert out.predictions[ex.qid] == text and out.nbest[ex.qid][0]["score"] == pytest.approx(score)
        nbest = out.nbest[ex.qid]
        assert len(nbest) == 5 and [c["score"] for c in nbest] == sorted((c["score"] for c in nbest), reverse=True)
        assert len({(c["start_char"], c["end_char"]) for c in nbest}) == 5
        for c in nbest:
            assert c["text"] == ex.context[c["start_char"] : c["end_char"]] and c["text"].strip()
            assert c["start_logit"] < 50 and c["end_logit"] < 50  # never a question / special token
            lengths = [  # in the windows holding this span: its length in tokens
                np.flatnonzero(features[k]["_offsets"][:, 1] == c["end_char"])[0]
                - np.flatnonzero(features[k]["_offsets"][:, 0] == c["start_char"])[0] + 1
                for k in groups
                if c["start_char"] in features[k]["_offsets"][:, 0] and c["end_char"] in features[k]["_offsets"][:, 1]
            ]
            assert lengths and min(lengths) <= 4


NULL_DIFFS = {"hm-rail-1": -4.0, "hm-rail-2": 1.0, "hm-rail-3": -2.0, "hm-rail-4": 3.0, "hm-bake-1": -1.0,
              "hm-bake-2": 0.5, "hm-rail-5": 2.0, "hm-rail-6": 5.0, "hm-bake-3": 0.25}


def test_v2_null_threshold_on_hand_set_scores(fixtures, tokenizer):
    """Single windows; the best span (score 10) is the gold answer, or a plausible answer
    for unanswerable questions; [CLS] gets 10 + the chosen null difference."""
    path = _path(fixtures, "v2")
    examples = qa.read_examples(path)
    plausible = {q["id"]: q["plausible_answers"][0] for _, q in _raw_questions(path) if q["is_impossible"]}
    features = qa.encode(examples, tokenizer, 256, doc_stride=64)
    assert len(features) == len(examples)
    starts, ends = [], []
    for f, ex in zip(features, examples, strict=True):
        text, a = ex.answers[0] if ex.answers else (plausible[ex.qid]["text"], plausible[ex.qid]["answer_start"])
        i = np.flatnonzero(f["_offsets"][:, 0] == a)[0]
        j = np.flatnonzero(f["_offsets"][:, 1] == a + len(text))[0]
        s, e = np.zeros(len(f["input_ids"])), np.zeros(len(f["input_ids"]))
        s[i] = e[j] = 5.0
        s[0] = e[0] = (10.0 + NULL_DIFFS[ex.qid]) / 2
        starts.append(s)
        ends.append(e)
    out = qa.postprocess(examples, features, starts, ends, version=2)
    assert out.null_diffs == pytest.approx(NULL_DIFFS)
    answered = {qid for qid, diff in NULL_DIFFS.items() if diff <= 0}
    assert {qid for qid, text in out.predictions.items() if text} == answered == {"hm-rail-1", "hm-rail-3", "hm-bake-1"}
    assert out.best_texts["hm-rail-5"] == "1972"  # the plausible span: best non-null, not predicted
    # the official sweep: answering up to diff 1.0 gains rail-2 and bake-2 but loses bake-3 -> 7 of 9
    best = qa.best_null_threshold(examples, out.null_diffs, out.best_texts)
    assert best.threshold == 1.0 and best.score == pytest.approx(700 / 9)
    tuned = qa.postprocess(examples, features, starts, ends, version=2, null_threshold=best.threshold)
    assert {qid for qid, text in tuned.predictions.items() if text} == {
        "hm-rail-1", "hm-rail-3", "hm-bake-1", "hm-bake-3", "hm-bake-2", "hm-rail-2"}
    assert evaluate_squad(read_squad_dataset(path), tuned.predictions)["exact"] == pytest.approx(best.score)
    v1 = qa.postprocess(examples, features, starts, ends, version=1)
    assert v1.null_diffs is None and all(v1.predictions.values())


def test_postprocess_needs_evaluation_features(fixtures, tokenizer):
    examples = qa.read_examples(_path(fixtures, "v2"))
    training = qa.encode(examples, tokenizer, **SMALL, training=True)
    logits = [np.zeros(len(f["input_ids"])) for f in training]
    with pytest.raises(BertkitError, match="training=False"):
        qa.postprocess(examples, training, logits, logits)
    with pytest.raises(BertkitError, match="features but"):
        qa.postprocess(examples, training, logits[:-1], logits)
    with pytest.raises(ConfigError, match="SQuAD version 3"):
        qa.postprocess(examples, training, logits, logits, version=3)


def test_doc_stride_error_suggests_a_stride_that_fits(fixtures, tokenizer):
    """`finetune squad --max-seq-length 128` keeps the default doc_stride 128: the error names a stride to use."""
    examples = qa.read_examples(fixtures / "squad_dev-v1.1.json")[:2]
    with pytest.raises(BertkitError, match=r"doc_stride=128 must be smaller \(e\.g\. --doc-stride 30 or a larger"):
        qa.encode(examples, tokenizer, 128, doc_stride=128)
    assert qa.encode(examples, tokenizer, 128, doc_stride=30)  # the suggestion works (any question of <= 64 tokens)
    with pytest.raises(BertkitError, match=r"must be smaller \(e\.g\. a larger --max-seq-length\)"):
        qa.encode(examples, tokenizer, 30, doc_stride=16)  # no stride fits beside a 64-token question
