"""The inference layer's place in the import graph: it imports nothing from training or
the runs (a server can load it without the training code), and nothing below it imports
it (the old prediction <-> feature_tagger cycle)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import bertkit

PACKAGE = Path(bertkit.__file__).parent
INFERENCE = PACKAGE / "inference"
# training and the runs built on it: inference sits beside training, below the runs
FORBIDDEN = ("bertkit.training", "bertkit.finetuning", "bertkit.pretraining", "bertkit.distillation",
             "bertkit.commands", "bertkit.cli")
# layers below inference (DESIGN.md): none of them may import it
LOWER = ("tasks", "objectives", "data", "features.py", "feature_choices.py", "model", "tokenization", "evaluation",
         "plots.py", "config.py", "interop", "textio.py", "atomic.py", "errors.py", "parallel.py")
# what the runs bring; importing every module inference uses must load none of them
RUN_MODULES = ("bertkit.finetuning", "bertkit.pretraining", "bertkit.training.loop", "bertkit.training.distill",
               "bertkit.training.checkpoints", "bertkit.training.optim", "bertkit.training.reporting")


def imported_modules(path: Path) -> set[str]:
    """Every module an import statement in `path` names (function-level imports too),
    relative imports resolved against the package."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)  # `from pkg import module`
    return names


def python_files(*roots: Path) -> list[Path]:
    return sorted(p for root in roots for p in ([root] if root.is_file() else root.rglob("*.py")))


def test_inference_imports_nothing_from_training_or_the_runs():
    files = python_files(INFERENCE)
    assert len(files) >= 7
    bad = [f"{path.relative_to(PACKAGE)}: {name}" for path in files for name in sorted(imported_modules(path))
           if name.startswith(FORBIDDEN)]
    assert bad == []


def test_no_lower_layer_imports_inference():
    files = python_files(*(PACKAGE / name for name in LOWER))
    assert any(path.name == "feature_tagger.py" for path in files)
    bad = [f"{path.relative_to(PACKAGE)}: {name}" for path in files for name in sorted(imported_modules(path))
           if name.startswith(("bertkit.inference", "bertkit.prediction", "bertkit.fill_mask"))]
    assert bad == []


def test_loading_every_module_inference_uses_loads_no_run_code():
    used = sorted({name for path in python_files(INFERENCE) for name in imported_modules(path)
                   if name.startswith("bertkit.")})
    code = ("import importlib, sys\n"
            f"for name in {used!r}:\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "    except ModuleNotFoundError as exc:\n"  # `from module import function`: not a module
            "        if exc.name != name:\n"
            "            raise\n"
            f"print(sorted(m for m in sys.modules if m.startswith({RUN_MODULES!r})))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
