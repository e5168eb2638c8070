"""The demo's fill-mask examples: sentences from the corpus's own world, each with one word
masked and that word kept as the answer, chosen before training.

For the embedded novels they are fixed sentences taken from the novels themselves (so
they may sit in the training split: the demo shows what the model learnt of the corpus,
not generalisation). For a user's `--corpus` they are drawn from its own lines with a
seeded generator: a sentence of 6 to 25 words, one of its alphabetic words that the
trained tokenizer keeps whole masked.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

MASK = "[MASK]"
TOP_K = 5


@dataclass(frozen=True)
class Example:
    text: str  # with one [MASK]
    word: str  # the corpus's word at the mask

    def hit(self, predictions: list[dict]) -> bool:
        """Whether the top predictions hold the corpus's word (compared case-insensitively:
        the demo's tokenizer lowercases)."""
        return any(p["token_str"].strip().lower() == self.word.lower() for p in predictions[:TOP_K])


# sentences of Austen's novels (the embedded corpus), the masked word in brackets
AUSTEN_EXAMPLES = [
    Example(f"It is a truth universally acknowledged, that a single {MASK} in possession of a good fortune, must be in want of a wife.", "man"),
    Example(f"Emma Woodhouse, handsome, clever, and rich, with a comfortable {MASK} and happy disposition.", "home"),
    Example(f"She was the youngest of the two {MASK} of a most affectionate, indulgent father.", "daughters"),
    Example(f"Her {MASK} had died too long ago for her to have more than an indistinct remembrance of her caresses.", "mother"),
    Example(f"I really could not {MASK} exclaiming!", "help"),
    Example(f"After this speech he was gone as soon as {MASK}.", "possible"),
    Example(f"I do not {MASK} any body who draws so well as you do.", "know"),
    Example(f"I dare say they must have been very much obliged to {MASK} for coming.", "you"),
    Example(f"We had had a great {MASK} of trouble in persuading him to sit at all.", "deal"),
    Example(f"Sir {MASK} sent friendly advice and professions, Lady Bertram dispatched money and baby-linen.", "thomas"),
]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def corpus_examples(files: list[Path], is_whole_word, count: int = 10, seed: int = 42) -> list[Example]:
    """`count` examples drawn from `files` (a user's corpus): seeded, before training.
    `is_whole_word(word)` says whether the tokenizer keeps a word as one token."""
    from bertkit.textio import iter_lines

    sentences = []
    for path in files:
        for _, line in iter_lines(path):
            sentences.extend(s for s in _SENTENCE_END.split(line.strip()) if 6 <= len(s.split()) <= 25)
    rng = random.Random(seed)
    rng.shuffle(sentences)
    examples: list[Example] = []
    for sentence in sentences:
        words = sentence.split()
        candidates = [i for i, w in enumerate(words) if w.isalpha() and len(w) > 2 and is_whole_word(w)]
        if not candidates:
            continue
        index = rng.choice(candidates)
        examples.append(Example(" ".join([*words[:index], MASK, *words[index + 1:]]), words[index]))
        if len(examples) == count:
            break
    return examples
