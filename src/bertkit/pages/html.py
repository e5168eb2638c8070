"""The shell every bertkit page shares: packaged CSS/JS read from bertkit/assets (so a
wheel carries them: pyproject's package-data), images as data URIs, and JSON embedded
in a <script> tag safely."""

from __future__ import annotations

import base64
import html
import json
import mimetypes
from importlib import resources
from pathlib import Path
from typing import Any


def asset_text(name: str) -> str:
    """The text of bertkit/assets/<name> (e.g. "inspect.js")."""
    return resources.files("bertkit").joinpath("assets", name).read_text(encoding="utf-8")


def data_uri(path: Path) -> str:
    """The file as a data: URI (image/png for .png)."""
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def json_script(element_id: str, value: Any) -> str:
    """`value` as JSON in a non-executed script tag; "</" and "<!--" cannot end or confuse it."""
    text = json.dumps(value, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e")
    return f'<script type="application/json" id="{element_id}">{text}</script>'


def page(title: str, body: str, styles: tuple[str, ...] = ("page.css",), scripts: tuple[str, ...] = ()) -> str:
    """A complete HTML document: `body` (HTML) with the named assets inlined."""
    css = "\n".join(asset_text(name) for name in styles)
    js = "".join(f"<script>\n{asset_text(name)}\n</script>\n" for name in scripts)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            '<link rel="icon" href="data:,">\n'  # no favicon request: a served page would log a 404
            f"<title>{html.escape(title)}</title>\n<style>\n{css}\n</style>\n</head>\n"
            f"<body>\n{body}\n{js}</body>\n</html>\n")
