"""Streaming a training corpus: texts from files, and word counts on all cores.

Files are plain text (one sentence or paragraph per line), JSONL (`text_field` of each
object) or TSV with a header (`tsv_column` names the column), each optionally `.gz`.
Reading is line by line; memory holds the word-count table and a few chunks in flight,
never the corpus. Chunks are counted by a process pool.

Counting fast. Normalization and pre-tokenization (BERT's, or byte-level BPE's) never
join text across whitespace, so ASCII lines go through one C-level regex that does
exactly what the pipeline does to ASCII, and other lines are split on whitespace in C
(`str.split`) and counted, after which only each *distinct* whitespace token is run
through the Rust normalizer and pre-tokenizer of the tokenizer being trained. The counts
equal running the full pipeline on every line (a test checks it on awkward text).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from tokenizers import pre_tokenizers
from tqdm import tqdm

from bertkit.columnar import expand_inputs, is_columnar, iter_column_texts
from bertkit.errors import BertkitError
from bertkit.parallel import parallel_map
from bertkit.textio import check_readable, cut_long_line, iter_lines
from bertkit.tokenization.metaspace import METASPACE, metaspace_pre_tokenizer, unigram_normalizer
from bertkit.tokenization.normalizers import bert_normalizer
from bertkit.tokenization.train.options import TextOptions

CHUNK_CHARS = 1 << 21  # ~2M characters of text per work item

# Characters Python's str.split() treats as whitespace but BERT's clean_text deletes
# (control characters), so a word around them is one word for BERT: drop them first.
_DELETED_SPACES = "\x0b\x0c\x1c\x1d\x1e\x1f\x85"
_DELETE_TABLE = str.maketrans("", "", _DELETED_SPACES)
_PRINTABLE_ASCII = re.compile(r"[\x21-\x7e]+\Z")
# In ASCII text BERT deletes control characters (tab, newline, CR become spaces) and
# treats every printable character that is not a letter or digit as punctuation.
_ASCII_CONTROLS = str.maketrans("", "", "".join(map(chr, [*range(0, 9), 11, 12, *range(14, 32), 127])))
_ASCII_WORDS = re.compile(r"[A-Za-z0-9]+|[^A-Za-z0-9\s]")
# GPT-2's split pattern (as the ByteLevel pre-tokenizer has it) restricted to ASCII text
_ASCII_BYTELEVEL = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+")
_BYTE_SPACE = "\u0120"  # "Ġ": the byte-level symbol of a space
# Python's str.split() splits at these; Unicode (and so the Rust WhitespaceSplit) does not
_PYTHON_ONLY_SPACES = re.compile("[\x1c-\x1f]")
SCHEMES = ("bert", "bytelevel", "metaspace")


@dataclass(frozen=True)
class CorpusSource:
    """Where the text is: files, and how to read them."""

    files: tuple[str, ...]
    text_field: str = "text"
    tsv_column: str | None = None
    skip_bad_lines: bool = False

    def __post_init__(self) -> None:
        if not self.files:
            raise BertkitError("no corpus files given")


def text_normalizer(text: TextOptions):
    """The `tokenizers` normalizer that training and encoding share."""
    return bert_normalizer(
        lowercase=text.lowercase is not False,
        strip_accents=text.strip_accents,
        handle_chinese_chars=text.tokenize_chinese_chars is not False,
        clean_text=True,
        keep_hangul=text.keep_hangul,
        nfkc=text.nfkc,
    )


def iter_texts(source: CorpusSource) -> Iterator[str]:
    """Every non-blank text of every file, in order (errors name file and line). A Parquet or
    Arrow file gives its `text_field` column (or `tsv_column`), a record batch at a time."""
    for path in source.files:
        if is_columnar(path):
            for _, text in iter_column_texts(path, source.tsv_column or source.text_field):
                if text and not text.isspace():
                    yield from cut_long_line(text, CHUNK_CHARS)
        elif source.tsv_column is None:
            for _, text in iter_lines(path, text_field=source.text_field, skip_bad=source.skip_bad_lines):
                if text and not text.isspace():
                    yield from cut_long_line(text, CHUNK_CHARS)  # a file without line breaks: bounded chunks
        else:
            yield from _iter_tsv_column(path, source.tsv_column, source.skip_bad_lines)


def _iter_tsv_column(path: str, column: str, skip_bad: bool) -> Iterator[str]:
    lines = iter_lines(path, skip_bad=skip_bad)
    first = next(lines, None)
    if first is None:
        return
    header = first[1].split("\t")
    if column not in header:
        raise BertkitError(f"{path}:1: no column {column!r} in the TSV header (columns: {', '.join(header)})")
    index = header.index(column)
    for line_no, line in lines:
        cells = line.split("\t")
        if len(cells) != len(header):
            if skip_bad or not line:
                continue
            raise BertkitError(f"{path}:{line_no}: {len(cells)} TSV fields, the header has {len(header)}")
        text = cells[index]
        if text and not text.isspace():
            yield text


def iter_chunks(texts: Iterable[str], chunk_chars: int = CHUNK_CHARS) -> Iterator[list[str]]:
    """Group texts into lists of about `chunk_chars` characters."""
    chunk: list[str] = []
    size = 0
    for text in texts:
        chunk.append(text)
        size += len(text)
        if size >= chunk_chars:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


class WordCounter:
    """Counts the words a trainer sees in chunks of texts: normalized, then pre-tokenized
    by `scheme` "bert" (BertPreTokenizer: whitespace and punctuation), "bytelevel"
    (GPT-2 regex on each whitespace word with its leading space, bytes as printable
    symbols: "Ġhello") or "metaspace" (NFKC, whitespace words marked "▁hello": Unigram).

    Holds only its options until first used, so it is cheap to send to worker processes;
    each builds its own normalizer (and morpheme analyzer) there.
    """

    CACHE_LIMIT = 1 << 20  # distinct whitespace tokens remembered between chunks

    def __init__(self, text: TextOptions, scheme: str = "bert"):
        if scheme not in SCHEMES:
            raise ValueError(f"scheme={scheme!r} (allowed: {', '.join(SCHEMES)})")
        self.text = text if text.lowercase is not None else replace(text, lowercase=True)
        self.scheme = scheme
        self._pipeline = None
        self._cache: dict[str, list[str]] = {}

    def __getstate__(self):
        return {"text": self.text, "scheme": self.scheme, "_pipeline": None, "_cache": {}}

    def __call__(self, texts: Sequence[str]) -> Counter[str]:
        """Word counts of `texts`."""
        _, _, split = self._parts()
        if split is not None:
            texts = [split(t) for t in texts]
        if self.scheme == "metaspace":
            return self._count_metaspace(texts)
        words: Counter[str] = Counter()
        # ASCII lines: the whole pipeline is a translate, a lower() and one regex (all in C)
        ascii_text = "\n".join(t for t in texts if t.isascii()).translate(_ASCII_CONTROLS)
        if self.text.lowercase:
            ascii_text = ascii_text.lower()
        if self.scheme == "bert":
            words.update(_ASCII_WORDS.findall(ascii_text))
        else:  # every word gets one leading space (prefix space per line, runs collapsed)
            pieces = Counter(_ASCII_BYTELEVEL.findall(" " + " ".join(ascii_text.split())))
            for piece, count in pieces.items():
                words[piece.replace(" ", _BYTE_SPACE)] += count
        other = "\n".join(t for t in texts if not t.isascii())
        if any(c in other for c in _DELETED_SPACES):
            other = other.translate(_DELETE_TABLE)
        cache = self._cache
        if len(cache) > self.CACHE_LIMIT:
            cache.clear()
        for token, count in Counter(other.split()).items():
            pieces = cache.get(token)
            if pieces is None:
                pieces = cache[token] = self.words_of(token)
            for word in pieces:
                words[word] += count
        return words

    def _count_metaspace(self, texts: Sequence[str]) -> Counter[str]:
        """Unigram words: NFKC'd (lowercased) whitespace words with a "▁" in front."""
        normalizer, pre_tokenizer, _ = self._parts()
        words: Counter[str] = Counter()
        if _PYTHON_ONLY_SPACES.search("".join(texts)):  # rare: run those lines through the Rust pipeline
            awkward = [t for t in texts if _PYTHON_ONLY_SPACES.search(t)]
            for text in awkward:
                words.update(w for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
            texts = [t for t in texts if not _PYTHON_ONLY_SPACES.search(t)]
        ascii_text = "\n".join(t for t in texts if t.isascii())  # NFKC leaves ASCII as it is
        if self.text.lowercase:
            ascii_text = ascii_text.lower()
        for word, count in Counter(ascii_text.split()).items():
            words[METASPACE + word] += count
        cache = self._cache
        if len(cache) > self.CACHE_LIMIT:
            cache.clear()
        for token, count in Counter("\n".join(t for t in texts if not t.isascii()).split()).items():
            pieces = cache.get(token)
            if pieces is None:
                pieces = cache[token] = self.words_of(token)
            for word in pieces:
                words[word] += count
        return words

    def _parts(self) -> tuple[Any, Any, Callable[[str], str] | None]:
        """(normalizer, pre-tokenizer, morpheme splitter or None), built on first use in each process."""
        if self._pipeline is None:
            if self.scheme == "metaspace":
                pre_tokenizer = metaspace_pre_tokenizer()
            elif self.scheme == "bert":
                pre_tokenizer = pre_tokenizers.BertPreTokenizer()
            else:
                pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
            split = None
            if self.text.morphemes:
                from bertkit.tokenization.morphemes import morpheme_splitter  # kiwipiepy is an optional extra

                split = morpheme_splitter()
            normalizer = (
                unigram_normalizer(self.text.lowercase) if self.scheme == "metaspace" else text_normalizer(self.text)
            )
            self._pipeline = (normalizer, pre_tokenizer, split)
        return self._pipeline

    def words_of(self, token: str) -> list[str]:
        """The words of one whitespace-free token."""
        if self.scheme == "metaspace":
            normalizer, pre_tokenizer, _ = self._parts()
            return [word for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(token))]
        if token.isascii() and _PRINTABLE_ASCII.match(token):
            if self.text.lowercase:
                token = token.lower()
            if self.scheme == "bert":
                return [token] if token.isalnum() else _ASCII_WORDS.findall(token)
            return [piece.replace(" ", _BYTE_SPACE) for piece in _ASCII_BYTELEVEL.findall(" " + token)]
        normalizer, pre_tokenizer, _ = self._parts()
        normalized = normalizer.normalize_str(token)
        if self.scheme == "bert":
            return [word for word, _ in pre_tokenizer.pre_tokenize_str(normalized)]
        return [piece for word in normalized.split() for piece, _ in pre_tokenizer.pre_tokenize_str(" " + word)]


def count_words(
    source: CorpusSource,
    text: TextOptions,
    *,
    scheme: str = "bert",
    workers: int | None = None,
    show_progress: bool = False,
    chunk_chars: int = CHUNK_CHARS,
) -> dict[str, int]:
    """Word -> count over the whole corpus (see `WordCounter` for `scheme`), counted by
    `workers` processes (None: all cores).

    Work items are chunks of about `chunk_chars` characters. Raises `BertkitError` when
    the corpus holds no words at all.
    """
    counts: Counter[str] = Counter()
    with tqdm(desc="counting words", unit=" lines", disable=not show_progress, unit_scale=True) as bar:
        chunks = _counted(iter_chunks(iter_texts(source), chunk_chars), bar)
        for partial in parallel_map(WordCounter(text, scheme), chunks, workers=workers):
            counts.update(partial)
    if not counts:
        raise BertkitError(f"no text in {', '.join(source.files)}: only empty documents (blank lines or none), nothing can be built")
    return dict(counts)


def _counted(chunks: Iterable[list[str]], bar: tqdm) -> Iterator[list[str]]:
    for chunk in chunks:
        bar.update(len(chunk))
        yield chunk


def existing_files(paths: Iterable[str | Path]) -> tuple[str, ...]:
    """The paths as strings, each checked up front to be a readable file (errors name the path);
    a folder of Parquet / Arrow files (or a datasets save_to_disk folder) stands for its files."""
    return tuple(str(check_readable(path)) for path in expand_inputs(list(paths)))

