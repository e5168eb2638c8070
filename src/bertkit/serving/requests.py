"""Reading request bodies: size-capped JSON, checked field by field.

Every problem becomes an `HTTPProblem` (status, type, one line naming the field), which
the app answers as text-embeddings-inference does: `{"error": ..., "error_type": ...}`
with TEI's types and statuses — 413 "validation" for a body, a request or an input that
is too large, 422 "validation" for a field of the wrong type or value (TEI: a body its
JSON reader refuses) and "tokenizer" for an input the model cannot take, 400 "empty" for
an empty input list, 429 "overloaded" for a full queue, 424 "backend" for a route this
model does not serve or a failed inference, 503 "unhealthy" when the worker is down;
400 "validation" for a body that is not JSON.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request


class HTTPProblem(Exception):
    def __init__(self, status: int, error_type: str, message: str):
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message


def invalid(message: str) -> HTTPProblem:
    return HTTPProblem(422, "validation", message)


def refused_input(message: str) -> HTTPProblem:
    """An input the tokenizer or the task's reader cannot take (TEI: 422 "tokenizer")."""
    return HTTPProblem(422, "tokenizer", message)


def too_large(message: str) -> HTTPProblem:
    return HTTPProblem(413, "validation", message)


def not_served(message: str) -> HTTPProblem:
    """The model cannot answer this route (TEI: 424 "backend", "model is not a re-ranker model")."""
    return HTTPProblem(424, "backend", message)


async def read_json(request: Request, max_bytes: int) -> dict[str, Any]:
    """The body as a JSON object, read no further than `max_bytes`."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise too_large(f"request body: {declared} bytes, more than max_body_bytes={max_bytes}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_bytes:
            raise too_large(f"request body: more than max_body_bytes={max_bytes} bytes")
    if not body:
        raise HTTPProblem(400, "validation", "request body: empty; expected a JSON object")
    try:
        value = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise HTTPProblem(400, "validation", f"request body: not valid JSON ({exc})") from None
    except RecursionError:
        raise HTTPProblem(400, "validation", "request body: JSON nested too deeply") from None
    if not isinstance(value, dict):
        raise invalid(f"request body: expected a JSON object, got {type_name(value)}")
    return value


def check_fields(body: dict[str, Any], required: tuple[str, ...], optional: tuple[str, ...] = ()) -> None:
    for name in required:
        if name not in body:
            raise invalid(f"{name}: required field missing")
    unknown = sorted(set(body) - set(required) - set(optional))
    if unknown:
        raise invalid(f"{unknown[0]}: unknown field; this route takes {', '.join(required + optional)}")


def texts(body: dict[str, Any], name: str, max_items: int) -> list[str]:
    """A field holding one text or a non-empty list of texts -> the list."""
    value = body[name]
    if isinstance(value, str):
        value = [value]
    elif not isinstance(value, list):
        raise invalid(f"{name}: expected a string or a list of strings, got {type_name(value)}")
    check_count(name, value, max_items)
    for i, text in enumerate(value):
        if not isinstance(text, str):
            raise invalid(f"{name}[{i}]: expected a string, got {type_name(text)}")
        if not text.strip():
            raise invalid(f"{name}[{i}]: empty text")
    return value


def predict_inputs(body: dict[str, Any], name: str, max_items: int) -> list[Any]:
    """/predict's inputs in the shapes `bertkit.predict` takes: a text, a JSON array as a tuple
    (a text pair, (question, context), (context, [choices]), a list of words), an object."""
    value = body[name]
    if isinstance(value, str):
        value = [value]
    elif not isinstance(value, list):
        raise invalid(f"{name}: expected a list of inputs, got {type_name(value)}")
    check_count(name, value, max_items)
    items = []
    for i, item in enumerate(value):
        if isinstance(item, list):
            item = tuple(item)
        elif not isinstance(item, (str, dict)):
            raise invalid(f"{name}[{i}]: expected a text, an array or an object, got {type_name(item)}")
        if not item or isinstance(item, str) and not item.strip():
            raise invalid(f"{name}[{i}]: empty input")
        items.append(item)
    return items


def check_count(name: str, value: list, max_items: int) -> None:
    if not value:
        raise HTTPProblem(400, "empty", f"{name}: empty list; give at least one input")
    if len(value) > max_items:
        raise too_large(f"{name}: {len(value)} inputs, more than max_client_batch_size={max_items}")


def optional_null(body: dict[str, Any], names: tuple[str, ...], defaults: dict[str, Any] | None = None) -> None:
    """Fields a protocol defines that bertkit does not implement: accepted when absent, null
    or at their no-op value (`defaults`), else a 422 naming the field."""
    defaults = defaults or {}
    for name in names:
        value, default = body.get(name), defaults.get(name)
        if value is None or value == default:
            continue
        if default is None:
            raise invalid(f"{name}: not supported by bertkit serve (send null or leave it out)")
        raise invalid(f"{name}: must be {json.dumps(default)} (bertkit serve implements no other value), "
                      f"got {json.dumps(value)}")


def number(body: dict[str, Any], name: str, default: float | None, low: float, high: float,
           low_open: bool = False) -> float | None:
    value = body.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            (low < value if low_open else low <= value) and value <= high):
        bound = f"{'(' if low_open else '['}{low}, {high}]"
        raise invalid(f"{name}: expected a number in {bound}, got {json.dumps(value)}")
    return float(value)


def flag(body: dict[str, Any], name: str, default: bool) -> bool:
    value = body.get(name, default)
    if not isinstance(value, bool):
        raise invalid(f"{name}: expected true or false, got {type_name(value)}")
    return value


def integer(body: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise invalid(f"{name}: expected an integer in {low}..{high}, got {json.dumps(value)}")
    return value


def choice(body: dict[str, Any], name: str, default: str, choices: tuple[str, ...]) -> str:
    value = body.get(name, default)
    if value not in choices:
        raise invalid(f"{name}: expected one of {', '.join(choices)}, got {json.dumps(value)}")
    return value


def type_name(value: Any) -> str:
    """The JSON name of a value's type."""
    for kind, name in ((bool, "a boolean"), (str, "a string"), (int, "a number"), (float, "a number"),
                       (list, "an array"), (dict, "an object")):
        if isinstance(value, kind):
            return name
    return "null" if value is None else type(value).__name__
