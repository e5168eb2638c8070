"""XLNet's pairs: contiguous segments `A <sep> B <sep> <cls>`, B the continuation or a random segment.

The rules of the original pre-processing (zihangdai/xlnet `data_utils.py`, `_split_a_and_b`),
applied to one document at a time (the original runs over one stream of the whole corpus):
a window starts at `begin` and holds `max_seq_length - 3` tokens; its cut points are the
sentence boundaries inside it, and `end` is the first boundary at or past the window's
length (or the document's end).
- With probability 1/2, or when the window has no cut point: A runs from `begin` to a random
  cut point (to `end` without one), B is a random stretch of whole sentences from anywhere in
  the slice (at least the room A leaves), and the next window starts where A ended (label
  NOT_NEXT, 1).
- Otherwise A ends at a random cut point, B is the rest of the window up to `end`, and the
  next window starts after B (label IS_NEXT, 0).
- While A and B together exceed the room, the longer loses its last token.

The `<sep>` and `<cls>` ids are the tokenizer's sep and cls tokens (`[SEP]`/`[CLS]` for a
WordPiece tokenizer). `segment_b` is the index of B's first token; the objective gives
`<cls>` its own segment id 2, as XLNet's tokenizer does. The labels are bertkit's NSP
convention (0 = B continues A), the opposite of the original's `label`; no XLNet objective
reads them.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence

from bertkit.data.formats.base import InstanceFormat
from bertkit.data.instances import IS_NEXT, NOT_NEXT, Document, Instance

SPECIALS = 3  # <sep>, <sep>, <cls>


class XLNetFormat(InstanceFormat):
    name = "xlnet"
    help = "XLNet pairs A <sep> B <sep> <cls>, B the continuation or random (50/50)"
    needs_tokens = ("cls", "sep", "mask")  # <mask>: XLNet's vocabulary carries it, as the original's data does

    def make(self, documents, recipe, rng, cls_id, sep_id, random_documents=None):
        pool = Stream(random_documents if random_documents is not None else documents)
        instances: list[Instance] = []
        for document in documents:
            instances += xlnet_instances(Stream([document]), pool, recipe["max_seq_length"], rng, cls_id, sep_id)
        return instances


class Stream:
    """Documents as one array of token ids with the positions where sentences start."""

    def __init__(self, documents: Sequence[Document]):
        self.ids: list[int] = []
        self.boundaries: list[int] = []  # sentence starts, then the end: sorted, unique
        for document in documents:
            for sentence in document:
                if sentence:
                    self.boundaries.append(len(self.ids))
                    self.ids += sentence
        self.boundaries.append(len(self.ids))

    def __len__(self) -> int:
        return len(self.ids)

    def sentence_start(self, position: int) -> int:
        """The start of the sentence holding `position`."""
        return self.boundaries[bisect.bisect_right(self.boundaries, position) - 1]

    def sentence_end(self, position: int) -> int:
        """The first boundary at or after `position` (the end of its sentence)."""
        return self.boundaries[bisect.bisect_left(self.boundaries, position)]


def xlnet_instances(document: Stream, pool: Stream, max_seq_length: int, rng: random.Random, cls_id: int,
                    sep_id: int) -> list[Instance]:
    """The instances of one document (a Stream of it); random B segments come from `pool`."""
    room = max_seq_length - SPECIALS
    instances = []
    begin = 0
    while begin < len(document):
        first = bisect.bisect_right(document.boundaries, begin)
        cut_points, end = [], len(document)
        for boundary in document.boundaries[first:]:
            if boundary - begin >= room:
                end = boundary
                break
            cut_points.append(boundary)
        cut_points = [c for c in cut_points if c < len(document)]
        if not cut_points or rng.random() < 0.5:
            a_end = rng.choice(cut_points) if cut_points else end
            b_len = max(1, room - (a_end - begin))
            b_begin = rng.randrange(max(1, len(pool) - b_len + 1))
            b_ids = pool.ids[pool.sentence_start(b_begin):pool.sentence_end(min(b_begin + b_len, len(pool)))]
            a_ids, label, begin_next = document.ids[begin:a_end], NOT_NEXT, a_end
        else:
            a_end = rng.choice(cut_points)
            a_ids, b_ids, label, begin_next = document.ids[begin:a_end], document.ids[a_end:end], IS_NEXT, end
        a_ids, b_ids = _trim_right(list(a_ids), list(b_ids), room)
        instances.append(([*a_ids, sep_id, *b_ids, sep_id, cls_id], len(a_ids) + 1, label))
        begin = begin_next
    return instances


def _trim_right(a: list[int], b: list[int], room: int) -> tuple[list[int], list[int]]:
    """Drop the last token of the longer of `a`/`b` (of `b` on a tie, as the original) until they fit `room`."""
    excess = len(a) + len(b) - room
    while excess > 0:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()
        excess -= 1
    return a, b
