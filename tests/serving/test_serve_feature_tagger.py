"""A feature-based tagger (`bertkit finetune ner --features`) serves /predict, and /embed
with its frozen encoder; its folder has no config.json of its own."""

from __future__ import annotations

import httpx
import torch
from _serving import LABELS, running_server, save_model

import bertkit


def test_feature_tagger_serves_predict_and_embed(tmp_path, minilm_dir):
    from safetensors.torch import save_file

    from bertkit import BertModel, Tokenizer
    from bertkit.tasks.feature_tagger import (TAGGER_CONFIG_FILE, FeatureTagger, FeatureTaggerConfig,
                                              encoder_weights_file, file_sha256)
    from bertkit.tasks.programs import TaskSpec

    encoder = save_model(tmp_path / "encoder", BertModel, minilm_dir)
    layers = BertModel.from_pretrained(encoder).config.num_hidden_layers
    config = FeatureTaggerConfig("last", str(encoder), file_sha256(encoder_weights_file(encoder)), 32, layers + 1,
                                 LABELS["tagging"], lstm_hidden_size=8, lstm_num_layers=1)
    tagger_dir = tmp_path / "tagger"
    tagger_dir.mkdir()
    torch.manual_seed(0)
    save_file(FeatureTagger(config).state_dict(), tagger_dir / "feature_tagger.safetensors")
    config.save(tagger_dir)
    assert (tagger_dir / TAGGER_CONFIG_FILE).is_file()
    Tokenizer.from_pretrained(minilm_dir).save_pretrained(tagger_dir)
    TaskSpec(family="tagging", scheme="IOB2", max_seq_length=64).save(tagger_dir)

    text = "John Smith lives in Paris."
    direct = bertkit.predict(tagger_dir, [text], device="cpu")
    with running_server(tagger_dir) as (base, _):
        info = httpx.get(base + "/info").json()
        served = httpx.post(base + "/predict", json={"inputs": [text]}).json()
        vectors = httpx.post(base + "/embed", json={"inputs": [text]}).json()
        fill = httpx.post(base + "/fill-mask", json={"inputs": ["a [MASK]"]})
    assert info["task"] == "tagging" and info["labels"] == LABELS["tagging"]
    assert served[0]["tags"] == direct[0]["tags"] and served[0]["words"] == direct[0]["words"]
    assert len(vectors[0]) == 32
    assert fill.status_code == 424 and "feature-based tagger" in fill.json()["error"]


def test_a_feature_head_folder_embeds_with_its_encoder_and_names_it_elsewhere(tmp_path, minilm_dir):
    """`embed` (and a server whose head holds no `embeddings`: ELMo's) loads the encoder the head names,
    unchanged; a command that needs a model of its own says what the folder is, in one line."""
    from bertkit import BertModel, Tokenizer
    from bertkit.errors import BertkitError
    from bertkit.inference.embedding import embed
    from bertkit.model.families import family_of
    from bertkit.tasks.feature_tagger import FeatureTaggerConfig, encoder_weights_file, file_sha256

    import pytest

    encoder = save_model(tmp_path / "encoder", BertModel, minilm_dir)
    head = tmp_path / "head"
    head.mkdir()
    FeatureTaggerConfig("last", str(encoder), file_sha256(encoder_weights_file(encoder)), 32, 2,
                        LABELS["classification"]).save(head)
    Tokenizer.from_pretrained(minilm_dir).save_pretrained(head)
    texts = ["John Smith lives in Paris.", "A second sentence."]
    assert embed(texts, model=str(head), progress=False).tolist() == embed(texts, model=str(encoder),
                                                                           progress=False).tolist()
    with pytest.raises(BertkitError, match=rf"{head}: a task head on the frozen features of {encoder} "):
        family_of(head)
