"""WordPiece training by a likelihood rule (the rule the BERT literature describes).

Every word starts as characters: the first as is, the rest with the `##` prefix
(`play` -> p ##l ##a ##y). Repeatedly merge the adjacent pair (s, t) with the highest
score, all counts weighted by word frequency. Two scores (`score=`):

    pmi    count(st) / (count(s) * count(t))
    gain   the change in the corpus log-likelihood when every (s, t) is merged (below)

Only pairs with count(st) >= min_frequency are candidates; ties go to the higher pair
count, then to the lexicographically smaller (s, t) (plain string order). `play` +
`##ing` -> `playing`, `##a` + `##b` -> `##ab`.

The gain score, derived. A unigram model of the corpus's symbols, with c(x) the count
of symbol x and N = sum c(x), has the maximum log-likelihood

    L = sum_x c(x) log(c(x) / N) = sum_x f(c(x)) - f(N),    f(c) = c log c, f(0) = 0.

Merging every (s, t) into u = st makes k merges (k = count(st) when s != t; when s = t,
a run of r equal symbols is merged left to right into floor(r / 2) pairs) and changes
c(s) -> c(s) - k, c(t) -> c(t) - k (s = t: c(s) - 2k), c(u) -> c(u) + k (c(u) is 0
unless another split already made u) and N -> N - k. Nothing else changes, so

    gain(s, t) = [f(c_s - k) - f(c_s)] + [f(c_t - k) - f(c_t)]
                 + [f(c_u + k) - f(c_u)] - [f(N - k) - f(N)]

exactly. To first order in k (k << c_s, c_t, N; c_u = 0), with f(c - k) - f(c) ~
-k (log c + 1), it is k log(k N / (c_s c_t)) - k = count(st) * (pmi in nats - 1): the
pmi ratio weighted by the pair count, which is what stops the rare-pair preference of
pmi (the form usually quoted, k log(k N / (c_s c_t)), also drops the -k). bertkit
implements the exact form: it costs about the same, and the first-order form is off by
O(k), the size of the score itself, exactly where this rule matters most: frequent pairs
whose k is a large share of c(s) or c(t) (`q` + `##u`: k ~ c(q); the exact term is
-f(c_s), the approximation -f(c_s) - k), and s = t (runs such as `ㅋㅋㅋ` or `000`).

How it stays fast in pure Python. A merge of (a, b) into n changes
  * pair counts only in the words that contain (a, b): an index pair -> words finds
    them, and only the pairs next to each merge site are updated;
  * count(a) and count(b), which fall, and count(n), which rises; N falls by k.
Heap entries are never updated in place: a stale one is detected when it surfaces and
dropped or re-queued with its true value (lazy validation). That is correct as long as
every candidate has an entry at least as high as its current score: then the first
up-to-date entry that surfaces is the true maximum. So every score that can have *risen*
since its entry was queued gets a fresh entry; entries whose score can only have fallen
are left alone. A pair below min_frequency can only lose count (pairs gain count only
when they contain a freshly merged token), so such pairs are never indexed.
  * pmi rises when count(s) or count(t) falls. Pairs are grouped by their right symbol
    t: inside group t the order is that of count(st) / count(s), which count(t) does not
    affect, so a change of count(t) re-ranks the whole group with one entry in the
    top-level heap. Only the pairs with a or b on the *left* (far fewer) are re-queued
    one by one. Each group is a heap, and a top-level heap holds each group's best pair.
  * gain falls as c_s or c_t grows (d/dc [f(c - k) - f(c)] = log((c - k) / c) < 0) and
    rises with c_u (log((c_u + k) / c_u) > 0) and with N (log(N / (N - k)) > 0). N only
    falls, so the gains that can rise are those of pairs with a or b on either side,
    pairs that spell n, and pairs whose count (for s = t: number of merges) changed.
    Grouping does not carry over (the order inside a group depends on count(t) and N),
    and re-queuing every pair of a and b costs ~750 heap pushes per merge on corpus-en
    (`##s` alone has thousands of left neighbours). So entries hold *upper bounds*: the
    gain with each count replaced by a floor (half the count, renewed when the count
    falls below it); only then are all pairs of that symbol re-queued. Popped bounds are
    replaced by exact gains until the best exact gain is at least the highest bound
    left; those exact values go back into the heap and are re-queued when count(s) or
    count(t) falls (see `_GainState`). For 30k tokens on corpus-en: 1.6M bounds computed
    instead of 22M exact re-queues, merges in ~25 s (pmi: ~9 s) instead of ~120 s.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass
from math import log, log1p
from typing import Mapping, Sequence

from tqdm import tqdm

SCORES = ("pmi", "gain")
DEFAULT_SCORE = "gain"

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


def likelihood_gain(merges: int, count_s: int, count_t: int, count_u: int, total: int, same: bool = False) -> float:
    """Change of the unigram log-likelihood (nats) when `merges` pairs (s, t) become u = st.

    count_s, count_t, count_u: symbol counts before the merge; total: all symbols (N).
    `same`: s and t are one symbol (count_t is then ignored; it loses 2 * merges).
    """
    return _symbol_terms(merges, count_s, count_t, count_u, same) - _shrink(total, merges)


def _symbol_terms(merges: int, count_s: int, count_t: int, count_u: int, same: bool) -> float:
    """The gain less its N term: the changes of f(c_s), f(c_t) and f(c_u)."""
    if same:
        change = _shrink(count_s, 2 * merges)
    else:
        change = _shrink(count_s, merges) + _shrink(count_t, merges)
    return change - _shrink(count_u + merges, merges)


def _shrink(count: int, k: int) -> float:
    """f(count - k) - f(count) for f(c) = c log c (f(0) = 0), 0 <= k <= count, without cancellation."""
    if k == 0:
        return 0.0
    if k == count:
        return -count * log(count)
    return (count - k) * log1p(-k / count) - k * log(count)


def learn_wordpiece(
    word_counts: Mapping[str, int],
    alphabet: Sequence[str],
    max_new_tokens: int,
    *,
    score: str = DEFAULT_SCORE,
    min_frequency: int = 2,
    prefix: str = "##",
    max_word_chars: int = 100,
    show_progress: bool = False,
) -> LearnedVocab:
    """Learn up to `max_new_tokens` tokens over `alphabet` by the `score` rule ("pmi" or "gain").

    Words longer than `max_word_chars` or with characters outside `alphabet` are left
    out: BERT's encoder turns them into [UNK] whole, so they cannot shape the vocabulary.
    Deterministic: the result depends only on the inputs.
    """
    if score not in SCORES:
        raise ValueError(f"score={score!r} is unknown (allowed: {', '.join(SCORES)})")
    state = (_PmiState if score == "pmi" else _GainState)(alphabet, prefix, min_frequency)
    state.add_words(word_counts, max_word_chars)
    learned: list[str] = []
    merges: list[tuple[str, str]] = []
    bar = tqdm(total=max_new_tokens, desc=f"wordpiece merges ({score})", unit=" tokens", disable=not show_progress)
    with bar:
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
    """Words as symbol-id lists, symbol and pair counts, the pair -> words index.

    Subclasses keep the candidate pairs ranked: `_init_queue` after the words are
    added, `_requeue` after each merge, `pop_best` to take the best.
    """

    track_runs = False  # count the merges a self pair (x, x) makes (runs of x), for gain

    def __init__(self, alphabet: Sequence[str], prefix: str, min_frequency: int):
        self.prefix = prefix
        self.min_frequency = min_frequency
        self.names: list[str] = list(alphabet)
        self.ids: dict[str, int] = {name: i for i, name in enumerate(self.names)}
        self.symbol_counts: list[int] = [0] * len(self.names)
        self.total = 0  # all symbol occurrences, N
        self.words: list[list[int]] = []
        self.freqs: list[int] = []
        self.pair_counts: dict[int, int] = {}
        self.where: dict[int, list[int]] = {}  # candidate or merge-made pair -> word indices (may be stale)
        self.as_left: list[set[int]] = [set() for _ in self.names]  # symbol s -> candidate pairs (s, *)
        self.runs: dict[int, int] = {}  # x -> merges (x, x) would make (only with track_runs)

    # ---------------------------------------------------------------- setup

    def add_words(self, word_counts: Mapping[str, int], max_word_chars: int) -> None:
        """Split each usable word into initial symbols; count symbols and pairs; fill the queue."""
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
            self.total += freq * len(symbols)
            for s in symbols:
                symbol_counts[s] += freq
            for left, right in zip(symbols, symbols[1:]):
                key = left << _SHIFT | right
                pair_counts[key] = pair_counts.get(key, 0) + freq
            if self.track_runs:
                _add_runs(self.runs, symbols, freq)
        threshold, where = self.min_frequency, self.where
        for index, symbols in enumerate(self.words):
            for left, right in zip(symbols, symbols[1:]):
                key = left << _SHIFT | right
                if pair_counts[key] >= threshold:
                    where.setdefault(key, []).append(index)
        for key in where:
            self.as_left[key >> _SHIFT].add(key)
        self._init_queue()

    def _new_symbol(self, name: str) -> int:
        n = len(self.names)
        self.names.append(name)
        self.ids[name] = n
        self.symbol_counts.append(0)
        self.as_left.append(set())
        return n

    # ---------------------------------------------------------------- one merge

    def merge(self, a: int, b: int) -> bool:
        """Merge every (a, b) in the corpus; True when the result is a new token."""
        merged_name = self.names[a] + self.names[b][len(self.prefix) :]
        n = self.ids.get(merged_name)
        is_new = n is None
        if is_new:
            n = self._new_symbol(merged_name)

        delta: dict[int, int] = {}
        run_delta: dict[int, int] | None = {} if self.track_runs else None
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
            if run_delta is not None:
                _add_runs(run_delta, old, -freq)
                _add_runs(run_delta, new, freq)

        counts = self.symbol_counts
        counts[a] -= merged_total
        counts[b] -= merged_total
        counts[n] += merged_total
        self.total -= merged_total

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
        if run_delta:
            self._apply_run_changes(run_delta, refresh)
        self._requeue(a, b, n, refresh)
        return is_new

    def _apply_run_changes(self, run_delta: dict[int, int], refresh: set[int]) -> None:
        """Add the merges-per-self-pair changes; self pairs whose number changed are re-queued."""
        runs, pair_counts, threshold = self.runs, self.pair_counts, self.min_frequency
        for symbol, change in run_delta.items():
            if change:
                runs[symbol] = runs.get(symbol, 0) + change
                key = symbol << _SHIFT | symbol
                if pair_counts.get(key, 0) >= threshold:
                    refresh.add(key)

    def _candidates(self, pairs: set[int]) -> set[int]:
        """`pairs` with the ones below min_frequency removed (in place); returns it."""
        pair_counts, threshold = self.pair_counts, self.min_frequency
        pairs.difference_update([key for key in pairs if pair_counts.get(key, 0) < threshold])
        return pairs

    # ---------------------------------------------------------------- ranking (subclasses)

    def _init_queue(self) -> None:
        raise NotImplementedError

    def _requeue(self, a: int, b: int, n: int, refresh: set[int]) -> None:
        raise NotImplementedError

    def pop_best(self) -> int | None:
        """The key of the best candidate pair, or None when no candidate is left."""
        raise NotImplementedError


class _PmiState(_MergeState):
    """pmi = count(st) / (count(s) * count(t)): per-right-symbol group heaps under one heap of group bests."""

    def __init__(self, alphabet: Sequence[str], prefix: str, min_frequency: int):
        super().__init__(alphabet, prefix, min_frequency)
        # group t: heap of (-count(st)/count(s), -count(st), s, key) over candidate pairs (*, t)
        self.groups: list[list[tuple[float, int, str, int]]] = [[] for _ in self.names]
        # one entry per group best: (-score, -count, s, t, t_id); stale entries are re-checked
        self.best: list[tuple[float, int, str, str, int]] = []

    def _new_symbol(self, name: str) -> int:
        self.groups.append([])
        return super()._new_symbol(name)

    def _init_queue(self) -> None:
        for key in self.where:
            self.groups[key & _LOW].append(self._inner_entry(key))
        for group in self.groups:
            heapq.heapify(group)
        self._publish(range(len(self.groups)))

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

    def _requeue(self, a: int, b: int, n: int, refresh: set[int]) -> None:
        # count(a), count(b) fell: pairs with a or b on the left move inside their groups;
        # groups a and b (pairs with them on the right) move as a whole.
        for symbol in {a, b}:
            refresh.update(self._candidates(self.as_left[symbol]))
        risen = {a, b}  # groups whose best may have risen
        groups = self.groups
        for key in refresh:
            group = groups[key & _LOW]
            entry = self._inner_entry(key)
            heapq.heappush(group, entry)
            if group[0] is entry:
                risen.add(key & _LOW)
        self._publish(sorted(risen))


class _GainState(_MergeState):
    """gain = the exact log-likelihood change (module docstring): one heap of upper bounds.

    Heap entries hold an upper bound of the pair's gain, computed with each symbol count
    replaced by its *floor* (gain falls as counts grow, so a lower count gives a higher
    value). A symbol's floor is half its count, set again only when the count falls below
    it; only then are all pairs with that symbol re-queued. Most merges take a small share
    of a frequent symbol (`word` + `##s`: `##s` keeps its floor), so its thousands of pairs
    are not re-queued at every merge. The other inputs of a bound are exact when it is
    made: the pair count and merges, count(u) and N. Later changes that lower a gain (N
    and count(u) falling, count(s) or count(t) rising) leave it an upper bound; every
    change that can raise one re-queues the pair. `latest` holds each pair's newest bound:
    an older entry that surfaces is dropped; a newest one made with an older N is
    tightened to the current N and re-queued. `pop_best` computes the exact gain of each
    bound it pops until the best exact gain is at least the highest bound left; the others
    go back with their exact gain (`tight`: re-queued as soon as count(s) or count(t) falls).
    """

    track_runs = True

    def __init__(self, alphabet: Sequence[str], prefix: str, min_frequency: int):
        super().__init__(alphabet, prefix, min_frequency)
        self.as_right: list[set[int]] = [set() for _ in self.names]  # symbol t -> candidate pairs (*, t)
        self.floors: list[int] = []  # symbol -> a lower bound of its count (filled by _init_queue)
        self.spells: dict[int, int] = {}  # pair -> id of the token st, -1 while st is no token
        self.heap: list[tuple[float, int, str, str, int]] = []  # (-bound, -count(st), s, t, key)
        self.latest: dict[int, tuple[float, int, float]] = {}  # key -> (-bound, N, bound less its N term)
        self.tight: list[set[int]] = [set() for _ in self.names]  # symbol -> pairs queued with exact values

    def _new_symbol(self, name: str) -> int:
        self.as_right.append(set())
        self.tight.append(set())
        self.floors.append(0)
        return super()._new_symbol(name)

    @staticmethod
    def _floor(count: int) -> int:
        return count >> 1  # half: fastest of 1/16 .. 31/32 of the count tried on corpus-en

    def _init_queue(self) -> None:
        self.floors = [self._floor(c) for c in self.symbol_counts]
        for key in self.where:
            self.as_right[key & _LOW].add(key)
        self.heap = [self._bound_entry(key) for key in self.where]
        heapq.heapify(self.heap)

    def _merges_and_count_u(self, key: int) -> tuple[int, int]:
        left, right = key >> _SHIFT, key & _LOW
        u = self.spells.get(key)
        if u is None:
            u = self.spells[key] = self.ids.get(self.names[left] + self.names[right][len(self.prefix) :], -1)
        merges = self.runs[left] if left == right else self.pair_counts[key]
        return merges, self.symbol_counts[u] if u >= 0 else 0

    def _bound_entry(self, key: int, symbol_terms: float | None = None) -> tuple[float, int, str, str, int]:
        """A new newest bound of `key` (its symbol terms recomputed unless given)."""
        left, right = key >> _SHIFT, key & _LOW
        merges, count_u = self._merges_and_count_u(key)
        if symbol_terms is None:
            floor_s, floor_t = self.floors[left], self.floors[right]
            if left == right:  # a count is at least what the merges take from it
                symbol_terms = _symbol_terms(merges, max(floor_s, 2 * merges), 0, count_u, True)
            else:
                symbol_terms = _symbol_terms(merges, max(floor_s, merges), max(floor_t, merges), count_u, False)
        neg_bound = _shrink(self.total, merges) - symbol_terms
        self.latest[key] = (neg_bound, self.total, symbol_terms)
        return (neg_bound, -self.pair_counts[key], self.names[left], self.names[right], key)

    def pop_best(self) -> int | None:
        heap, latest, pair_counts, threshold = self.heap, self.latest, self.pair_counts, self.min_frequency
        counts, total = self.symbol_counts, self.total
        best: tuple[float, int, str, str, int] | None = None
        held = []  # (exact entry, its symbol terms) of the bounds popped on the way
        while heap and (best is None or heap[0] < best):  # smaller is better: the top bound may still win
            entry = heapq.heappop(heap)
            key = entry[4]
            if pair_counts.get(key, 0) < threshold:
                latest.pop(key, None)  # merged away or fallen below min_frequency
                continue
            neg_bound, made_with_total, symbol_terms = latest[key]
            if neg_bound != entry[0]:
                continue  # an older bound; the newest is in the heap
            if made_with_total != total:  # N fell since: the same bound at the current N is lower
                heapq.heappush(heap, self._bound_entry(key, symbol_terms))
                continue
            left, right = key >> _SHIFT, key & _LOW
            merges, count_u = self._merges_and_count_u(key)
            exact_terms = _symbol_terms(merges, counts[left], counts[right], count_u, left == right)
            exact = (_shrink(total, merges) - exact_terms, entry[1], entry[2], entry[3], key)  # = -likelihood_gain
            held.append((exact, exact_terms))
            if best is None or exact < best:
                best = exact
        # the others go back with their exact value: an upper bound until count(s) or count(t)
        # falls, and then `_requeue` re-queues them (`tight`)
        for exact, exact_terms in held:
            key = exact[4]
            if key != best[4]:
                latest[key] = (exact[0], total, exact_terms)
                heapq.heappush(heap, exact)
                self.tight[key >> _SHIFT].add(key)
                self.tight[key & _LOW].add(key)
        return None if best is None else best[4]

    def _requeue(self, a: int, b: int, n: int, refresh: set[int]) -> None:
        counts, floors = self.symbol_counts, self.floors
        pair_counts, threshold = self.pair_counts, self.min_frequency
        # a count below its floor invalidates the bounds of every pair with that symbol
        # (else only the pairs queued with their exact value, which used the count itself)
        for symbol in {a, b}:
            if counts[symbol] < floors[symbol]:
                floors[symbol] = self._floor(counts[symbol])
                refresh.update(self._candidates(self.as_left[symbol]))
                refresh.update(self._candidates(self.as_right[symbol]))
            else:
                refresh.update(key for key in self.tight[symbol] if pair_counts.get(key, 0) >= threshold)
            self.tight[symbol].clear()
        floors[n] = self._floor(counts[n])  # count(n) rose: old bounds stay valid, new ones are tighter
        # count(n) rose: pairs that spell n (other splits of the same string) may have risen
        name, ids, prefix = self.names[n], self.ids, self.prefix
        for i in range(1, len(name)):
            left, right = ids.get(name[:i]), ids.get(prefix + name[i:])
            if left is not None and right is not None:
                key = left << _SHIFT | right
                self.spells[key] = n
                if pair_counts.get(key, 0) >= threshold:
                    refresh.add(key)
        heap = self.heap
        for key in refresh:
            self.as_right[key & _LOW].add(key)
            heapq.heappush(heap, self._bound_entry(key))


def _add_runs(runs: dict[int, int], word: list[int], weight: int) -> None:
    """runs[x] += weight * (merges (x, x) makes in `word`): floor(r / 2) per run of r x's."""
    previous, length = -1, 0
    for symbol in word:
        if symbol == previous:
            length += 1
            if not length & 1:  # every second symbol of a run completes one merge
                runs[symbol] = runs.get(symbol, 0) + weight
        else:
            previous, length = symbol, 1


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
