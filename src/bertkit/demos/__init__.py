"""The demos behind `bertkit demo`: the whole pre-training pipeline, and contextual embeddings."""
