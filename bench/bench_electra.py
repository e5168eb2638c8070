"""Benchmark: one ELECTRA pre-training step (generator + discriminator) of bertkit vs
transformers, and its cost relative to bertkit's BERT MLM step, same process.

Step = zero_grad + forward + backward + optimizer step on one batch of 32 x 128 tokens
(15% of the non-special positions masked, -100 labels elsewhere), vocabulary 30,522,
dropout 0.1 (training mode), fp32; the discriminator is a preset (tiny L2/H128/A2, mini
L4/H256/A4, embedding size = hidden size), the generator `--generator-size` (0.25) of
its width, heads and FFN; loss = L_MLM(generator) + 50 * L_disc.

- bertkit: `ElectraPretrainingModel` + `electra_loss` (bertkit.objectives.electra: the
  generator's vocabulary projection fused with its loss at the masked positions only,
  one shared embedding module) and the loop's optimizer (`build_optimizer`: fused AdamW).
- transformers: `ElectraForMaskedLM` (generator) and `ElectraForPreTraining`
  (discriminator) sharing one `ElectraEmbeddings` (the generator's output layer re-tied
  to it), the step written as their documentation suggests: the generator's loss from
  `labels`, its (B, T, V) logits at the masked positions sampled with
  `torch.multinomial(softmax)`, replaced ids and 0/1 labels, the discriminator's loss
  from `labels`; then `torch.optim.AdamW` ("transformers electra"), or bertkit's optimizer
  ("transformers electra-eq"): both ratios printed. `--reference-sampler bertkit` samples there
  with bertkit's `sample_tokens` instead (isolates the models' share of the ratio).
- BERT MLM: bertkit `BertForPreTraining` of the discriminator's size, MLM loss only
  (no NSP), the same batch: the denominator of "ELECTRA step / MLM step".

Both ELECTRA implementations hold the same weights; a sanity check compares their total
losses in eval mode, the reference sampling with bertkit's sampler and the same seed
(equal samples, so equal up to float rounding). Timing: best of `--repeats` interleaved rounds
(bench.common.interleaved_best) on the run's one clock (`--cpu-time`: CPU time, else wall).
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_pretrain_step import make_batch  # noqa: E402
from common import add_clock_argument, clock_of, interleaved_best, print_ratios, reference_optimizers  # noqa: E402

DISC_WEIGHT = 50.0
SAMPLING_SEED = 7


def build_models(preset: str, generator_size: float):
    import transformers

    from bertkit import BertConfig, BertForPreTraining
    from bertkit.model.electra import ElectraConfig
    from bertkit.objectives.electra import ElectraObjective, ElectraSettings

    config = ElectraConfig.from_preset(preset)
    torch.manual_seed(0)
    ours = ElectraObjective.build_model(config, ElectraSettings(generator_size=generator_size))
    ref_disc = transformers.ElectraForPreTraining(
        transformers.ElectraConfig(**ours.discriminator.config.to_dict(), attn_implementation="sdpa"))
    ref_gen = transformers.ElectraForMaskedLM(
        transformers.ElectraConfig(**ours.generator.config.to_dict(), attn_implementation="sdpa"))
    ref_disc.load_state_dict(ours.discriminator.state_dict(), strict=False)
    ref_gen.load_state_dict(ours.generator.state_dict(), strict=False)
    ref_gen.electra.embeddings = ref_disc.electra.embeddings  # shared, as bertkit's
    ref_gen.generator_lm_head.weight = ref_disc.electra.embeddings.word_embeddings.weight
    bert = BertForPreTraining(BertConfig.from_preset(preset))
    return ours, (ref_gen, ref_disc), bert


def bertkit_loss(model, batch, generator: torch.Generator) -> torch.Tensor:
    from bertkit.objectives.electra import electra_loss

    labels = batch["labels"]
    out = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], labels, generator)
    masked, real = float((labels != -100).sum()), float(batch["attention_mask"].sum())
    return electra_loss(out, labels, masked, real, DISC_WEIGHT)[0]


def multinomial(logits: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """(N, V) -> (N,) samples the usual way: torch.multinomial over the softmax."""
    return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator).squeeze(1)


def transformers_loss(models, batch, generator: torch.Generator, sampler=multinomial) -> torch.Tensor:
    gen, disc = models
    ids, types, mask, labels = batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], batch["labels"]
    gen_out = gen(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels)
    masked = labels != -100
    with torch.no_grad():
        sampled = sampler(gen_out.logits[masked].detach(), generator)  # (N,) from the (N, V) logits
    replaced = ids.clone()
    replaced[masked] = sampled
    original = torch.where(masked, labels, ids)
    disc_out = disc(input_ids=replaced, token_type_ids=types, attention_mask=mask,
                    labels=(replaced != original).long())
    return gen_out.loss + DISC_WEIGHT * disc_out.loss


def step_function(loss_fn, model, optimizer, batch):
    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model, batch, torch.Generator().manual_seed(SAMPLING_SEED))
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    return step


def mlm_loss(model, batch, generator) -> torch.Tensor:
    return model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]).loss


def sanity_check(ours, ref, batch) -> float:
    """|total loss difference| in eval mode, the reference sampling with bertkit's sampler
    and the same seed (so the samples are equal)."""
    from bertkit.objectives.electra import sample_tokens

    modules = (ours, *ref)
    for m in modules:
        m.eval()
    with torch.no_grad():
        a = float(bertkit_loss(ours, batch, torch.Generator().manual_seed(SAMPLING_SEED)))
        b = float(transformers_loss(ref, batch, torch.Generator().manual_seed(SAMPLING_SEED), sample_tokens))
    for m in modules:
        m.train()
    return abs(a - b)


def main() -> None:
    from bertkit.training.config import TrainingConfig
    from bertkit.training.optim import build_optimizer

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["tiny", "mini"], choices=["tiny", "mini", "small", "medium", "base"])
    parser.add_argument("--generator-size", type=float, default=0.25)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    add_clock_argument(parser)
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--reference-sampler", choices=["multinomial", "bertkit"], default="multinomial",
                        help="how the transformers step samples (default: torch.multinomial)")
    args = parser.parse_args()
    clock = clock_of(args, parser)  # on a GPU: wall time after the queued kernels finish
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    from bertkit.objectives.electra import sample_tokens

    sampler = sample_tokens if args.reference_sampler == "bertkit" else multinomial

    def reference_loss(models, batch, generator):
        return transformers_loss(models, batch, generator, sampler)

    print(f"torch {torch.__version__}, device {device}, {args.threads} thread(s), {clock.label}")
    print(f"batch {args.batch_size} x {args.seq_len}, vocab 30522, dropout 0.1, fp32, generator size "
          f"{args.generator_size}, lambda {DISC_WEIGHT:g}; reference sampler {args.reference_sampler}; "
          f"best of {args.repeats} interleaved rounds")
    for preset in args.sizes:
        ours, ref, bert = build_models(preset, args.generator_size)
        for m in (ours, *ref, bert):
            m.to(device).train()
        batch = {k: v.to(device) for k, v in make_batch(30522, args.batch_size, args.seq_len).items()
                 if k != "next_sentence_label"}
        diff = sanity_check(ours, ref, batch)
        candidates = {
            "bertkit electra": step_function(bertkit_loss, ours, build_optimizer(ours, TrainingConfig()), batch),
            **{name: step_function(reference_loss, ref, optimizer, batch)
               for name, optimizer in reference_optimizers(ref, name="transformers electra").items()},
            "bertkit bert mlm": step_function(mlm_loss, bert, build_optimizer(bert, TrainingConfig()), batch),
        }
        for step in candidates.values():  # warm-up: optimizer state, allocator, kernels
            step()
        times, _ = interleaved_best(candidates, args.repeats, clock)
        tokens = args.batch_size * args.seq_len
        disc, gen = ours.discriminator.config, ours.generator.config
        print(f"\n== {preset}: discriminator L{disc.num_hidden_layers}/H{disc.hidden_size}/A{disc.num_attention_heads}, "
              f"generator H{gen.hidden_size}/A{gen.num_attention_heads}/I{gen.intermediate_size}; "
              f"{int((batch['labels'] != -100).sum())} masked positions; eval-mode |loss difference| {diff:.1e}")
        for name, seconds in times.items():
            print(f"  {name:25s} step {seconds * 1e3:8.1f} ms  {tokens / seconds:9.0f} tokens/s")
        print_ratios(times, clock, reference="transformers electra", ours="bertkit electra")
        print(f"  ELECTRA step / BERT MLM step (bertkit): {times['bertkit electra'] / times['bertkit bert mlm']:.2f}")


if __name__ == "__main__":
    main()
