"""XLNet's permutation language model (Yang et al. 2019), after the original pre-training code.

Each example (`--format xlnet` data: `A <sep> B <sep> <cls>`) gets, from (seed, epoch,
index) alone (bertkit.data.permutation):
- targets: `num_predict` tokens for a full-length sequence (round(max_seq_length / K),
  K = 6), as whole-word n-gram spans of 1..max_gram words with P(n) ∝ 1/n, topped up
  with single tokens; never <sep>, <cls> or padding;
- a factorization order: every non-target first, the targets after them in random order,
  stored as `perm_rank` (0 for the non-targets, 1..m the targets' steps).
The batch turns the ranks into the model's inputs (`xlnet_inputs`): `perm_mask` (B, T, T),
1 where i may not attend to j (j a target not before i in the order; the model lets the
content stream see itself), `target_mapping` (B, P, T) one-hot rows of the targets in
position order, P = the most targets of an example (at most num_predict), and `labels`
(B, P), -100 on the rows an example does not fill. The content stream reads the real
tokens; the query stream runs at the P targets only. Loss = mean cross-entropy over the
targets through the output layer tied to the word embeddings; no NSP. `<cls>` gets its own
segment id 2, as XLNet's tokenizer gives it.

Options, off by default:
- `bi_data`: the second half of every batch reads its text backwards (rev(B) <sep> rev(A)
  <sep> <cls>, targets and order carried along) and the model encodes those rows' relative
  positions backwards (the config's `bi_data`), as the original's bidirectional data
  pipeline. An odd batch gets one extra backward row without targets.
- `mem_len`: Transformer-XL recurrence, as the original's reuse scheme: each sequence is
  two halves (max_seq_length must be even), each with its own targets (num_predict split
  as the original: the first half the larger share) and its own order; the first half runs,
  then the second runs with the first half's hidden states (the last `mem_len`, gradient
  stopped) as `mems`. The original carries a memory from one batch to the next, which needs
  a batch to continue the previous one's text; bertkit's batches are shuffled instances,
  so the memory here is the text just before, inside the same instance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from bertkit.data.collate import collate
from bertkit.data.dataset import DatasetInfo, PretrainingDataset
from bertkit.data.masking import example_rng, word_boundaries
from bertkit.data.permutation import factorization_ranks, sample_targets, target_goal
from bertkit.errors import BertkitError, ConfigError
from bertkit.model.bert.modeling import IGNORE_INDEX
from bertkit.model.families import model_inputs
from bertkit.model.xlnet import XLNetLMHeadModel
from bertkit.model.xlnet.config import XLNetConfig
from bertkit.objectives.base import PretrainingObjective, mlm_metrics
from bertkit.objectives.settings import ObjectiveSettings, setting
from bertkit.training.config import EVAL_SEED

CLS_SEGMENT = 2  # <cls> is a segment of its own
SPECIALS = 3  # <sep> <sep> <cls>


@dataclass(frozen=True)
class XLNetSettings(ObjectiveSettings):
    """Partial prediction, span sampling and the two options of the original data pipeline."""

    num_predict: int | None = setting(None, "xlnet: targets per full-length sequence (unset: round(max_seq_length / prediction_k))")
    prediction_k: float = setting(6.0, "xlnet: K of partial prediction, about 1/K of the tokens are targets")
    max_gram: int = setting(5, "xlnet: longest target span in words (n-grams of 1..max_gram, P(n) ∝ 1/n)")
    bi_data: bool = setting(False, "xlnet: the second half of every batch reads its text backwards")
    mem_len: int = setting(0, "xlnet: memory length; >0 runs each sequence as two halves, the second with the first as memory")

    def check(self) -> None:
        if self.num_predict is not None and self.num_predict <= 0:
            raise ConfigError(f"field 'num_predict' must be positive, got {self.num_predict}")
        if not self.prediction_k > 1.0:
            raise ConfigError(f"field 'prediction_k' must be greater than 1, got {self.prediction_k}")
        if self.max_gram <= 0:
            raise ConfigError(f"field 'max_gram' must be positive, got {self.max_gram}")
        if self.mem_len < 0:
            raise ConfigError(f"field 'mem_len' must be 0 (off) or positive, got {self.mem_len}")

    def resolved_num_predict(self, max_seq_length: int) -> int:
        """num_predict, or round(max_seq_length / K) (half up) when unset."""
        if self.num_predict is not None:
            return self.num_predict
        return int(max_seq_length / self.prediction_k + 0.5)

    def check_sequence(self, max_seq_length: int, source: str) -> None:
        """Field-named errors for settings that do not fit `max_seq_length` (the data's)."""
        if self.mem_len and max_seq_length % 2:
            raise ConfigError(f"{source}: field 'max_seq_length' must be even with objective.mem_len > 0 "
                              f"(each sequence is two halves), got {max_seq_length}; rebuild the data")
        room = max_seq_length - SPECIALS
        num_predict = self.resolved_num_predict(max_seq_length)
        if num_predict > room:
            raise ConfigError(f"{source}: field 'num_predict' ({num_predict}) must be at most the "
                              f"{room} predictable tokens of a {max_seq_length}-token sequence")
        if self.mem_len and num_predict - num_predict // 2 > max_seq_length // 2 - SPECIALS:  # the first half's share
            raise ConfigError(f"{source}: field 'num_predict' ({num_predict}) is too large for two halves of "
                              f"{max_seq_length // 2} tokens (objective.mem_len > 0)")


def permutation_mask(ranks: torch.Tensor) -> torch.Tensor:
    """(B, T) ranks (0 non-target, 1..m targets) -> (B, T, T) float perm_mask: 1 where query i
    may not attend to key j, i.e. j is a target not strictly before i in the order."""
    blocked = (ranks[:, None, :] > 0) & (ranks[:, None, :] >= ranks[:, :, None])  # (B, T, T)
    return blocked.float()


def target_rows(ranks: torch.Tensor, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T) ranks and ids -> (target_mapping (B, P, T) float one-hot, labels (B, P)).

    Row k of example b is its k-th target in position order; P is the most targets of an
    example; the rows past an example's targets are zero with label -100."""
    is_target = ranks > 0  # (B, T)
    counts = is_target.sum(dim=1)  # (B,)
    rows = max(int(counts.max()) if counts.numel() else 0, 1)
    order = torch.argsort((~is_target).to(torch.int8), dim=1, stable=True)[:, :rows]  # (B, P) targets first
    filled = torch.arange(rows, device=ranks.device)[None, :] < counts[:, None]  # (B, P)
    mapping = F.one_hot(order, ranks.shape[1]).float() * filled[..., None]  # (B, P, T)
    labels = torch.where(filled, input_ids.gather(1, order), torch.full_like(order, IGNORE_INDEX))
    return mapping, labels


def backward_example(example: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`A <sep> B <sep> <cls>` read backwards as `rev(B) <sep> rev(A) <sep> <cls>`: the same
    text in reverse, each array's positions moved along; segment ids 0, 1 and 2 again."""
    types = example["token_type_ids"]
    length = len(types)
    b_start = int(np.argmax(types == 1)) if (types == 1).any() else length - 2
    order = np.concatenate([np.arange(length - 3, b_start - 1, -1), [b_start - 1],
                            np.arange(b_start - 2, -1, -1), [length - 2, length - 1]]).astype(np.int64)
    moved = {key: value[order] for key, value in example.items()}
    b_len = length - 2 - b_start  # B's tokens, now first
    moved["token_type_ids"] = np.concatenate([np.zeros(b_len + 1), np.ones(b_start), [CLS_SEGMENT]]).astype(np.int64)
    return moved


class XLNetObjective(PretrainingObjective):
    name = "xlnet"
    data_formats = ("xlnet",)
    settings_class = XLNetSettings
    config_class = XLNetConfig
    model_class = XLNetLMHeadModel
    needs_dynamic_masking = "draws its targets and factorization order as it loads"
    progress_keys = ("plm_accuracy",)
    plot_panels = [("Loss", ["loss", "eval_loss"]), ("Target accuracy", ["plm_accuracy", "eval_plm_accuracy"])]

    def __init__(self, model, train, eval_data, masking, seed, eval_seed: int = EVAL_SEED,
                 settings: XLNetSettings | None = None):
        super().__init__(model, train, eval_data, masking, seed, eval_seed, settings)
        info = train.info
        self.settings.check_sequence(info.max_seq_length, str(train.directory))
        tokenizer = self.tokenizer
        for role in ("sep", "cls", "mask"):
            if getattr(tokenizer, f"{role}_token_id") is None:
                raise BertkitError(f"{train.directory}: the tokenizer has no {role} token; objective 'xlnet' needs "
                                   f"<sep>, <cls> and <mask> (set {role}_token in tokenizer_config.json)")
        self.cls_id = tokenizer.cls_token_id
        self.max_seq_length = info.max_seq_length
        self.num_predict = self.settings.resolved_num_predict(info.max_seq_length)
        size = max(tokenizer.vocab_size, max(tokenizer.get_vocab().values()) + 1)
        self.special = np.zeros(size, dtype=bool)
        self.special[list(tokenizer.all_special_ids)] = True
        self.word_starts, self.word_ends = word_boundaries(tokenizer)

    # ---- model ------------------------------------------------------------------------------
    @classmethod
    def model_config(cls, preset: str, data: PretrainingDataset, overrides: dict[str, Any],
                     settings: XLNetSettings | None = None) -> XLNetConfig:
        """A named size for the data's tokenizer: relative positions need no length; the
        memory and bi_data follow the settings."""
        settings, info = settings or XLNetSettings(), data.info
        values = {"vocab_size": info.vocab_size, "pad_token_id": info.pad_token_id, "bi_data": settings.bi_data,
                  "mem_len": settings.mem_len or None}
        return XLNetConfig.from_preset(preset, **{**values, **overrides})

    # ---- examples -----------------------------------------------------------------------------
    def example(self, data: PretrainingDataset, index: int, epoch: int, seed: int) -> dict[str, Any]:
        """The instance with its segment ids (<cls>: 2) and `perm_rank` (T,): 0 for the
        non-targets, the targets' steps 1..m in the factorization order (per half with mem_len)."""
        item = data[index]
        input_ids, token_type_ids = item["input_ids"], item["token_type_ids"]
        token_type_ids[input_ids == self.cls_id] = CLS_SEGMENT
        rng = example_rng(seed, epoch, index)
        ranks = np.zeros(len(input_ids), dtype=np.int64)
        for part, num_predict, full_length in self._parts(len(input_ids)):
            ranks[part] = self._ranks(input_ids[part], num_predict, full_length, rng)
        return {"input_ids": input_ids, "token_type_ids": token_type_ids, "perm_rank": ranks}

    def _parts(self, length: int) -> list[tuple[slice, int, int]]:
        """(positions, their share of num_predict, the part's full length): the whole sequence,
        or its two halves with mem_len (the first gets the larger share, as the original)."""
        if not self.settings.mem_len:
            return [(slice(0, length), self.num_predict, self.max_seq_length)]
        half = self.max_seq_length // 2
        second = self.num_predict // 2
        return [(slice(0, min(half, length)), self.num_predict - second, half), (slice(half, length), second, half)]

    def _ranks(self, input_ids: np.ndarray, num_predict: int, full_length: int, rng: np.random.Generator) -> np.ndarray:
        """(T,) ranks of one part: its targets (a share of num_predict in proportion to its length) in random order."""
        candidates = ~self.special[input_ids]
        if not candidates.any():
            return np.zeros(len(input_ids), dtype=np.int64)
        goal = target_goal(len(input_ids), num_predict, full_length, int(candidates.sum()))
        targets = sample_targets(self._position_starts(input_ids), candidates, goal, rng, self.settings.max_gram)
        return factorization_ranks(targets, rng)

    def _position_starts(self, input_ids: np.ndarray) -> np.ndarray:
        """(T,) bool: a word begins here (its token starts one, or follows a special token or a word end)."""
        starts = self.word_starts[input_ids].copy()
        after = self.special[input_ids[:-1]]
        if self.word_ends is not None:
            after = after | self.word_ends[input_ids[:-1]]
        starts[1:] |= after
        starts[0] = True
        return starts

    def collate(self, examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """input_ids, token_type_ids, attention_mask, perm_rank: (B, T); `xlnet_inputs` makes
        the masks. With bi_data the second half of the rows read backwards; with mem_len every
        row is max_seq_length long (the halves split at the same place)."""
        if self.settings.bi_data:
            if len(examples) % 2:  # the model splits the rows in two equal halves
                examples = [*examples, {**examples[-1], "perm_rank": np.zeros_like(examples[-1]["perm_rank"])}]
            half = len(examples) // 2
            examples = examples[:half] + [backward_example(e) for e in examples[half:]]
        return collate(examples, self.pad_id, self.max_seq_length if self.settings.mem_len else 8)

    # ---- loss ---------------------------------------------------------------------------------
    def loss_counts(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        return {"plm": float((batch["perm_rank"] > 0).sum())}

    def compute_loss(self, model, batch, totals) -> tuple[torch.Tensor, dict[str, Any]]:
        """Cross-entropy at the targets; with mem_len the halves run in turn, the second with
        the first's hidden states as memory."""
        loss_sum = torch.zeros((), device=batch["input_ids"].device)
        correct, count, mems = 0.0, 0.0, None
        for part, _, _ in self._parts(batch["input_ids"].shape[1]):
            inputs = xlnet_inputs({key: value[:, part] for key, value in batch.items()})
            labels = inputs.pop("labels")
            memory = {"mems": mems, "use_mems": True} if self.settings.mem_len else {"use_mems": False}
            out = model(**model_inputs(model, inputs), **memory)
            valid = labels != IGNORE_INDEX
            logits = out.logits[valid]  # (N, V)
            targets = labels[valid]
            loss_sum = loss_sum + F.cross_entropy(logits.float(), targets, reduction="sum")
            correct = correct + (logits.detach().argmax(dim=-1) == targets).sum()  # on the device until logged
            count += targets.numel()
            if self.settings.mem_len:
                mems = [m.detach() for m in out.mems]
        stats = {"mlm_loss_sum": loss_sum.detach(), "mlm_correct": correct, "mlm_count": float(count)}
        return loss_sum / max(totals["plm"], 1.0), stats

    def held_out_targets(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The tokens at the targets' ranks, as `compute_loss` scores them."""
        return batch["input_ids"][batch["perm_rank"] > 0]

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        metrics = {key.replace("mlm_", "plm_"): value for key, value in mlm_metrics(stats).items()}
        if "plm_loss" in metrics:
            metrics["loss"] = metrics["plm_loss"]
        return metrics


def xlnet_inputs(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A collated batch (with `perm_rank`) -> the model's keyword inputs: perm_mask,
    target_mapping and labels from the ranks, the rest as they are."""
    inputs = dict(batch)
    ranks = inputs.pop("perm_rank")
    inputs["perm_mask"] = permutation_mask(ranks)
    inputs["target_mapping"], inputs["labels"] = target_rows(ranks, inputs["input_ids"])
    return inputs
