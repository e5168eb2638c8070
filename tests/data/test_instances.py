"""Instance creation (NSP, SOP, packed) on synthetic documents whose token ids say where
they come from: id = BASE + 1000 * document + sentence, so every token of an instance
names its document and sentence. Truncation can drop a whole short sentence at the
A/B boundary, so on the varied corpus "B follows A" allows a gap there; with sentences of
one length (truncation removes fewer tokens than a sentence has) B must start exactly at
the sentence after A."""

from __future__ import annotations

import random

import pytest

from bertkit.data.instances import (
    IGNORE_INDEX,
    IN_ORDER,
    IS_NEXT,
    NOT_NEXT,
    SWAPPED,
    nsp_instances,
    packed_instances,
    sop_instances,
    truncate_pair,
)

CLS, SEP, BASE = 2, 3, 10
MAX_LEN = 24


def token(document: int, sentence: int) -> int:
    return BASE + 1000 * document + sentence


def origin(token_id: int) -> tuple[int, int]:
    return divmod(token_id - BASE, 1000)


def synthetic_corpus(num_documents: int, seed: int = 0, min_sentences: int = 2) -> list[list[list[int]]]:
    """Documents of 2..40 sentences (or 1.. with min_sentences=1) of 1..12 tokens."""
    rng = random.Random(seed)
    return [
        [[token(d, j)] * rng.randint(1, 12) for j in range(rng.randint(min_sentences, 40))]
        for d in range(num_documents)
    ]


def check_pair_layout(ids: list[int], segment_b: int) -> tuple[list[int], list[int]]:
    """[CLS] A [SEP] B [SEP] within MAX_LEN, A and B non-empty; returns (A, B)."""
    assert len(ids) <= MAX_LEN
    assert ids[0] == CLS and ids[-1] == SEP and ids[segment_b - 1] == SEP
    assert [i for i, t in enumerate(ids) if t == SEP] == [segment_b - 1, len(ids) - 1]
    a, b = ids[1 : segment_b - 1], ids[segment_b:-1]
    assert a and b
    return a, b


def sentences_of(tokens: list[int]) -> list[tuple[int, int]]:
    """Distinct (document, sentence) origins in order of appearance."""
    return list(dict.fromkeys(origin(t) for t in tokens))


def contiguous(origins: list[tuple[int, int]]) -> bool:
    return all(d == origins[0][0] for d, _ in origins) and all(
        b[1] == a[1] + 1 for a, b in zip(origins, origins[1:])
    )


@pytest.fixture(scope="module")
def corpus():
    docs = synthetic_corpus(900)
    assert sum(len(s) for d in docs for s in d) >= 100_000
    return docs


@pytest.fixture(scope="module")
def nsp(corpus):
    instances = []
    for copy in range(10):
        rng = random.Random(copy)
        for index in range(len(corpus)):
            instances += nsp_instances(index, corpus, MAX_LEN, 0.1, rng, CLS, SEP)
    return instances


def test_nsp_is_next_half_of_the_time(nsp):
    assert len(nsp) > 40_000
    is_next = sum(label == IS_NEXT for _, _, label in nsp) / len(nsp)
    assert abs(is_next - 0.5) < 0.01


def follows(first: list[tuple[int, int]], second: list[tuple[int, int]]) -> int:
    """How many sentences after `first` ends `second` starts (1 = right after), same document asserted."""
    assert first[-1][0] == second[0][0]
    return second[0][1] - first[-1][1]


def test_nsp_layout_and_origins(nsp):
    steps = []
    for ids, segment_b, label in nsp:
        a, b = check_pair_layout(ids, segment_b)
        a_origins, b_origins = sentences_of(a), sentences_of(b)
        assert contiguous(a_origins) and contiguous(b_origins)  # runs of consecutive sentences of one document
        if label == IS_NEXT:  # B is the real continuation of A in the same document
            steps.append(follows(a_origins, b_origins))
        else:
            assert label == NOT_NEXT and b_origins[0][0] != a_origins[0][0]
    assert min(steps) >= 1


def equal_length_corpus(num_documents: int, length: int = 5) -> list[list[list[int]]]:
    rng = random.Random(4)
    return [[[token(d, j)] * length for j in range(rng.randint(2, 30))] for d in range(num_documents)]


def test_nsp_is_next_b_starts_at_the_next_sentence():
    docs = equal_length_corpus(300)
    seen = set()
    for index in range(len(docs)):
        for ids, segment_b, label in nsp_instances(index, docs, MAX_LEN, 0.1, random.Random(index), CLS, SEP):
            a, b = check_pair_layout(ids, segment_b)
            if label == IS_NEXT:
                assert follows(sentences_of(a), sentences_of(b)) == 1
            seen.add(label)
    assert seen == {IS_NEXT, NOT_NEXT}


def test_nsp_uses_the_full_length_mostly(nsp):
    full = sum(len(ids) >= MAX_LEN - 2 for ids, _, _ in nsp) / len(nsp)
    assert full > 0.6  # whole sentences rarely fill the last 2 slots exactly; short targets are 10%


def test_nsp_short_sequence_probability():
    # One-token sentences: a document's first full chunk holds exactly its target length,
    # so the longest instance of a document (minus 3 specials) is the target drawn for it.
    docs = [[[token(d, j)] for j in range(120)] for d in range(3000)]
    max_tokens = MAX_LEN - 3
    targets = []
    for index in range(len(docs)):
        instances = list(nsp_instances(index, docs, MAX_LEN, 0.1, random.Random(index), CLS, SEP))
        targets.append(max(len(ids) - 3 for ids, _, _ in instances))
    assert all(2 <= t <= max_tokens for t in targets)
    short = [t for t in targets if t < max_tokens]
    # P(short) = 0.1 * (1 - 1/(max_tokens - 1)): the uniform draw can give the full length too
    expected = 0.1 * (max_tokens - 2) / (max_tokens - 1)
    assert abs(len(short) / len(targets) - expected) < 0.02
    assert len(set(short)) == max_tokens - 2  # every shorter length 2..max-1 occurs


def test_one_sentence_documents_are_not_next_and_serve_as_random_b():
    docs = [[[token(d, 0)] * 5] for d in range(50)]  # every document is one sentence
    instances = [x for i in range(len(docs)) for x in nsp_instances(i, docs, MAX_LEN, 0.0, random.Random(i), CLS, SEP)]
    assert len(instances) == 50
    for ids, segment_b, label in instances:
        a, b = check_pair_layout(ids, segment_b)
        assert label == NOT_NEXT and origin(b[0])[0] != origin(a[0])[0]


def test_nsp_random_documents_pool():
    docs = synthetic_corpus(5, seed=1)
    pool = synthetic_corpus(30, seed=2)
    pool = [[[t + 500 for t in s] for s in d] for d in pool]  # sentence index 500+: recognisably from the pool
    for index in range(len(docs)):
        for ids, segment_b, label in nsp_instances(index, docs, MAX_LEN, 0.0, random.Random(index), CLS, SEP, pool):
            _, b = check_pair_layout(ids, segment_b)
            assert (origin(b[0])[1] >= 500) == (label == NOT_NEXT)


def test_nsp_is_deterministic_for_a_seed(corpus):
    def run(seed):
        return [x for i in range(50) for x in nsp_instances(i, corpus, MAX_LEN, 0.1, random.Random(seed), CLS, SEP)]

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_sop_balance_and_order(corpus):
    instances = []
    for copy in range(12):
        rng = random.Random(copy)
        for document in corpus:
            instances += sop_instances(document, MAX_LEN, 0.1, rng, CLS, SEP)
    assert len(instances) > 40_000
    swapped = sum(label == SWAPPED for _, _, label in instances) / len(instances)
    assert abs(swapped - 0.5) < 0.01
    steps = []
    for ids, segment_b, label in instances:
        a, b = check_pair_layout(ids, segment_b)
        first, second = (a, b) if label == IN_ORDER else (b, a)
        steps.append(follows(sentences_of(first), sentences_of(second)))  # always one document, in order
    assert min(steps) >= 1
    for document in equal_length_corpus(300):
        for ids, segment_b, label in sop_instances(document, MAX_LEN, 0.1, random.Random(len(document)), CLS, SEP):
            a, b = check_pair_layout(ids, segment_b)
            first, second = (a, b) if label == IN_ORDER else (b, a)
            assert follows(sentences_of(first), sentences_of(second)) == 1


def test_sop_one_sentence_document_is_cut_in_two():
    document = [[token(0, 0)] * 9]
    instances = [x for seed in range(40) for x in sop_instances(document, MAX_LEN, 0.0, random.Random(seed), CLS, SEP)]
    assert len(instances) == 40
    for ids, segment_b, _ in instances:
        a, b = check_pair_layout(ids, segment_b)
        assert len(a) + len(b) == 9
    assert {label for _, _, label in instances} == {IN_ORDER, SWAPPED}


def test_truncate_pair_trims_the_longer_side():
    rng = random.Random(0)
    a, b = list(range(10)), list(range(100, 103))
    ta, tb = truncate_pair(a, b, 8, rng)
    assert len(ta) == 5 and tb == b  # only the longer side lost tokens
    assert ta == a[a.index(ta[0]) : a.index(ta[0]) + 5]  # a contiguous window of a
    ta, tb = truncate_pair(list(range(10)), list(range(10)), 6, rng)
    assert (len(ta), len(tb)) == (3, 3)
    assert truncate_pair([1, 2], [3], 5, rng) == ([1, 2], [3])
    # each removed token comes from the front or the back with probability 1/2: Binomial(10, 0.5) from the front
    fronts = [truncate_pair(list(range(20)), [], 10, random.Random(s))[0][0] for s in range(400)]
    assert abs(sum(fronts) / len(fronts) - 5) < 0.4 and min(fronts) < 3 and max(fronts) > 7


def test_packed_sequences():
    docs = synthetic_corpus(60, seed=3, min_sentences=1)
    docs[5].insert(2, [token(5, 99)] * 70)  # longer than a whole sequence: cut into pieces
    instances = list(packed_instances(docs, MAX_LEN, CLS, SEP))
    room = MAX_LEN - 2
    stream: list[int] = []
    for ids, segment_b, label in instances:
        assert segment_b == 0 and label == IGNORE_INDEX
        assert ids[0] == CLS and ids[-1] == SEP and 3 <= len(ids) <= MAX_LEN
        stream += ids[1:-1]
    # with [SEP] between documents the contents are the corpus in order, nothing lost or repeated
    expected: list[int] = []
    for document in docs:
        tokens = [t for s in document for t in s]
        expected += ([SEP] if expected else []) + tokens
    assert [t for t in stream if t != SEP] == [t for t in expected if t != SEP]
    # an inner [SEP] only where a document ends inside a sequence
    for ids, _, _ in instances:
        inner = ids[1:-1]
        for i, t in enumerate(inner):
            if t == SEP:
                assert origin(inner[i - 1])[0] + 1 == origin(inner[i + 1])[0]
    # sentences are whole unless longer than a sequence; the long one fills whole sequences
    long = token(5, 99)
    length_of = {sentence[0]: len(sentence) for document in docs for sentence in document}
    assert [len(ids) for ids, _, _ in instances if long in ids][:3] == [MAX_LEN] * 3
    for ids, _, _ in instances:
        for t in set(ids[1:-1]) - {SEP, long}:
            assert ids.count(t) == length_of[t], "a sentence was split across sequences"
    # greedy: the next sentence did not fit into the room left
    for (ids, _, _), (following, _, _) in zip(instances, instances[1:]):
        last, first = ids[-2], following[1]
        if long not in (last, first):
            separator = origin(last)[0] != origin(first)[0]
            assert len(ids) - 2 + separator + length_of[first] > room


def test_ignore_index_matches_the_model():
    from bertkit.model.bert.modeling import IGNORE_INDEX as MODEL_IGNORE_INDEX

    assert IGNORE_INDEX == MODEL_IGNORE_INDEX


def test_packed_sequences_without_a_classification_token():
    """A tokenizer without [CLS] (T5's): `s1 s2 ... </s>`, one more text token per sequence, the same text."""
    docs = synthetic_corpus(60, seed=3, min_sentences=1)
    with_cls = list(packed_instances(docs, MAX_LEN, CLS, SEP))
    without = list(packed_instances(docs, MAX_LEN, None, SEP))
    assert all(ids[-1] == SEP and CLS not in ids and len(ids) <= MAX_LEN for ids, _, _ in without)
    assert max(len(ids) for ids, _, _ in without) == MAX_LEN
    text = [t for ids, _, _ in with_cls for t in ids[1:-1] if t != SEP]
    assert [t for ids, _, _ in without for t in ids[:-1] if t != SEP] == text
