"""text-embeddings-inference's routes, with TEI's request fields and bare-array answers.

  POST /embed      {"inputs", "normalize" (true), "truncate", "truncation_direction", "prompt_name",
                    "dimensions"} -> [[float, ...], ...]
  POST /embed_all  {"inputs", "truncate", ...} -> per input, every token's vector [[[...]]]
  POST /similarity {"inputs": {"source_sentence", "sentences"}} -> each sentence's cosine to the source
  POST /predict    {"inputs", "raw_scores", "truncate", "parameters": {"top_k"}}: a classifier's
                   [{"label", "score"}, ...] over every label, best first — for one input (a text,
                   or a pair ["a", "b"] when the model classifies pairs); a list of them for a batch.
                   Other task heads (tagging, QA, multiple choice) answer bertkit's predictions, a list.
  POST /rerank     {"query", "texts", "return_text", "raw_scores", "truncate"} (a pair classifier)
                   -> [{"index", "score", "text"?}, ...], best first
  POST /tokenize   {"inputs", "add_special_tokens"} -> [[{"id", "text", "special", "start", "stop"}]]
  POST /decode     {"ids", "skip_special_tokens"} -> ["text", ...]

bertkit's extras are headers: `x-compute-tokens` (TEI's) and `x-bertkit-truncated` (the
indices of inputs cut to the model's limit, comma-separated). docs/serving.md is the reference.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from bertkit.serving import requests as body_fields
from bertkit.serving.jobs import embeddings, extras_headers, run_batched, text_sizes
from bertkit.serving.requests import check_fields, invalid, read_json, refused_input

TRUNCATION = ("truncate", "truncation_direction")


def _truncation(state, body: dict) -> bool:
    direction = body.get("truncation_direction")
    if direction not in (None, "Right", "right"):
        raise invalid(f"truncation_direction: only \"Right\" is supported, got {direction!r}")
    value = body.get("truncate")
    return state.config.truncate if value is None else body_fields.flag(body, "truncate", state.config.truncate)


def _no_prompt(body: dict) -> None:
    body_fields.optional_null(body, ("prompt_name",))


async def embed(state, request: Request):
    return await embed_body(state, await read_json(request, state.config.max_body_bytes))


async def embed_body(state, body: dict):
    check_fields(body, ("inputs",), ("normalize", "prompt_name", "dimensions", *TRUNCATION))
    _no_prompt(body)
    hidden = state.served.encoder.config.hidden_size
    if body.get("dimensions") not in (None, hidden):
        raise invalid(f"dimensions: this model's embeddings have {hidden} dimensions, got {body['dimensions']!r}")
    texts = body_fields.texts(body, "inputs", state.config.max_client_batch_size)
    normalize = body_fields.flag(body, "normalize", True)
    vectors, truncated, tokens = await embeddings(state, "/embed", texts, normalize, _truncation(state, body))
    return JSONResponse(vectors.tolist(), headers=extras_headers(truncated, tokens))


async def embed_all(state, request: Request):
    body = await read_json(request, state.config.max_body_bytes)
    check_fields(body, ("inputs",), ("prompt_name", *TRUNCATION))
    _no_prompt(body)
    texts = body_fields.texts(body, "inputs", state.config.max_client_batch_size)
    served = state.served
    sizes = text_sizes(state, texts, served.embed_limit)
    vectors, truncated, tokens = await run_batched(state, "/embed_all", "embed_all", texts, sizes,
                                                   served.embed_limit, _truncation(state, body))
    return JSONResponse([v.tolist() for v in vectors], headers=extras_headers(truncated, tokens))


async def similarity(state, request: Request):
    return await similarity_body(state, await read_json(request, state.config.max_body_bytes))


async def similarity_body(state, body: dict):
    """TEI's /similarity: {"inputs": {"source_sentence", "sentences"}, "parameters"} -> the cosine
    of each sentence's embedding to the source's."""
    check_fields(body, ("inputs",), ("parameters",))
    inputs, parameters = body["inputs"], body.get("parameters") or {}
    if not isinstance(inputs, dict) or not isinstance(parameters, dict):
        raise invalid("inputs: expected {\"source_sentence\": text, \"sentences\": [text, ...]}")
    check_fields(inputs, ("source_sentence", "sentences"))
    check_fields({"inputs": None, **parameters}, ("inputs",), ("prompt_name", *TRUNCATION))
    _no_prompt(parameters)
    source = body_fields.texts({"source_sentence": inputs["source_sentence"]}, "source_sentence", 1)
    sentences = body_fields.texts(inputs, "sentences", state.config.max_client_batch_size - 1)
    vectors, truncated, tokens = await embeddings(state, "/similarity", source + sentences, True,
                                                  _truncation(state, parameters))
    return JSONResponse([float(v) for v in vectors[1:] @ vectors[0]], headers=extras_headers(truncated, tokens))


# ---------------------------------------------------------------------------- /predict, /rerank


def _is_classifier(served) -> bool:
    """A sequence classifier (TEI's /predict): its task family trains the `classification` head."""
    from bertkit.tasks.registry import get_task_family

    return served.task is not None and get_task_family(served.task.spec.family).head_name == "classification"


def classifier_inputs(body: dict, name: str, max_items: int, pairs: bool) -> tuple[list, bool]:
    """TEI's PredictInput -> (inputs: texts and (text, pair) tuples, whether it was one input).
    A text is one input; so is ["a", "b"] for a model that classifies pairs; any other list is a
    batch whose items are texts, [text] or [text, pair]."""
    value = body[name]
    if isinstance(value, str):
        return [value], True
    if not isinstance(value, list):
        raise invalid(f"{name}: expected a text, a pair [text, text] or a list of them, "
                      f"got {body_fields.type_name(value)}")
    if pairs and len(value) == 2 and all(isinstance(v, str) for v in value):
        return [tuple(value)], True
    body_fields.check_count(name, value, max_items)
    items = []
    for i, item in enumerate(value):
        if isinstance(item, list) and len(item) in (1, 2) and all(isinstance(t, str) for t in item):
            item = item[0] if len(item) == 1 else tuple(item)
        elif not isinstance(item, str):
            raise invalid(f"{name}[{i}]: expected a text or a pair [text, text], got {body_fields.type_name(item)}")
        if any(not t.strip() for t in ((item,) if isinstance(item, str) else item)):
            raise invalid(f"{name}[{i}]: empty text")
        items.append(item)
    return items, False


def ranked_labels(prediction: dict) -> list[dict]:
    """bertkit's classification prediction -> TEI's [{"label", "score"}] over every label, best first."""
    if "scores" not in prediction:  # regression or a single logit: one score
        return [{"label": "LABEL_0", "score": prediction["score"]}]
    ranked = sorted(prediction["scores"].items(), key=lambda item: item[1], reverse=True)
    return [{"label": label, "score": score} for label, score in ranked]


async def _predictions(state, route: str, items: list, truncate: bool):
    served = state.served
    sizes = [served.predict_size(item) for item in items]
    return await run_batched(state, route, "predict", items, sizes, served.predict_limit, truncate)


def _no_raw_scores(body: dict) -> None:
    body_fields.optional_null(body, ("raw_scores",), {"raw_scores": False})


async def predict(state, request: Request):
    body = await read_json(request, state.config.max_body_bytes)
    return await predict_body(state, body)


async def predict_body(state, body: dict):
    check_fields(body, ("inputs",), ("raw_scores", "parameters", *TRUNCATION))
    _no_raw_scores(body)
    served, limit = state.served, state.config.max_client_batch_size
    truncate = _truncation(state, body)
    if not _is_classifier(served):
        if "parameters" in body:
            raise invalid("parameters: only a classifier takes parameters (top_k)")
        items = body_fields.predict_inputs(body, "inputs", limit)
        predictions, truncated, tokens = await _predictions(state, "/predict", items, truncate)
        return JSONResponse(predictions, headers=extras_headers(truncated, tokens))
    top_k = None
    parameters = body.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise invalid(f"parameters: expected an object, got {body_fields.type_name(parameters)}")
    check_fields({"inputs": None, **parameters}, ("inputs",), ("top_k", "function_to_apply"))
    if parameters.get("function_to_apply") not in (None, "softmax"):
        raise invalid("parameters.function_to_apply: only \"softmax\" is supported")
    if parameters.get("top_k") is not None:
        top_k = body_fields.integer(parameters, "top_k", 1, 1, 1_000_000)
    items, single = classifier_inputs(body, "inputs", limit, served.task.spec.has_pairs)
    predictions, truncated, tokens = await _predictions(state, "/predict", items, truncate)
    ranked = [ranked_labels(p)[:top_k] for p in predictions]
    return JSONResponse(ranked[0] if single else ranked, headers=extras_headers(truncated, tokens))


def positive_label(served) -> str | None:
    """The label whose probability ranks a pair: id 1 ("equivalent", "entailment" in 0/1 order...),
    or id 0 when id 1 names a negative class ("not_entailment", "non_..."); None: one score."""
    names = served.task.id2label
    if not names or len(names) != 2:
        return None
    positive = names[1]
    return names[0] if positive.lower().startswith(("not", "non", "contradict")) else positive


async def rerank(state, request: Request):
    body = await read_json(request, state.config.max_body_bytes)
    check_fields(body, ("query", "texts"), ("return_text", "raw_scores", *TRUNCATION))
    _no_raw_scores(body)
    served = state.served  # a text-pair classifier: the route's capability (ServedModel.reranker)
    query = body["query"]
    if not isinstance(query, str) or not query.strip():
        raise invalid("query: expected a non-empty text")
    texts = body_fields.texts(body, "texts", state.config.max_client_batch_size)
    return_text = body_fields.flag(body, "return_text", False)
    predictions, truncated, tokens = await _predictions(state, "/rerank", [(query, t) for t in texts],
                                                        _truncation(state, body))
    label = positive_label(served)
    scores = [p["scores"][label] if label is not None and "scores" in p else p["score"] for p in predictions]
    ranks = [{"index": i, "score": s, **({"text": texts[i]} if return_text else {})} for i, s in enumerate(scores)]
    ranks.sort(key=lambda rank: rank["score"], reverse=True)
    return JSONResponse(ranks, headers=extras_headers(truncated, tokens))


# ---------------------------------------------------------------------------- /tokenize, /decode


async def tokenize(state, request: Request):
    """Each text's tokens: id, text, whether it is special, character span [start, stop)."""
    body = await read_json(request, state.config.max_body_bytes)
    check_fields(body, ("inputs",), ("add_special_tokens", "prompt_name"))
    _no_prompt(body)
    texts = body_fields.texts(body, "inputs", state.config.max_client_batch_size)
    specials = body_fields.flag(body, "add_special_tokens", True)
    tokenizer = state.served.tokenizer
    encoded = tokenizer(texts, add_special_tokens=specials, return_offsets_mapping=True,
                        return_special_tokens_mask=True)
    return [[{"id": token_id, "text": tokenizer.convert_ids_to_tokens(token_id), "special": bool(is_special),
              "start": start, "stop": stop}
             for token_id, (start, stop), is_special in zip(ids, offsets, special)]
            for ids, offsets, special in zip(encoded["input_ids"], encoded["offset_mapping"],
                                             encoded["special_tokens_mask"])]


async def decode(state, request: Request):
    body = await read_json(request, state.config.max_body_bytes)
    check_fields(body, ("ids",), ("skip_special_tokens",))
    ids = body["ids"]
    rows = [ids] if isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in ids) else ids
    if not isinstance(rows, list):
        raise invalid(f"ids: expected a list of token ids or a list of such lists, got {body_fields.type_name(ids)}")
    body_fields.check_count("ids", rows, state.config.max_client_batch_size)
    tokenizer = state.served.tokenizer
    for i, row in enumerate(rows):
        if not isinstance(row, list) or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in row):
            raise invalid(f"ids[{i}]: expected a list of token ids (integers >= 0)")
    skip = body_fields.flag(body, "skip_special_tokens", True)
    texts = []
    for i, row in enumerate(rows):
        try:
            texts.append(tokenizer.decode(row, skip_special_tokens=skip))
        except Exception as exc:  # noqa: BLE001 - an id the vocabulary lacks: the tokenizer's own error
            raise refused_input(f"ids[{i}]: cannot decode ({exc})") from None
    return texts
