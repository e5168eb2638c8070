"""The demo's fill-mask examples: sentences of the corpus, each with one word masked and
that word kept as the answer, chosen before training and never trained on.

For the embedded novels they are ten fixed sentences of Emma; each masked word is one of
the novels' 150 most frequent words (the words a model learns first, so a few minutes of
pre-training on 2 cores can show learning). For a user's `--corpus` they are drawn from its
own lines with a seeded generator: a sentence of 6 to 25 words, one of its alphabetic words
that the trained tokenizer keeps whole masked. Either way `held_out_corpus` writes the
corpus without the lines that hold them: the tokenizer and the model never see them.
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

    @property
    def sentence(self) -> str:
        """The sentence as the corpus has it."""
        return self.text.replace(MASK, self.word, 1)

    def hit(self, predictions: list[dict]) -> bool:
        """Whether the top predictions hold the corpus's word (compared case-insensitively:
        the demo's tokenizer lowercases)."""
        return any(p["token_str"].strip().lower() == self.word.lower() for p in predictions[:TOP_K])


# sentences of Emma (the embedded corpus), held out of training; the masked word: rank in the novels' word counts
AUSTEN_EXAMPLES = [
    Example(f"I am {MASK} she will be pleased with the children.", "sure"),  # 129
    Example(f"After this speech he was gone as soon {MASK} possible.", "as"),  # 18
    Example(f"I do {MASK} know any body who draws so well as you do.", "not"),  # 12
    Example(f"It is the greatest amusement in {MASK} world!", "the"),  # 1
    Example(f"We had had a great deal {MASK} trouble in persuading him to sit at all.", "of"),  # 4
    Example(f"{MASK} was a very pretty girl, and her beauty happened to be of a sort which Emma particularly admired.",
            "She"),  # 11
    Example(f"They {MASK} now approaching the cottage, and all idle topics were superseded.", "were"),  # 40
    Example(f"The want of Miss Taylor would {MASK} felt every hour of every day.", "be"),  # 13
    Example(f"He had his shepherd's son into the parlour one night on purpose to sing {MASK} her.", "to"),  # 2
    Example(f"It {MASK} Miss Taylor's loss which first brought grief.", "was"),  # 9
]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def corpus_examples(files: list[Path], is_whole_word, count: int = 10, seed: int = 42,
                    skip_bad: bool = False) -> list[Example]:
    """`count` examples drawn from `files` (a user's corpus): seeded, before training.
    `is_whole_word(word)` says whether the tokenizer keeps a word as one token."""
    from bertkit.textio import iter_lines

    sentences = []
    for path in files:
        for _, line in iter_lines(path, skip_bad=skip_bad):
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


def held_out_corpus(files: list[Path], examples: list[Example], output: Path, skip_bad: bool = False) -> int:
    """Write `files` as one text file without the lines (paragraphs) that hold an example's
    sentence, blank lines (document breaks) kept; returns how many lines were left out. `skip_bad`:
    undecodable lines are skipped (counted in a warning) instead of stopping."""
    from bertkit.textio import iter_lines

    sentences = [example.sentence for example in examples]
    removed = 0
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output, "w", encoding="utf-8") as out:
        for path in files:
            for _, line in iter_lines(path, skip_bad=skip_bad):
                if any(sentence in line for sentence in sentences):
                    removed += 1
                    continue
                out.write(line + "\n")
            out.write("\n")  # a file ends a document
    return removed
