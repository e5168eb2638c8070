"""Benchmark: ELMo's biLM training step (objective bilm) vs a plain PyTorch reference, same process; embed throughput.

Step = zero_grad + forward + backward + optimizer step on one batch of B sentences of W words
(<S> and </S> included), each word `--chars` characters long (random bytes; lengths, not
values, set the cost), the forward and backward next-word losses over a `--vocab`-word
full softmax.

- bertkit: `ElmoBiLM` (character CNN + highway + projection, LSTMs with projections in
  a Python loop over words with clipping, residual between layers, shared softmax).
- reference: the same shapes in plain PyTorch: the same character CNN (nn.Conv1d, max,
  relu, highway, projection) and per layer and direction one `nn.LSTM(proj_size=P)`
  (torch's own LSTMP kernel: no cell / projection clipping, which nn.LSTM cannot do),
  the residual, the shared softmax. bertkit is timed with clipping (the published
  models') and without (the reference's arithmetic exactly).
- optimizers: bertkit's arms the training loop's (`build_optimizer`: fused AdamW, decay on
  matrices only); the reference `torch.optim.AdamW` as it ships ("reference") and bertkit's
  ("reference-eq"): both ratios printed.

Then where bertkit's step goes (forward + backward of each part alone: the character CNN,
the LSTMs, the softmax; a sampled softmax of `--samples` words beside the full one) and
`embed` throughput (`ElmoBiLM.embed_words`, words/s, inference mode). Timing: best of
`--repeats` interleaved rounds (bench.common), all on the run's one clock: wall time, or
CPU time with `--threads 1 --cpu-time` (steadier on a machine shared with other jobs); run
under flock.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(__file__))
from common import (add_clock_argument, clock_of, interleaved_best, load_average, print_ratios,  # noqa: E402
                    reference_optimizers)

from bertkit import ElmoBiLM, ElmoConfig  # noqa: E402
from bertkit.model.elmo.layers import Highway, reverse_words  # noqa: E402
from bertkit.training.config import TrainingConfig  # noqa: E402
from bertkit.training.optim import build_optimizer  # noqa: E402


class ReferenceBiLM(nn.Module):
    """ELMo's shapes in plain PyTorch: nn.LSTM(proj_size) per layer and direction."""

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.embedding = nn.Embedding(config.n_characters, config.char_embedding_dim, padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(config.char_embedding_dim, n, w) for w, n in config.filters)
        self.highway = Highway(config.num_filters, config.n_highway, torch.relu)
        self.projection = nn.Linear(config.num_filters, config.projection_dim)
        p, c = config.projection_dim, config.cell_size
        self.forward_lstms = nn.ModuleList(nn.LSTM(p, c, proj_size=p, batch_first=True) for _ in range(config.num_layers))
        self.backward_lstms = nn.ModuleList(nn.LSTM(p, c, proj_size=p, batch_first=True) for _ in range(config.num_layers))
        self.softmax = nn.Linear(p, config.n_tokens_vocab)

    def forward(self, chars, next_ids, previous_ids):
        b, w, c = chars.shape
        x = self.embedding(chars.view(-1, c)).transpose(1, 2)
        x = torch.cat([torch.relu(conv(x).amax(-1)) for conv in self.convs], -1)
        tokens = self.projection(self.highway(x)).view(b, w, -1)
        lengths = (chars > 0).any(-1).sum(1)
        fwd, bwd = tokens, reverse_words(tokens, lengths)
        for index, (lf, lb) in enumerate(zip(self.forward_lstms, self.backward_lstms)):
            nf, nb = lf(fwd)[0], lb(bwd)[0]
            fwd, bwd = (nf + fwd, nb + bwd) if index else (nf, nb)
        bwd = reverse_words(bwd, lengths)
        return (F.cross_entropy(self.softmax(fwd).flatten(0, 1), next_ids.flatten(), ignore_index=-100)
                + F.cross_entropy(self.softmax(bwd).flatten(0, 1), previous_ids.flatten(), ignore_index=-100))


def make_batch(batch: int, words: int, chars: int, vocab: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.full((batch, words, 50), 261, dtype=torch.long)
    ids[:, :, 0] = 259
    ids[:, :, 1:chars + 1] = torch.randint(98, 124, (batch, words, chars), generator=g)
    ids[:, :, chars + 1] = 260
    rows = torch.randint(0, vocab, (batch, words), generator=g)
    next_ids, previous_ids = rows.roll(-1, 1), rows.roll(1, 1)
    next_ids[:, -1] = -100
    previous_ids[:, 0] = -100
    return ids, next_ids, previous_ids


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="elmo-small")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--words", type=int, default=40, help="words a sentence, <S> and </S> included")
    parser.add_argument("--chars", type=int, default=6, help="characters a word")
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--samples", type=int, default=1024, help="negatives of the sampled softmax measured")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    add_clock_argument(parser)
    args = parser.parse_args()
    clock = clock_of(args, parser)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), {clock.label}; {args.preset}, batch {args.batch_size} x "
          f"{args.words} words of {args.chars} chars, softmax {args.vocab}; {load_average()}")
    batch = make_batch(args.batch_size, args.words, args.chars, args.vocab)
    words = args.batch_size * args.words

    def step_of(model, loss_fn, optimizer=None):
        optimizer = optimizer or build_optimizer(model, TrainingConfig())

        def step():
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model)
            loss.backward()
            optimizer.step()
            return float(loss.detach())
        return step

    def ours_loss(model):
        return model(batch[0], next_word_ids=batch[1], previous_word_ids=batch[2]).loss

    torch.manual_seed(0)
    clipped = ElmoBiLM(ElmoConfig.from_preset(args.preset, n_tokens_vocab=args.vocab, dropout=0.0)).train()
    plain = ElmoBiLM(ElmoConfig.from_preset(args.preset, n_tokens_vocab=args.vocab, dropout=0.0, cell_clip=None,
                                            proj_clip=None)).train()
    reference = ReferenceBiLM(plain.config).train()
    steps = {"bertkit (clip)": step_of(clipped, ours_loss), "bertkit": step_of(plain, ours_loss),
             **{name: step_of(reference, lambda m: m(*batch), optimizer)
                for name, optimizer in reference_optimizers(reference, name="reference").items()}}
    for step in steps.values():
        step()
    times, _ = interleaved_best(steps, args.repeats, clock)
    for name, seconds in times.items():
        print(f"  {name:15s} step {seconds * 1e3:8.1f} ms  {words / seconds:8.0f} words/s")
    print_ratios(times, clock, reference="reference")
    print(f"  with clipping: {times['reference'] / times['bertkit (clip)']:.2f} as each ships, "
          f"{times['reference-eq'] / times['bertkit (clip)']:.2f} equal optimizer; {load_average()} after")

    # where bertkit's step goes: forward + backward of each part alone
    model = clipped
    chars = batch[0]
    lengths = torch.full((args.batch_size,), args.words)
    tokens = model.char_encoder(chars).detach().requires_grad_()
    top = torch.randn(words, model.config.projection_dim, requires_grad=True)
    targets = batch[1].flatten().clamp_min(0)
    sample = torch.randint(0, args.vocab, (args.samples,))

    def part(fn):
        def run():
            out = fn()
            out.backward()
        return run

    parts = {
        "char CNN": part(lambda: model.char_encoder(chars).sum()),
        "LSTMs": part(lambda: sum(f.sum() + b.sum() for f, b in model.lstm(tokens, lengths))),
        "softmax x2": part(lambda: 2 * F.cross_entropy(model.softmax(top), targets)),
        f"sampled {args.samples} x2": part(lambda: 2 * F.cross_entropy(
            F.linear(top, model.softmax.weight[sample], model.softmax.bias[sample]), targets % args.samples)),
    }
    part_times, _ = interleaved_best(parts, args.repeats, clock)
    total = times["bertkit (clip)"]
    for name, seconds in part_times.items():
        print(f"  {name:15s} fwd+bwd {seconds * 1e3:8.1f} ms  ({seconds / total:.0%} of the step)")

    # embed throughput: inference over sentences of words
    sentences = [[f"w{(i * 7 + j) % 97}" for j in range(args.words - 2)] for i in range(64)]
    model.eval()
    with torch.inference_mode():
        model.embed_words(sentences[:4])
        seconds, _ = clock.elapsed(lambda: model.embed_words(sentences))
    print(f"  embed: {len(sentences)} sentences x {args.words - 2} words in {seconds:.2f} s ({clock.label}) = "
          f"{len(sentences) * (args.words - 2) / seconds:.0f} words/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
