"""WordPiece training by the likelihood rule (the rule the BERT literature describes).

Every word starts as characters: the first as is, the rest with the `##` prefix
(`play` -> p ##l ##a ##y). Repeatedly merge the adjacent pair (s, t) maximizing

    score(s, t) = count(st) / (count(s) * count(t))

with all counts weighted by word frequency; only pairs with count >= min_frequency are
candidates; ties go to the higher pair count, then to the lexicographically smaller
(s, t) (plain string order). `play` + `##ing` -> `playing`, `##a` + `##b` -> `##ab`.

How it stays fast in pure Python. A merge of (a, b) changes
  * pair counts only in the words that contain (a, b): an index pair -> words finds
    them, and only the pairs next to each merge site are updated;
  * count(a) and count(b), which fall, so every candidate pair containing a or b now
    scores higher. Pairs are grouped by their right symbol t: inside group t the order
    is that of count(st) / count(s), which count(t) does not affect, so a change of
    count(t) re-ranks the whole group with one entry in the top-level heap. Only the
    pairs with a or b on the *left* (far fewer) are re-queued one by one.
Each group is a heap, and a top-level heap holds each group's best pair. Entries are
never updated in place: a stale one is detected when it surfaces (its counts no longer
match) and dropped or re-queued with its true value (lazy validation), so the first
up-to-date entry that surfaces is the true maximum. A pair below min_frequency can only
lose count (pairs gain count only when they contain a freshly merged token), so such
pairs are never indexed.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

from tqdm import tqdm

_SHIFT = 32  # pair key = left_id << 32 | right_id
_LOW = (1 << _SHIFT) - 1


@dataclass(frozen=True)
class LearnedVocab:
    """The outcome: initial alphabet (vocab order) and the learned tokens in merge order.

    `merges` lists every merge applied, including the rare ones whose result was already
    a token (two different splits of the same string), which add no new token.
    """

    alphabet: list[str]
    learned: list[str]
    merges: list[tuple[str, str]]


def select_alphabet(word_counts: Mapping[str, int], limit_alphabet: int | None = None, prefix: str = "##") -> list[str]:
    """The initial symbols: kept characters (plain), then their `##` forms, each sorted by code point.

    With `limit_alphabet` only that many most frequent characters are kept (ties: lower
    code point). Every kept character gets its plain form; the `##` form is added for
    characters that occur inside a multi-character word (punctuation and CJK characters,
    which BERT always splits off, never need one). Encoding a word needs every one of its
    characters in the right form, so both forms are kept whether or not training saw both.
    """
    char_counts: Counter[str] = Counter()
    in_long_words: set[str] = set()
    for word, freq in word_counts.items():
        for char in word:
            char_counts[char] += freq
        if len(word) > 1:
            in_long_words.update(word)
    kept = sorted(char_counts, key=lambda c: (-char_counts[c], c))
    if limit_alphabet is not None:
        kept = kept[:limit_alphabet]
    kept.sort()
    return kept + [prefix + c for c in kept if c in in_long_words]


def learn_wordpiece(
    word_counts: Mapping[str, int],
    alphabet: Sequence[str],
    max_new_tokens: int,
    *,
    min_frequency: int = 2,
    prefix: str = "##",
    max_word_chars: int = 100,
    show_progress: bool = False,
) -> LearnedVocab:
    """Learn up to `max_new_tokens` tokens over `alphabet` by the likelihood rule.

    Words longer than `max_word_chars` or with characters outside `alphabet` are left
    out: BERT's encoder turns them into [UNK] whole, so they cannot shape the vocabulary.
    Deterministic: the result depends only on the inputs.
    """
    state = _MergeState(alphabet, prefix, min_frequency)
    state.add_words(word_counts, max_word_chars)
    learned: list[str] = []
    merges: list[tuple[str, str]] = []
    with tqdm(total=max_new_tokens, desc="wordpiece merges", unit=" tokens", disable=not show_progress) as bar:
        while len(learned) < max_new_tokens:
            best = state.pop_best()
            if best is None:
                break
            left, right = best >> _SHIFT, best & _LOW
            merges.append((state.names[left], state.names[right]))
            if state.merge(left, right):
                learned.append(state.names[-1])
                bar.update(1)
    return LearnedVocab(alphabet=list(alphabet), learned=learned, merges=merges)


class _MergeState:
    """Words as symbol-id lists, symbol and pair counts, the pair -> words index, the heaps."""

    def __init__(self, alphabet: Sequence[str], prefix: str, min_frequency: int):
        self.prefix = prefix
        self.min_frequency = min_frequency
        self.names: list[str] = list(alphabet)
        self.ids: dict[str, int] = {name: i for i, name in enumerate(self.names)}
        self.symbol_counts: list[int] = [0] * len(self.names)
        self.words: list[list[int]] = []
        self.freqs: list[int] = []
        self.pair_counts: dict[int, int] = {}
        self.where: dict[int, list[int]] = {}  # candidate or merge-made pair -> word indices (may be stale)
        self.as_left: list[set[int]] = [set() for _ in self.names]  # symbol s -> candidate pairs (s, *)
        # group t: heap of (-count(st)/count(s), -count(st), s, key) over candidate pairs (*, t)
        self.groups: list[list[tuple[float, int, str, int]]] = [[] for _ in self.names]
        # one entry per group best: (-score, -count, s, t, t_id); stale entries are re-checked
        self.best: list[tuple[float, int, str, str, int]] = []

    # ---------------------------------------------------------------- setup

    def add_words(self, word_counts: Mapping[str, int], max_word_chars: int) -> None:
        """Split each usable word into initial symbols; count symbols and pairs; fill the heaps."""
        ids, prefix = self.ids, self.prefix
        symbol_counts, pair_counts = self.symbol_counts, self.pair_counts
        for word in sorted(word_counts):
            freq = word_counts[word]
            if freq <= 0 or not word or len(word) > max_word_chars:
                continue
            first = ids.get(word[0])
            rest = [ids.get(prefix + c) for c in word[1:]]
            if first is None or None in rest:
                continue
            symbols = [first, *rest]
            self.words.append(symbols)
            self.freqs.append(freq)
            for s in symbols:
                symbol_counts[s] += freq
            for left, right in zip(symbols, symbols[1:]):
                key = left << _SHIFT | right
                pair_counts[key] = pair_counts.get(key, 0) + freq
        threshold, where = self.min_frequency, self.where
        for index, symbols in enumerate(self.words):
            for left, right in zip(symbols, symbols[1:]):
                key = left << _SHIFT | right
                if pair_counts[key] >= threshold:
                    where.setdefault(key, []).append(index)
        for key in where:
            self.as_left[key >> _SHIFT].add(key)
            self.groups[key & _LOW].append(self._inner_entry(key))
        for group in self.groups:
            heapq.heapify(group)
        self._publish(range(len(self.groups)))

    # ---------------------------------------------------------------- heaps
    # score(s, t) = count(st) / count(s) / count(t). Within group t the order by
    # count(st) / count(s) is the order by score, and a change of count(t) moves the whole
    # group at once: it costs one entry in `best`, not one per pair.

    def _inner_entry(self, key: int) -> tuple[float, int, str, int]:
        count = self.pair_counts[key]
        left = key >> _SHIFT
        return (-count / self.symbol_counts[left], -count, self.names[left], key)

    def _group_top(self, t: int) -> tuple[float, int, str, int] | None:
        """The up-to-date best entry of group t (stale entries dropped or re-queued), or None."""
        group, pair_counts, symbol_counts = self.groups[t], self.pair_counts, self.symbol_counts
        while group:
            neg_inner, neg_count, left_name, key = group[0]
            count = pair_counts.get(key, 0)
            if count < self.min_frequency or count != -neg_count:
                heapq.heappop(group)  # gone, or its count changed (the change pushed a fresh entry)
                continue
            inner = count / symbol_counts[key >> _SHIFT]
            if inner == -neg_inner:
                return group[0]
            heapq.heapreplace(group, (-inner, neg_count, left_name, key))  # out of date: true value
        return None

    def _publish(self, groups) -> None:
        """Push the current best entry of each of `groups` onto `best`."""
        for t in groups:
            top = self._group_top(t)
            if top is not None:
                heapq.heappush(self.best, self._best_entry(top, t))

    def _best_entry(self, top: tuple[float, int, str, int], t: int) -> tuple[float, int, str, str, int]:
        count, key = -top[1], top[3]
        score = count / (self.symbol_counts[key >> _SHIFT] * self.symbol_counts[t])  # exact ints: ties stay ties
        return (-score, top[1], top[2], self.names[t], t)

    def pop_best(self) -> int | None:
        """The key of the best candidate pair, or None when no candidate is left."""
        best = self.best
        while best:
            entry = heapq.heappop(best)
            t = entry[4]
            top = self._group_top(t)
            if top is None:
                continue
            current = self._best_entry(top, t)
            if current == entry:
                return top[3]
            heapq.heappush(best, current)  # the group moved since this entry: re-queue it
        return None

    # ---------------------------------------------------------------- one merge

    def merge(self, a: int, b: int) -> bool:
        """Merge every (a, b) in the corpus; True when the result is a new token."""
        merged_name = self.names[a] + self.names[b][len(self.prefix) :]
        n = self.ids.get(merged_name)
        is_new = n is None
        if is_new:
            n = len(self.names)
            self.names.append(merged_name)
            self.ids[merged_name] = n
            self.symbol_counts.append(0)
            self.as_left.append(set())
            self.groups.append([])

        delta: dict[int, int] = {}
        merged_total = 0
        words, freqs, where = self.words, self.freqs, self.where
        for index in dict.fromkeys(where.pop(a << _SHIFT | b, ())):
            old = words[index]
            new, starts = _merge_in_word(old, a, b, n)
            if not starts:
                continue  # stale index entry
            freq = freqs[index]
            merged_total += len(starts) * freq
            words[index] = new
            # pairs of `old` touching a merge site disappear; pairs of `new` touching n appear
            gone = set()
            for i in starts:
                gone.update((i - 1, i, i + 1))
            for j in gone:
                if 0 <= j < len(old) - 1:
                    key = old[j] << _SHIFT | old[j + 1]
                    delta[key] = delta.get(key, 0) - freq
            born = set()
            for k, symbol in enumerate(new):
                if symbol == n:
                    born.update((k - 1, k))
            for j in born:
                if 0 <= j < len(new) - 1:
                    key = new[j] << _SHIFT | new[j + 1]
                    delta[key] = delta.get(key, 0) + freq
                    where.setdefault(key, []).append(index)

        counts = self.symbol_counts
        counts[a] -= merged_total
        counts[b] -= merged_total
        counts[n] += merged_total

        threshold, pair_counts = self.min_frequency, self.pair_counts
        refresh: set[int] = set()  # pairs whose entry must be pushed again
        for key, change in delta.items():
            if not change:
                continue
            before = pair_counts.get(key, 0)
            after = before + change
            if after:
                pair_counts[key] = after
            else:
                del pair_counts[key]
            if after >= threshold:
                if before < threshold:
                    self.as_left[key >> _SHIFT].add(key)
                refresh.add(key)
        # count(a), count(b) fell: pairs with a or b on the left move inside their groups;
        # groups a and b (pairs with them on the right) move as a whole.
        for symbol in {a, b}:
            pairs = self.as_left[symbol]
            pairs.difference_update([key for key in pairs if pair_counts.get(key, 0) < threshold])
            refresh.update(pairs)
        risen = {a, b}  # groups whose best may have risen
        groups = self.groups
        for key in refresh:
            group = groups[key & _LOW]
            entry = self._inner_entry(key)
            heapq.heappush(group, entry)
            if group[0] is entry:
                risen.add(key & _LOW)
        self._publish(sorted(risen))
        return is_new


def _merge_in_word(word: list[int], a: int, b: int, n: int) -> tuple[list[int], list[int]]:
    """`word` with every non-overlapping (a, b), left to right, replaced by n; and the old start indices."""
    starts: list[int] = []
    new: list[int] = []
    i, last = 0, len(word) - 1
    while i < last:
        if word[i] == a and word[i + 1] == b:
            starts.append(i)
            new.append(n)
            i += 2
        else:
            new.append(word[i])
            i += 1
    if i == last:
        new.append(word[last])
    return new, starts
