"""The attention page of `bertkit inspect`: a static shell plus the page data as JSON;
bertkit/assets/inspect.js draws everything from the data, in the browser, offline.

The data (bertkit.serving.inspect.inspect_data builds it): model, text, pair, tokens,
token_type_ids, layers, heads, attention (base64 of the (layers, heads, T, T) weights
quantized to bytes, x / 255), min_weight (lines below it are not drawn), total_tokens
and max_tokens (the cap), fill_mask (per position: candidates or None) or
fill_mask_note, prediction or prediction_note, live (served: a form to inspect another
input).
"""

from __future__ import annotations

import base64
import html
from typing import Any

from bertkit.pages.html import json_script, page

# the page's defaults (`bertkit inspect`, GET /inspect); here, beside the page, so the command
# line offers them without loading torch
DEFAULT_MAX_TOKENS = 128  # a page of 128 x 128 weights per head stays readable and small
DEFAULT_TOP_K = 5  # fill-mask candidates per token


def quantize(attentions) -> str:
    """(L, H, T, T) probabilities -> base64 bytes, round(x * 255): 1 byte a weight keeps a
    128-token page of a 12 x 12 model near 3 MB while a line's shade is exact to 1/255."""
    import numpy as np

    return base64.b64encode(np.rint(np.clip(attentions, 0, 1) * 255).astype(np.uint8).tobytes()).decode("ascii")


def _truncation_note(data: dict[str, Any]) -> str:
    kept, total = len(data["tokens"]), data["total_tokens"]
    if total <= kept:
        return ""
    return (f'<p class="warning" id="truncated">Input cut to its first {kept} of {total} tokens '
            f'(the page shows at most {data["max_tokens"]}: --max-tokens).</p>')


def _again_form(data: dict[str, Any]) -> str:
    if not data.get("live"):
        return ""
    text, pair = html.escape(data["text"], quote=True), html.escape(data.get("pair") or "", quote=True)
    return (f'<form class="again" method="get" action="inspect"><input type="text" name="text" value="{text}" '
            f'aria-label="text"> <input type="text" name="pair" value="{pair}" placeholder="second sentence (optional)" '
            f'aria-label="pair"> <input type="hidden" name="max_tokens" value="{data["max_tokens"]}">'
            '<button type="submit">inspect</button></form>')


def inspect_page(data: dict[str, Any]) -> str:
    """The whole page as one HTML document (scripts and styles inlined)."""
    text = html.escape(data["text"]) + (f' <span class="note">/</span> {html.escape(data["pair"])}' if data.get("pair") else "")
    body = f"""<h1>Attention: {html.escape(data["model"])}</h1>
<p id="input">{text}</p>
{_again_form(data)}
{_truncation_note(data)}
<h2>Tokens</h2>
<p class="note">Click a token: its attention lines only, and its fill-mask candidates. Shaded tokens are the second segment.</p>
<div id="tokens"></div>
<h2>Head view</h2>
<div class="controls"><label>Layer <select id="layer"></select></label> <span>Heads</span> <span id="heads"></span>
<button type="button" id="all-heads">all heads</button>
<button type="button" id="export-svg">export SVG</button> <button type="button" id="export-png">export PNG</button></div>
<div class="views">
<svg id="headview" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="attention head view"></svg>
<div><h3>Layers x heads</h3><p class="note">Row: layer, column: head; click one to view it.</p><div id="overview"></div></div>
</div>
<div class="panels">
<section><h2>Fill-mask</h2><div id="fill-mask"></div></section>
<section><h2>Prediction</h2><div id="prediction"></div></section>
</div>
{json_script("inspect-data", data)}"""
    return page(f"bertkit inspect: {data['model']}", body, styles=("page.css", "inspect.css"), scripts=("inspect.js",))
