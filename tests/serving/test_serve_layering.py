"""The server is a command-level consumer of the inference layer: nothing under
bertkit.serving imports training code or a run, and loading every serving module (the
FastAPI app included) loads none of them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import bertkit

SERVING = Path(bertkit.__file__).parent / "serving"
FORBIDDEN = ("bertkit.training", "bertkit.finetuning", "bertkit.pretraining", "bertkit.distillation",
             "bertkit.objectives", "bertkit.commands", "bertkit.cli")
RUN_MODULES = ("bertkit.finetuning", "bertkit.pretraining", "bertkit.distillation", "bertkit.training.loop",
               "bertkit.training.checkpoints", "bertkit.training.optim", "bertkit.training.reporting")


def test_serving_imports_no_training_code():
    from test_architecture import imported_modules  # tests/test_architecture.py: every bertkit import

    files = sorted(SERVING.rglob("*.py"))
    assert len(files) >= 8
    bad = [f"{path.name}: {name}" for path in files for name in sorted(imported_modules(path))
           if name.startswith(FORBIDDEN)]
    assert bad == []


def test_loading_the_server_loads_no_run_code():
    modules = sorted(f"bertkit.serving.{path.stem}" for path in SERVING.glob("*.py") if path.stem != "__init__")
    code = ("import importlib, sys\n"
            f"for name in {modules!r}:\n"
            "    importlib.import_module(name)\n"
            "import bertkit.inference.embedding, bertkit.inference.prediction, bertkit.inference.masked_lm\n"
            f"print(sorted(m for m in sys.modules if m.startswith({RUN_MODULES!r})))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
