"""Pre-training instances from tokenized documents: NSP pairs, SOP pairs, packed sequences.

A document here is a list of sentences, each a list of token ids (no special tokens).
Every function is pure: randomness comes only from the `random.Random` passed in.
An instance is `(input_ids, segment_b, label)`:
  input_ids  `[CLS] A [SEP] B [SEP]` (pairs) or `[CLS] text [SEP]` (packed), at most
             max_seq_length ids
  segment_b  index of B's first token (token type 1 from there to the end); 0 = one segment
  label      nsp: 0 IsNext / 1 NotNext; sop: 0 in order / 1 swapped; packed: -100

NSP follows Google's `create_pretraining_data.py` (the paper's generator): per document,
a target length of max_seq_length - 3, replaced with probability `short_seq_prob` by a
length drawn uniformly from [2, target]; whole sentences accumulate into a chunk until the
target is reached; A = the chunk's first `a_end` sentences (`a_end` uniform); B = the rest
of the chunk (IsNext, 50%) or sentences from a random other document from a random start
until B reaches its share of the target (NotNext; the chunk's unused sentences are put
back); the longer of A and B loses one token at a time, from the front or the back at
random, until both fit.

One deliberate difference: Google makes every one-sentence chunk NotNext, which leaves
IsNext a few percent short of half. Here such a chunk is a coin flip like the others; its
IsNext partner is the sentence(s) just before it (or the next one for a document's first
sentence), so B still really follows A. Only a one-sentence document is always NotNext.

SOP (ALBERT) chunks the same way; B is always the real continuation, and A and B are
swapped with probability 0.5 (label 1). A one-sentence document is cut at a random token.

Packed (RoBERTa FULL-SENTENCES): one segment; whole sentences fill max_seq_length - 2
slots contiguously across documents, with an extra [SEP] between documents; a sentence
that does not fit starts the next sequence, and one longer than a whole sequence is cut.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from bertkit.labels import IGNORE_INDEX  # no torch: building data never needs it


Sentence = Sequence[int]
Document = Sequence[Sentence]
Instance = tuple[list[int], int, int]  # (input_ids, segment_b, label)

IS_NEXT, NOT_NEXT = 0, 1
IN_ORDER, SWAPPED = 0, 1


def target_length(max_seq_length: int, short_seq_prob: float, rng: random.Random, specials: int = 3) -> int:
    """Tokens of text per instance for one document: max_seq_length - specials, or with
    probability `short_seq_prob` a length uniform in [2, that]."""
    max_tokens = max_seq_length - specials
    if rng.random() < short_seq_prob:
        return rng.randint(2, max_tokens)
    return max_tokens


def nsp_instances(
    document_index: int,
    documents: Sequence[Document],
    max_seq_length: int,
    short_seq_prob: float,
    rng: random.Random,
    cls_id: int,
    sep_id: int,
    random_documents: Sequence[Document] | None = None,
) -> Iterator[Instance]:
    """NSP instances from `documents[document_index]`.

    NotNext B comes from `random_documents` (default: `documents`, skipping this one),
    which must hold a document other than this one.
    """
    document = documents[document_index]
    pool = documents if random_documents is None else random_documents
    exclude = document_index if random_documents is None else None
    max_tokens = max_seq_length - 3
    target = target_length(max_seq_length, short_seq_prob, rng)
    chunk: list[Sentence] = []
    length = 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = _concat(chunk[:a_end])
            is_random_next = rng.random() < 0.5
            if not is_random_next:
                if len(chunk) >= 2:
                    tokens_b = _concat(chunk[a_end:])
                else:
                    pair = _pair_around(document, i, target)
                    if pair is None:  # a one-sentence document: only NotNext is possible
                        is_random_next = True
                    else:
                        tokens_a, tokens_b = pair
            if is_random_next:
                tokens_b = _random_continuation(pool, exclude, target - len(tokens_a), rng)
                i -= len(chunk) - a_end  # put the unused sentences back
            yield _pair_instance(tokens_a, tokens_b, max_tokens, rng, cls_id, sep_id,
                                 NOT_NEXT if is_random_next else IS_NEXT)
            chunk, length = [], 0
        i += 1


def sop_instances(
    document: Document,
    max_seq_length: int,
    short_seq_prob: float,
    rng: random.Random,
    cls_id: int,
    sep_id: int,
) -> Iterator[Instance]:
    """SOP instances from one document: consecutive A, B; swapped (label 1) with probability 0.5."""
    max_tokens = max_seq_length - 3
    target = target_length(max_seq_length, short_seq_prob, rng)
    chunk: list[Sentence] = []
    length = 0
    for i, sentence in enumerate(document):
        chunk.append(sentence)
        length += len(sentence)
        if i == len(document) - 1 or length >= target:
            if len(chunk) >= 2:
                a_end = rng.randint(1, len(chunk) - 1)
                pair = (_concat(chunk[:a_end]), _concat(chunk[a_end:]))
            else:
                pair = _pair_around(document, i, target)
                if pair is None and len(chunk[0]) >= 2:  # one-sentence document: cut the sentence
                    cut = rng.randint(1, len(chunk[0]) - 1)
                    pair = (list(chunk[0][:cut]), list(chunk[0][cut:]))
            chunk, length = [], 0
            if pair is None:
                continue
            tokens_a, tokens_b = pair
            swapped = rng.random() < 0.5
            if swapped:
                tokens_a, tokens_b = tokens_b, tokens_a
            yield _pair_instance(tokens_a, tokens_b, max_tokens, rng, cls_id, sep_id, SWAPPED if swapped else IN_ORDER)


def packed_instances(documents: Sequence[Document], max_seq_length: int, cls_id: int | None,
                     sep_id: int) -> Iterator[Instance]:
    """RoBERTa FULL-SENTENCES sequences `[CLS] s1 s2 ... [SEP]` over `documents` in order, a
    document break marked by [SEP]; without a `cls_id` (T5's tokenizer) `s1 s2 ... </s>`."""
    head = [] if cls_id is None else [cls_id]
    room = max_seq_length - len(head) - 1
    current: list[int] = []
    for document in documents:
        new_document = True
        for sentence in document:
            if not sentence:
                continue
            separator = [sep_id] if new_document and current else []
            new_document = False
            if len(current) + len(separator) + len(sentence) <= room:
                current += separator
                current += sentence
                continue
            if current:
                yield [*head, *current, sep_id], 0, IGNORE_INDEX
            current = list(sentence)
            while len(current) > room:  # a sentence longer than a whole sequence
                yield [*head, *current[:room], sep_id], 0, IGNORE_INDEX
                current = current[room:]
    if current:
        yield [*head, *current, sep_id], 0, IGNORE_INDEX


def truncate_pair(a: list[int], b: list[int], max_tokens: int, rng: random.Random) -> tuple[list[int], list[int]]:
    """Trim the longer of `a`/`b` one token at a time (front or back at random) until
    len(a) + len(b) <= max_tokens. Returns the trimmed copies."""
    a_lo, a_hi, b_lo, b_hi = 0, len(a), 0, len(b)
    while (a_hi - a_lo) + (b_hi - b_lo) > max_tokens:
        front = rng.random() < 0.5
        if a_hi - a_lo > b_hi - b_lo:
            if front:
                a_lo += 1
            else:
                a_hi -= 1
        elif front:
            b_lo += 1
        else:
            b_hi -= 1
    return a[a_lo:a_hi], b[b_lo:b_hi]


def _pair_instance(
    tokens_a: list[int], tokens_b: list[int], max_tokens: int, rng: random.Random, cls_id: int, sep_id: int, label: int
) -> Instance:
    tokens_a, tokens_b = truncate_pair(tokens_a, tokens_b, max_tokens, rng)
    return [cls_id, *tokens_a, sep_id, *tokens_b, sep_id], len(tokens_a) + 2, label


def _concat(sentences: Sequence[Sentence]) -> list[int]:
    tokens: list[int] = []
    for sentence in sentences:
        tokens += sentence
    return tokens


def _pair_around(document: Document, i: int, target: int) -> tuple[list[int], list[int]] | None:
    """A real (A, B) pair for a chunk that is the single sentence `document[i]`:
    B = that sentence and A = the sentences just before it (as many as fit `target`, at
    least one); for the first sentence, A = it and B = the next. None for a one-sentence document."""
    if i == 0:
        return (list(document[0]), list(document[1])) if len(document) >= 2 else None
    tokens_b = list(document[i])
    start = i - 1
    length = len(document[start]) + len(tokens_b)
    while start > 0 and length + len(document[start - 1]) <= target:
        start -= 1
        length += len(document[start])
    return _concat(document[start:i]), tokens_b


def _random_continuation(
    pool: Sequence[Document], exclude: int | None, target_b: int, rng: random.Random
) -> list[int]:
    """Sentences of a random document of `pool` (not `exclude`) from a random start, until
    at least `target_b` tokens (at least one sentence)."""
    if exclude is None:
        index = rng.randrange(len(pool))
    else:
        index = rng.randrange(len(pool) - 1)
        index += index >= exclude
    document = pool[index]
    tokens: list[int] = []
    for sentence in document[rng.randrange(len(document)) :]:
        tokens += sentence
        if len(tokens) >= target_b:
            break
    return tokens
