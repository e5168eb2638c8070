"""A tiny Markdown renderer for what bertkit's report.md files use: ATX headings,
paragraphs, pipe tables, bullet and numbered lists, fenced code, inline code, bold,
italics, links and images. Everything else is shown as text, HTML-escaped: a report
never carries raw HTML into the page.

`image_src(target)` maps an image's target (e.g. "loss.png") to what the page's <img>
uses (bertkit.pages.report inlines it as a data URI); `link_href` does the same for links.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

_INLINE = re.compile(r"`([^`]+)`|!\[([^\]]*)\]\(([^)\s]+)\)|\[([^\]]+)\]\(([^)\s]+)\)|\*\*(.+?)\*\*|(?<!\w)[*_](?!\s)(.+?)(?<!\s)[*_](?!\w)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s*[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^\s*\d+[.)]\s+(.*)$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")

Mapper = Callable[[str], str]


def _same(target: str) -> str:
    return target


def inline(text: str, image_src: Mapper = _same, link_href: Mapper = _same) -> str:
    """One line's inline markup as HTML (code spans are literal)."""
    out, pos = [], 0
    for match in _INLINE.finditer(text):
        out.append(html.escape(text[pos : match.start()]))
        code, alt, src, label, href, bold, italic = match.groups()
        if code is not None:
            out.append(f"<code>{html.escape(code)}</code>")
        elif src is not None:
            out.append(f'<img alt="{html.escape(alt, quote=True)}" src="{html.escape(image_src(src), quote=True)}">')
        elif href is not None:
            out.append(f'<a href="{html.escape(link_href(href), quote=True)}">{inline(label, image_src, link_href)}</a>')
        elif bold is not None:
            out.append(f"<strong>{inline(bold, image_src, link_href)}</strong>")
        else:
            out.append(f"<em>{inline(italic, image_src, link_href)}</em>")
        pos = match.end()
    out.append(html.escape(text[pos:]))
    return "".join(out)


def _cells(row: str) -> list[str]:
    row = row.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", row)]


def render(markdown: str, image_src: Mapper = _same, link_href: Mapper = _same) -> str:
    """`markdown` as an HTML fragment."""
    lines = markdown.splitlines()
    out: list[str] = []
    i = 0

    def fmt(text: str) -> str:
        return inline(text, image_src, link_href)

    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif line.lstrip().startswith("```"):
            block = []
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith("```"):
                block.append(lines[i])
                i += 1
            i += 1  # the closing fence (or the end)
            out.append(f"<pre><code>{html.escape(chr(10).join(block))}</code></pre>")
        elif heading := _HEADING.match(line):
            level = len(heading.group(1))
            out.append(f"<h{level}>{fmt(heading.group(2))}</h{level}>")
            i += 1
        elif "|" in line and i + 1 < len(lines) and _TABLE_RULE.match(lines[i + 1]):
            header = _cells(line)
            head = "".join(f"<th>{fmt(c)}</th>" for c in header)
            rows = []
            i += 2
            while i < len(lines) and "|" in lines[i] and lines[i].strip():
                rows.append("<tr>" + "".join(f"<td>{fmt(c)}</td>" for c in _cells(lines[i])) + "</tr>")
                i += 1
            thead = f"<thead><tr>{head}</tr></thead>" if any(header) else ""  # "| | |": a key/value table
            out.append(f"<table>{thead}<tbody>{''.join(rows)}</tbody></table>")
        elif _BULLET.match(line) or _NUMBERED.match(line):
            pattern, tag = (_BULLET, "ul") if _BULLET.match(line) else (_NUMBERED, "ol")
            items = []
            while i < len(lines) and (item := pattern.match(lines[i])):
                items.append(f"<li>{fmt(item.group(1))}</li>")
                i += 1
            out.append(f"<{tag}>{''.join(items)}</{tag}>")
        else:
            paragraph = []
            while (i < len(lines) and lines[i].strip() and not _HEADING.match(lines[i])
                   and not lines[i].lstrip().startswith("```") and not _BULLET.match(lines[i])
                   and not (i + 1 < len(lines) and "|" in lines[i] and _TABLE_RULE.match(lines[i + 1]))):
                paragraph.append(lines[i].strip())
                i += 1
            out.append(f"<p>{fmt(' '.join(paragraph))}</p>")
    return "\n".join(out)
