"""embed on a checkpoint folder of every family: the loader takes the family's bare encoder
from the registry, and the vectors equal transformers' AutoModel hidden states on the
same ids (RoBERTa's 514-position table holding 512 tokens: the limit less its offset);
"pooler" pooling on ELECTRA, which has no pooler, is a one-line error."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

import bertkit
from bertkit.inference.loading import load_encoder
from bertkit.tokenization import Tokenizer

TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
TEXTS = ["It is a truth universally acknowledged.", "A single man", "in possession of a good fortune " * 12]
CHECKPOINTS = {  # name: (transformers class, config, bertkit encoder class)
    "roberta": (transformers.RobertaModel, lambda: transformers.RobertaConfig(
        vocab_size=30522, max_position_embeddings=40, type_vocab_size=1, pad_token_id=1, **TINY), "RobertaModel"),
    "roberta-mlm": (transformers.RobertaForMaskedLM, lambda: transformers.RobertaConfig(
        vocab_size=30522, max_position_embeddings=40, type_vocab_size=1, pad_token_id=1, **TINY), "RobertaModel"),
    "electra": (transformers.ElectraForPreTraining, lambda: transformers.ElectraConfig(
        vocab_size=30522, embedding_size=16, max_position_embeddings=64, **TINY), "ElectraModel"),
    "albert": (transformers.AlbertModel, lambda: transformers.AlbertConfig(
        vocab_size=30522, embedding_size=16, max_position_embeddings=64, **TINY), "AlbertModel"),
}


@pytest.fixture(scope="module", params=sorted(CHECKPOINTS))
def checkpoint(request, tmp_path_factory, minilm_dir) -> tuple[Path, str]:
    model_class, config, encoder_name = CHECKPOINTS[request.param]
    directory = tmp_path_factory.mktemp(request.param)
    torch.manual_seed(0)
    model_class(config()).save_pretrained(directory)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (minilm_dir / name).is_file():
            shutil.copy(minilm_dir / name, directory / name)
    return directory, encoder_name


def test_embed_equals_transformers_hidden_states(checkpoint):
    directory, encoder_name = checkpoint
    loaded = load_encoder(directory)
    assert type(loaded.model).__name__ == encoder_name
    limit = transformers.AutoConfig.from_pretrained(directory).max_position_embeddings
    limit -= 2 if encoder_name == "RobertaModel" else 0  # positions start at padding_idx + 1
    tokenizer = Tokenizer.from_pretrained(directory)
    batch = tokenizer(TEXTS, truncation=True, max_length=limit, padding=True, return_tensors="pt")
    assert batch["attention_mask"].sum(1).max() == limit  # the long text is cut at the model's limit
    reference = transformers.AutoModel.from_pretrained(directory).eval()
    with torch.no_grad():
        hidden = reference(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                           output_hidden_states=True).hidden_states  # (B, T, H) each
    mask = batch["attention_mask"].unsqueeze(-1).float()
    mean = ((hidden[-2] * mask).sum(1) / mask.sum(1)).numpy()
    got = bertkit.embed(TEXTS, model=directory, layers="second_to_last", batch_size=2)
    np.testing.assert_allclose(got, mean, atol=1e-5, rtol=1e-4)
    cls = bertkit.embed(TEXTS, model=loaded, pooling="cls")  # a LoadedModel: no second load
    np.testing.assert_allclose(cls, hidden[-1][:, 0].numpy(), atol=1e-5, rtol=1e-4)
    if encoder_name == "ElectraModel":  # an encoder without a pooler: a one-line error, not an AttributeError
        with pytest.raises(bertkit.BertkitError, match="this model has no pooler layer"):
            bertkit.embed(["x"], model=loaded, pooling="pooler")

