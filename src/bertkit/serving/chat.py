"""Chat messages -> one prompt, with the checkpoint's chat template (transformers' convention).

The template is a Jinja string in tokenizer_config.json's `chat_template` (a string, or a
list of {"name", "template"} of which "default" is taken) or in a `chat_template.jinja`
file beside it. It is rendered as transformers' `apply_chat_template` renders it: a
sandboxed environment with trim_blocks and lstrip_blocks, the `tojson` filter,
`raise_exception` and `strftime_now`, and the variables `messages`,
`add_generation_prompt` (True: the prompt ends where the assistant's answer begins) and
the tokenizer's special tokens (`bos_token`, `eos_token`, ...). The rendered text is the
prompt as written (a decoder-only model adds no specials of its own, as transformers
tokenizes a rendered chat).
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from bertkit.serving.requests import invalid
from bertkit.tokenization.files import SPECIAL_ROLES

TEMPLATE_FILE = "chat_template.jinja"
NO_TEMPLATE = ("this model has no chat template (a base model): set chat_template in its tokenizer_config.json "
               "(transformers' convention) or send the prompt to /v1/completions")


def read_chat_template(directory: Path) -> str | None:
    """The checkpoint's chat template, or None."""
    if (directory / TEMPLATE_FILE).is_file():
        return (directory / TEMPLATE_FILE).read_text(encoding="utf-8")
    config = directory / "tokenizer_config.json"
    if not config.is_file():
        return None
    template = json.loads(config.read_text(encoding="utf-8")).get("chat_template")
    if isinstance(template, list):  # named templates: the default one
        template = next((t.get("template") for t in template if t.get("name") == "default"), None)
    return template if isinstance(template, str) and template.strip() else None


@lru_cache(maxsize=4)
def _compile(template: str):
    from jinja2.exceptions import TemplateError
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise TemplateError(message)

    def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda format: datetime.now().strftime(format)
    return env.from_string(template)


def messages_of(body: dict[str, Any]) -> list[dict[str, str]]:
    """OpenAI's `messages`, checked: each {"role", "content"} with a text (or a list of text parts,
    joined by newlines)."""
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise invalid("messages: expected a non-empty list of {\"role\", \"content\"} objects")
    checked = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise invalid(f"messages[{i}]: expected an object with a role and a content")
        content = message.get("content")
        if isinstance(content, list):
            if not all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
                       for p in content):
                raise invalid(f"messages[{i}].content: only text parts ({{\"type\": \"text\", \"text\"}}) are served")
            content = "\n".join(p["text"] for p in content)
        if not isinstance(content, str):
            raise invalid(f"messages[{i}].content: expected a text")
        checked.append({**message, "content": content})
    return checked


def render_chat(directory: Path, tokenizer, messages: list[dict[str, str]]) -> str:
    """The prompt of `messages` under the checkpoint's template (422 when it has none or it fails)."""
    from jinja2.exceptions import TemplateError

    template = read_chat_template(directory)
    if template is None:
        raise invalid(f"messages: {NO_TEMPLATE}")
    # only the tokens the tokenizer has, as transformers' special_tokens_map: an unset one renders empty
    specials = {role: getattr(tokenizer, role) for role in SPECIAL_ROLES if getattr(tokenizer, role, None)}
    try:
        return _compile(template).render(messages=messages, add_generation_prompt=True, tools=None, documents=None,
                                         **specials)
    except TemplateError as exc:
        raise invalid(f"messages: the chat template refused them: {exc}") from None
