"""Pre-training text from the fine-tuning tasks' own training rows, labels dropped (issue 19's
in-domain lever: task-adaptive pre-training, Gururangan et al. 2020), for
`budget_downstream.py --corpus-file`.

    python experiments/task_text_corpus.py en runs/task-text/en.txt.gz   # SST-2 + MRPC train sentences
    python experiments/task_text_corpus.py ko runs/task-text/ko.txt.gz   # the Korean review corpus + NSMC train reviews

Only training text goes in, never an evaluation row: en takes SST-2's and MRPC's train.tsv
(their dev sets are the evaluation sets); ko takes the NSMC file's reviews less the
`--nsmc-held-out` rows budget_downstream.py evaluates on (quality_table's seeded split), after
the whole Korean review corpus (already in-domain: neutral reviews of the same site). Exact
duplicate lines are dropped. The layout is the pre-training one: a line per sentence or
review, a blank line between documents of `--lines-per-document` lines (the tasks' rows
come in random order, so a document is a random handful of them).
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "experiments"))
from quality_table import DATA, KO_CORPUS, SEED, split_indices  # noqa: E402

GLUE = DATA / "glue"
NSMC_FILE = DATA / "nsmc" / "ratings_train.raw-derived.txt.gz"  # quality_table.cut_nsmc's


def tsv_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a TSV with a header row, each non-blank row split into fields
    (bertkit's reader: .gz, a BOM, and an error naming file:line on bytes that are not UTF-8)."""
    from bertkit.tasks.records import iter_rows

    rows = [fields for _, fields in iter_rows(path)]
    if not rows:
        raise SystemExit(f"{path}: empty file (no header row)")
    return rows[0], rows[1:]


def tsv_column(path: Path, column: str) -> list[str]:
    """One column of a TSV with a header row; a row too short to hold it is left out."""
    header, rows = tsv_rows(path)
    index = header.index(column)
    return [fields[index] for fields in rows if len(fields) > index]


def english_lines() -> list[str]:
    sst2 = tsv_column(GLUE / "SST-2" / "train.tsv", "sentence")
    mrpc = tsv_column(GLUE / "MRPC" / "train.tsv", "#1 String") + tsv_column(GLUE / "MRPC" / "train.tsv", "#2 String")
    return sst2 + mrpc


def nsmc_train_reviews(nsmc_held_out: int, path: Path = NSMC_FILE) -> list[str]:
    """The reviews of the NSMC file less the `nsmc_held_out` rows quality_table.cut_nsmc
    evaluates on: the same seeded split over the same rows (file order, header excluded)."""
    header, rows = tsv_rows(path)
    index = header.index("document")
    train, _ = split_indices(len(rows), nsmc_held_out, SEED)
    return [rows[i][index] for i in train if len(rows[i]) > index]


def documents(lines: list[str], per_document: int) -> str:
    """Blank-line separated documents of `per_document` non-empty, first-seen lines."""
    kept = list(dict.fromkeys(line.strip() for line in lines if line.strip()))
    chunks = ["\n".join(kept[i:i + per_document]) for i in range(0, len(kept), per_document)]
    return "\n\n".join(chunks) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("language", choices=["en", "ko"])
    parser.add_argument("output", type=Path, help="a .txt.gz file")
    parser.add_argument("--lines-per-document", type=int, default=20)
    parser.add_argument("--nsmc-held-out", type=int, default=1000, help="as budget_downstream.py's (ko)")
    args = parser.parse_args()
    if args.language == "en":
        text = documents(english_lines(), args.lines_per_document)
    else:  # the review corpus as it is (a movie a document), then the task's reviews
        with gzip.open(KO_CORPUS, "rt", encoding="utf-8") as handle:
            corpus = handle.read().strip()
        text = corpus + "\n\n" + documents(nsmc_train_reviews(args.nsmc_held_out), args.lines_per_document)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.output, "wt", encoding="utf-8") as handle:
        handle.write(text)
    lines = [line for line in text.splitlines() if line]
    print(f"{args.output}: {len(lines):,} lines, {text.count(chr(10) * 2) + 1:,} documents, {len(text.split()):,} words")


if __name__ == "__main__":
    from bertkit.errors import BertkitError

    try:
        main()
    except (BertkitError, OSError) as exc:  # one line naming the file, no traceback
        sys.exit(f"task_text_corpus.py: error: {exc}")
