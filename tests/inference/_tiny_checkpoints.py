"""Tiny seeded checkpoints of each kind a user loads for inference (shared by the precision
and ONNX export tests): a bare encoder, a masked LM and one head model per task family,
with MiniLM's real WordPiece tokenizer so texts tokenize as in use.

A random head scores every input nearly alike, so int8 rounding flips its argmax at
will; `save_tiny(..., decisive=True)` first trains the head model a few steps to
separate some texts, as a fine-tuned model does."""

from __future__ import annotations

from pathlib import Path

import torch

from bertkit.inference.onnx_export import CHECK_TEXTS

HEADS = {  # task family -> (bertkit head class, label names)
    "classification": ("BertForSequenceClassification", ["neg", "pos"]),
    "tagging": ("BertForTokenClassification", ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]),
    "qa": ("BertForQuestionAnswering", None),
    "multiple_choice": ("BertForMultipleChoice", None),
}
# what the export check runs (bertkit.inference.onnx_export), and a few more
TRAIN_PAIRS = [pair for batch in CHECK_TEXTS for pair in batch] + [
    ("Paris is the capital of France.", "Where is Paris?"), ("It rained all day.", "Was it dry?"),
    ("The cat sat on the mat.", "A cat was sitting."), ("Stocks fell sharply on Monday.", "Did stocks rise?")]


def tiny_config(labels=None):
    from bertkit import BertConfig

    config = BertConfig.from_preset("tiny", vocab_size=30522, hidden_size=32, num_attention_heads=4,
                                    intermediate_size=64, max_position_embeddings=128)
    return config.with_labels(labels) if labels else config


def save_tiny(directory: Path, class_name: str, minilm_dir: Path, labels=None, seed: int = 0,
              decisive: bool = False) -> Path:
    """A seeded tiny `class_name` ("BertModel", "BertForPreTraining", a head class) saved with
    MiniLM's tokenizer in `directory`; `decisive`: trained first (module docstring)."""
    import bertkit
    from bertkit import Tokenizer

    torch.manual_seed(seed)
    model = getattr(bertkit, class_name)(tiny_config(labels))
    tokenizer = Tokenizer.from_pretrained(minilm_dir)
    if decisive:
        _train_briefly(model, tokenizer)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def _train_briefly(model, tokenizer, steps: int = 80) -> None:
    """Fit arbitrary targets of TRAIN_PAIRS (labels, tags, spans, choices by position)."""
    firsts, seconds = [a for a, _ in TRAIN_PAIRS], [b for _, b in TRAIN_PAIRS]
    rows = torch.arange(len(TRAIN_PAIRS))
    if type(model).__name__ == "BertForMultipleChoice":
        encoded = tokenizer([a for a in firsts for _ in range(2)],
                            [t for b in seconds for t in (b, f"Not so: {b}")], padding=True, return_tensors="pt")
        batch = {k: v.view(len(rows), 2, -1) for k, v in encoded.items()}
        targets = {"labels": torch.zeros_like(rows)}  # the plain choice, not the "Not so:" one: a rule that carries over
    else:
        batch = dict(tokenizer(firsts, seconds, padding=True, return_tensors="pt"))
        if type(model).__name__ == "BertForQuestionAnswering":
            targets = {"start_positions": rows % 4 + 1, "end_positions": rows % 4 + 2}
        elif type(model).__name__ == "BertForTokenClassification":
            labels = batch["input_ids"] % model.config.num_labels  # a tag per word piece: learnable, so decisive
            targets = {"labels": labels.masked_fill(batch["attention_mask"] == 0, -100)}
        else:
            targets = {"labels": rows % model.config.num_labels}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    for _ in range(steps):
        optimizer.zero_grad()
        model(**batch, **targets).loss.backward()
        optimizer.step()
    model.eval()
