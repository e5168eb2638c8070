"""The likelihood WordPiece trainer, both scores: merge order worked out by hand, ties,
min_frequency, vocab.txt order, determinism, greedy longest-match encoding of the result; the
gain formula against a direct log-likelihood recount; the incremental trainer against a
from-scratch recount for pmi and gain."""

from __future__ import annotations

from pathlib import Path

import pytest

from bertkit.tokenization.train import TextOptions, TrainOptions, train_tokenizer
from bertkit.tokenization.train.wordpiece_likelihood import learn_wordpiece, likelihood_gain, select_alphabet


def learn(word_counts: dict[str, int], min_frequency: int = 2, max_new: int = 100) -> list[str]:
    alphabet = select_alphabet(word_counts)
    return learn_wordpiece(word_counts, alphabet, max_new, score="pmi", min_frequency=min_frequency).learned


PMI = {"score": "pmi", "show_progress": False}


# Hand computation for HAT_CORPUS (score = count(st) / (count(s) * count(t)), min_frequency 2).
# Words as symbols: hat x6 = h ##a ##t, hit x4 = h ##i ##t, ox x2 = o ##x, at x3 = a ##t.
# Symbol counts: h 10, ##a 6, ##t 13, ##i 4, o 2, ##x 2, a 3.
# 1. (h,##a) 6/(10*6)=.100  (##a,##t) 6/(6*13)=.077  (h,##i) 4/(10*4)=.100
#    (##i,##t) 4/(4*13)=.077  (o,##x) 2/(2*2)=.500  (a,##t) 3/(3*13)=.077
#    -> "ox" (a frequency rule would take a count-6 pair first).
# 2. (h,##a) and (h,##i) tie at 0.1 -> higher pair count 6 -> "ha".  Now h 4, ##a 0, ha 6.
# 3. (h,##i) 4/(4*4)=.25 beats (ha,##t) 6/(6*13), (##i,##t) 4/(4*13), (a,##t) 3/(3*13) -> "hi".
# 4. (ha,##t), (hi,##t), (a,##t) all score exactly 1/13 -> pair count 6 wins -> "hat"; ##t 7.
# 5. (hi,##t) 4/(4*7) and (a,##t) 3/(3*7) tie at 1/7 -> count 4 wins -> "hit"; ##t 3.
# 6. (a,##t) 3/(3*3) -> "at". No pair is left.
HAT_CORPUS = {"hat": 6, "hit": 4, "ox": 2, "at": 3}
HAT_MERGES = ["ox", "ha", "hi", "hat", "hit", "at"]


def test_merge_order_worked_out_by_hand():
    assert learn(HAT_CORPUS) == HAT_MERGES


def test_stops_at_the_token_budget():
    assert learn(HAT_CORPUS, max_new=3) == HAT_MERGES[:3]


def test_equal_score_and_count_break_ties_lexicographically():
    # (##a,##b), (c,##d), (q,##a) all score 2/(2*2) with count 2: string order puts "##a" < "c" < "q".
    # After ##ab: (c,##d) and (q,##ab) tie again -> "cd", then "qab".
    assert learn({"qab": 2, "cd": 2}) == ["##ab", "cd", "qab"]
    assert learn({"cd": 2, "qab": 2}) == ["##ab", "cd", "qab"]  # input order does not matter


def test_min_frequency_excludes_rare_pairs():
    # (a,##b) scores 1/(1*1) = 1 but occurs once; (c,##d) scores 3/(3*3).
    assert learn({"ab": 1, "cd": 3}, min_frequency=2) == ["cd"]
    assert learn({"ab": 1, "cd": 3}, min_frequency=1) == ["ab", "cd"]
    assert learn({"ab": 1, "cd": 3}, min_frequency=4) == []


def test_merging_keeps_the_prefix_rules():
    # play + ##ing -> playing; ##a + ##b -> ##ab
    learned = learn({"playing": 3})
    assert learned[-1] == "playing"
    assert all(t.startswith("p") or t.startswith("##") for t in learned)
    assert learn({"xab": 2, "yab": 2})[0] == "##ab"


def test_alphabet_keeps_both_forms_of_word_characters_only():
    assert select_alphabet({"ab": 1, "!": 3, "c": 1}) == ["!", "a", "b", "c", "##a", "##b"]
    assert select_alphabet({"aab": 1, "ccb": 5}, limit_alphabet=2) == ["b", "c", "##b", "##c"]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def hat_file(tmp_path: Path) -> Path:
    words = [w for w, n in HAT_CORPUS.items() for _ in range(n)]
    return write(tmp_path / "hat.txt", " ".join(words[:8]) + "\n" + " ".join(words[8:]).upper() + "\n")


def test_vocab_txt_order_specials_alphabet_merges(tmp_path):
    out = tmp_path / "tok"
    train_tokenizer([hat_file(tmp_path)], out, TrainOptions(vocab_size=100, **PMI))
    vocab = (out / "vocab.txt").read_text(encoding="utf-8").splitlines()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    alphabet = ["a", "h", "i", "o", "t", "x", "##a", "##h", "##i", "##o", "##t", "##x"]
    assert vocab == specials + alphabet + HAT_MERGES


def test_vocab_size_counts_specials_alphabet_and_merges(tmp_path):
    out = tmp_path / "tok"
    result = train_tokenizer([hat_file(tmp_path)], out, TrainOptions(vocab_size=5 + 12 + 2, **PMI))
    assert result.vocab_size == 19
    assert (out / "vocab.txt").read_text().splitlines()[-2:] == HAT_MERGES[:2]


def test_unused_slots_and_custom_specials(tmp_path):
    from bertkit.tokenization.train import SpecialTokens

    specials = SpecialTokens(unk="[OOV]", extra=("[BOS]",), unused=2)
    out = tmp_path / "tok"
    train_tokenizer([hat_file(tmp_path)], out, TrainOptions(vocab_size=100, specials=specials, show_progress=False))
    vocab = (out / "vocab.txt").read_text().splitlines()
    assert vocab[:8] == ["[PAD]", "[OOV]", "[CLS]", "[SEP]", "[MASK]", "[BOS]", "[unused0]", "[unused1]"]


def test_encoding_is_greedy_longest_match(tmp_path):
    from bertkit.tokenization import Tokenizer

    out = tmp_path / "tok"
    train_tokenizer([hat_file(tmp_path)], out, TrainOptions(vocab_size=100, **PMI))
    tok = Tokenizer.from_pretrained(out)
    # "hiat": longest prefix "hi", then "##a", "##t" ("at" exists only word-initially)
    assert tok.tokenize("hat hiat oxo HIT q") == ["hat", "hi", "##a", "##t", "ox", "##o", "hit", "[UNK]"]


def test_training_is_deterministic(tmp_path):
    corpus = write(tmp_path / "c.txt", "\n".join(f"w{i % 7}x{i % 5} playing player plays" for i in range(200)))
    runs = []
    for name, workers in (("a", 1), ("b", 2)):
        train_tokenizer([corpus], tmp_path / name, TrainOptions(vocab_size=80, workers=workers, show_progress=False))
        runs.append((tmp_path / name / "vocab.txt").read_text())
    assert runs[0] == runs[1]


def test_cased_training_keeps_case(tmp_path):
    corpus = write(tmp_path / "c.txt", "Hat hat HAT Hat hat HAT\n")
    out = tmp_path / "tok"
    train_tokenizer([corpus], out, TrainOptions(vocab_size=100, text=TextOptions(lowercase=False), show_progress=False))
    vocab = (out / "vocab.txt").read_text().splitlines()
    assert "H" in vocab and "Hat" in vocab and "HAT" in vocab


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("algorithm", ["wordpiece", "bbpe"])
def test_word_counting_matches_the_full_pipeline(tmp_path, workers, algorithm):
    """Counting splits on whitespace first and normalizes each distinct token once (ASCII
    lines by regex); it must equal running the tokenizer's own Rust normalizer and
    pre-tokenizer on every line (BERT words; byte-level words for bbpe)."""
    from collections import Counter

    from tokenizers import Tokenizer, models

    from bertkit.tokenization.train.corpus import CorpusSource, count_words
    from bertkit.tokenization.train.pipelines import with_pipeline

    lines = [
        "Hello, World! It's BERT's pre-training (v2.0) -- 100% [test] a_b c+d we'LL don't",
        "caf\u00e9 na\u00efve \u00c5ngstr\u00f6m \u0130stanbul \u039f\u0394\u039f\u03a3 \u1e9e\u00df",
        "tab\there\x0bvt\x0cff\x1cfs\x85nel no\u00a0break\u2028line\u3000ideo   many   spaces ",
        "\x00ctrl\x7fdel \u200bzero\ufeffbom \ufffdrepl a\u0301b \u0301lead",
        "\u65e5\u672c\u8a9e\u306e\u6587 \ud55c\uad6d\uc5b4 \ubb38\uc7a5\uc785\ub2c8\ub2e4 \u0915\u093f",
        "\uff26\uff55\uff4c\uff4c \u2460 \ufb01 \u00bd \u00a8x 3.14159 $5,000",
        "emoji \U0001f600\U0001f600 and \u202e rtl",
        "plain ascii line, with punctuation... and 42 numbers!",
    ] * 3
    corpus = write(tmp_path / "c.txt", "\n".join(lines) + "\n")
    scheme = "bytelevel" if algorithm == "bbpe" else "bert"
    for text in (TextOptions(), TextOptions(lowercase=False), TextOptions(nfkc=True), TextOptions(keep_hangul=False)):
        reference = with_pipeline(Tokenizer(models.BPE()), algorithm, text)
        normalizer, pre = reference.normalizer, reference.pre_tokenizer
        expected = Counter(w for line in lines for w, _ in pre.pre_tokenize_str(normalizer.normalize_str(line)))
        got = count_words(CorpusSource((str(corpus),)), text, scheme=scheme, workers=workers, chunk_chars=200)
        assert got == dict(expected), text


def split_word(word: str) -> list[str]:
    return [word[0]] + ["##" + c for c in word[1:]]


def merge_pieces(pieces: list[str], s: str, t: str) -> tuple[list[str], int]:
    """`pieces` with every (s, t), left to right, merged; and the number of merges."""
    out, i, merges = [], 0, 0
    while i < len(pieces):
        if i + 1 < len(pieces) and pieces[i] == s and pieces[i + 1] == t:
            out.append(s + t[2:])
            merges += 1
            i += 2
        else:
            out.append(pieces[i])
            i += 1
    return out, merges


def brute_force_merges(word_counts: dict[str, int], min_frequency: int, max_new: int, score: str) -> list[str]:
    """The rule recomputed from scratch at every step: pmi with exact fractions; gain with
    the merges of each pair counted by merging, N and count(u) recounted."""
    from collections import Counter
    from fractions import Fraction

    words = {w: split_word(w) for w in word_counts}
    learned: list[str] = []
    while len(learned) < max_new:
        symbols: Counter[str] = Counter()
        pairs: Counter[tuple[str, str]] = Counter()
        for word, pieces in words.items():
            for piece in pieces:
                symbols[piece] += word_counts[word]
            for pair in zip(pieces, pieces[1:]):
                pairs[pair] += word_counts[word]
        candidates = []
        for (s, t), n in pairs.items():
            if n < min_frequency:
                continue
            if score == "pmi":
                value = Fraction(n, symbols[s] * symbols[t])
            else:
                merges = n if s != t else sum(merge_pieces(p, s, t)[1] * word_counts[w] for w, p in words.items())
                total = sum(symbols.values())
                value = likelihood_gain(merges, symbols[s], symbols[t], symbols[s + t[2:]], total, same=s == t)
            candidates.append((value, n, (s, t)))
        if not candidates:
            break
        s, t = min(candidates, key=lambda c: (-c[0], -c[1], c[2]))[2]  # score, count, then smaller (s, t)
        for word, pieces in words.items():
            words[word] = merge_pieces(pieces, s, t)[0]
        if s + t[2:] not in learned:
            learned.append(s + t[2:])
    return learned


def random_corpus(seed: int, letters: str, words: int = 60, max_len: int = 7) -> dict[str, int]:
    import random

    rng = random.Random(seed)
    word_counts: dict[str, int] = {}
    for _ in range(words):
        word = "".join(rng.choice(letters) for _ in range(rng.randint(1, max_len)))
        word_counts[word] = word_counts.get(word, 0) + rng.choice([1, 1, 2, 3, 5, 8, 40])
    return word_counts


@pytest.mark.parametrize("seed", range(6))
def test_fast_trainer_equals_brute_force(seed):
    """The incremental pmi trainer (pair index, grouped heaps, lazy validation) makes exactly the
    merges a from-scratch recount makes, on random corpora full of ties and shared pieces."""
    word_counts = random_corpus(seed, "abcde" if seed % 2 else "abcdefghij")
    min_frequency = 1 + seed % 3
    alphabet = select_alphabet(word_counts)
    fast = learn_wordpiece(word_counts, alphabet, 80, score="pmi", min_frequency=min_frequency).learned
    assert fast == brute_force_merges(word_counts, min_frequency, 80, "pmi")


@pytest.mark.parametrize("seed", range(9))
def test_gain_trainer_equals_brute_force(seed):
    """The incremental gain trainer (floor bounds, lazy validation, exact values re-queued
    until a count falls) makes exactly the merges a from-scratch recount makes. Two-letter
    words give long runs (s = t pairs whose merges are fewer than their pair count)."""
    letters = ("ab", "abcde", "abcdefghij")[seed % 3]
    word_counts = random_corpus(seed, letters, words=80, max_len=9)
    min_frequency = 1 + seed % 2
    alphabet = select_alphabet(word_counts)
    fast = learn_wordpiece(word_counts, alphabet, 120, score="gain", min_frequency=min_frequency).learned
    assert fast == brute_force_merges(word_counts, min_frequency, 120, "gain")


def unigram_log_likelihood(segmented: dict[str, list[str]], word_counts: dict[str, int]) -> float:
    """sum_x c(x) log(c(x) / N) over the symbols of the segmented corpus, straight from the definition."""
    import math
    from collections import Counter

    counts: Counter[str] = Counter()
    for word, pieces in segmented.items():
        for piece in pieces:
            counts[piece] += word_counts[word]
    total = sum(counts.values())
    return math.fsum(c * math.log(c / total) for c in counts.values())


def random_segmentation(word: str, rng) -> list[str]:
    cuts = sorted(rng.sample(range(1, len(word)), rng.randint(0, len(word) - 1))) if len(word) > 1 else []
    bounds = [0, *cuts, len(word)]
    return [("##" if i else "") + word[i:j] for i, j in zip(bounds, bounds[1:])]


@pytest.mark.parametrize("seed", range(4))
def test_gain_is_the_log_likelihood_change_of_the_merge(seed):
    """likelihood_gain(...) equals L(after) - L(before) recounted on the whole corpus, for every
    adjacent pair of a randomly segmented corpus: s = t runs and pairs that spell a token which
    is already there (count(u) > 0) included."""
    import random

    rng = random.Random(seed)
    word_counts = random_corpus(seed, "ab" if seed % 2 else "abc", max_len=9)
    words = {w: random_segmentation(w, rng) for w in word_counts}
    word_counts["cbbbbb"] = 3
    words["cbbbbb"] = ["c", "##b", "##b", "##b", "##b", "##b"]  # a run: (##b, ##b) merges 2 of its 4 pairs
    before = unigram_log_likelihood(words, word_counts)
    symbols: dict[str, int] = {}
    pairs = set()
    for word, pieces in words.items():
        for piece in pieces:
            symbols[piece] = symbols.get(piece, 0) + word_counts[word]
        pairs.update(zip(pieces, pieces[1:]))
    total = sum(symbols.values())
    checked_existing = 0
    for s, t in sorted(pairs):
        merged = {w: merge_pieces(p, s, t) for w, p in words.items()}
        merges = sum(m * word_counts[w] for w, (_, m) in merged.items())
        after = unigram_log_likelihood({w: p for w, (p, _) in merged.items()}, word_counts)
        gain = likelihood_gain(merges, symbols[s], symbols[t], symbols.get(s + t[2:], 0), total, same=s == t)
        assert gain == pytest.approx(after - before, rel=1e-9, abs=1e-9), (s, t)
        checked_existing += s + t[2:] in symbols
    assert checked_existing and ("##b", "##b") in pairs


# Gain by hand for HAT_CORPUS, f(c) = c ln c, N = 40 symbols (counts above):
#   (h,##a)  k=6: f(4)-f(10) + f(0)-f(6) + f(6)-f(0) + f(40)-f(34) = -17.481 + 27.659 = 10.178
#   (o,##x)  k=2: f(0)-f(2) + f(0)-f(2) + f(2) + f(40)-f(38) = -1.386 + 9.327 = 7.941
#   (##a,##t) k=6: f(0)-f(6) + f(7)-f(13) + f(6) + 27.659 = 7.936;  (h,##i) k=4: 6.273
#   (##i,##t) k=4: 4.979;  (a,##t) k=3: 3.632
# Count-weighted, the frequent `ha` comes first; pmi took the rare `ox` (0.5 against 0.1).
def test_gain_by_hand_prefers_the_frequent_pair():
    assert likelihood_gain(6, 10, 6, 0, 40) == pytest.approx(10.178, abs=1e-3)
    assert likelihood_gain(2, 2, 2, 0, 40) == pytest.approx(7.941, abs=1e-3)
    assert likelihood_gain(6, 6, 13, 0, 40) == pytest.approx(7.936, abs=1e-3)
    assert likelihood_gain(3, 3, 13, 0, 40) == pytest.approx(3.632, abs=1e-3)
    alphabet = select_alphabet(HAT_CORPUS)
    assert learn_wordpiece(HAT_CORPUS, alphabet, 1, score="gain").learned == ["ha"]
    assert learn_wordpiece(HAT_CORPUS, alphabet, 1, score="pmi").learned == ["ox"]
