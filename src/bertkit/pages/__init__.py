"""Self-contained HTML pages: one file each, every script, style and image inlined, so
a page opens offline and can be mailed around.

  html.py      the shared shell: packaged assets (bertkit/assets), data URIs, JSON in a script tag
  markdown.py  a tiny renderer for the Markdown subset bertkit's report.md files use
  inspect.py   the attention page of `bertkit inspect`, from its data (bertkit.serving.inspect)
  report.py    `bertkit report`: a run folder's report.md, metrics and plots as one page

Rendering only: nothing here loads a model or runs training (a components-layer package,
docs/architecture.md).
"""
