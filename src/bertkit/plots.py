"""PNG figures without pyplot's global state, written atomically."""

from __future__ import annotations

from pathlib import Path

from bertkit.atomic import atomic_path
from bertkit.errors import BertkitError


def new_figure(width: float, height: float, dpi: int = 100):
    """A matplotlib Figure with its own Agg canvas (no pyplot, no display needed)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=dpi)
    FigureCanvasAgg(figure)
    return figure


def save_png(figure, path: str | Path) -> Path:
    """Write `figure` to `path` as PNG (parent folders created; never half-written)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            figure.savefig(tmp, format="png")
    except OSError as exc:
        raise BertkitError(f"{path}: cannot write the figure ({exc.strerror or exc})") from exc
    return path
