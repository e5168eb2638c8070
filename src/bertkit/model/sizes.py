"""The encoder sizes every BERT-shaped family offers as presets (tiny .. large: the BERT paper's
base and large and Turc et al.'s miniatures), (num_hidden_layers, hidden_size, num_attention_heads);
intermediate_size = 4 * hidden. A family maps them onto its own config's field names."""

from __future__ import annotations

PRESETS: dict[str, tuple[int, int, int]] = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}
