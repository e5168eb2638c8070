"""The layering written in docs/architecture.md, kept: every import inside src/bertkit runs
to the importer's own layer or a lower one, and no group of modules imports itself round in
a cycle. The layer table is read from the doc's ```layers block, so the doc and the test
cannot drift apart."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "bertkit"
DOC = ROOT / "docs" / "architecture.md"


def read_layers() -> dict[str, int]:
    """Top-level unit of bertkit (a module or a package) -> its layer number (1 = top)."""
    block = re.search(r"```layers\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert block, f"{DOC}: no ```layers block"
    layers: dict[str, int] = {}
    for line in block.group(1).splitlines():
        match = re.match(r"\s*(\d+)\s+[^:]+:\s*(.+)", line)
        if match:
            for unit in re.split(r"[,\s]+", match.group(2).strip()):
                if unit:
                    layers[unit] = int(match.group(1))
    return layers


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """bertkit modules `path` imports (absolute or relative, at any depth of the file)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "bertkit"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "bertkit":
                # `from bertkit.tasks import hooks` imports the module bertkit.tasks.hooks
                found |= {f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target for a in node.names}
    return found


MODULES = {module_name(p) for p in PACKAGE.rglob("*.py")}


def unit_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "bertkit"


def import_graph() -> dict[str, set[str]]:
    """unit -> units it imports (self-imports left out)."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        unit = unit_of(module_name(path))
        graph.setdefault(unit, set()).update(unit_of(m) for m in imported_modules(path))
    for unit, targets in graph.items():
        targets.discard(unit)
    return graph


def test_every_unit_has_a_written_layer():
    layers, graph = read_layers(), import_graph()
    missing = sorted(set(graph) - set(layers) - {"bertkit"})
    assert not missing, f"units without a layer in {DOC.name}: {missing}"


def test_no_import_runs_up_the_layers():
    layers, graph = read_layers(), import_graph()
    upward = sorted(f"{unit} (layer {layers[unit]}) -> {target} (layer {layers[target]})"
                    for unit, targets in graph.items() if unit in layers
                    for target in targets if target in layers and layers[target] < layers[unit])
    assert not upward, "imports that run up the layer order:\n" + "\n".join(upward)


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle a depth-first walk of `graph` (node -> the nodes it imports) meets."""
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                cycles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return cycles


def test_no_import_cycle_between_modules():
    """Cycles at module level (the unit check above cannot see one inside a layer)."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        graph[name] = {m for m in imported_modules(path) if m in MODULES and m != name}
    cycles = find_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_import_cycle_between_folders():
    """Cycles between top-level units (a folder or a module: `interop` <-> `pretrained_config` was one, through
    a lazy import), which two modules of one layer can make without any module-level cycle."""
    cycles = find_cycles(import_graph())
    assert not cycles, "folder-level import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


MODEL = PACKAGE / "model"
FAMILIES = sorted(p.name for p in MODEL.iterdir() if (p / "__init__.py").exists())


def runtime_imports(path: Path) -> set[str]:
    """bertkit modules `path` imports at run time (imports under `if TYPE_CHECKING:` left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            node.body = []
    return {m for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
            for m in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""])
            if m.startswith("bertkit.model.")}


def test_each_model_family_is_a_package_with_config_and_modeling():
    assert {"bert", "roberta", "electra", "albert", "t5", "xlnet"} <= set(FAMILIES)
    for family in FAMILIES:
        assert (MODEL / family / "config.py").exists() and (MODEL / family / "modeling.py").exists(), family


def family_imports(path: Path) -> set[str]:
    """The family packages `path` imports, in annotations too."""
    return {module.split(".")[2] for module in imported_modules(path)
            if module.startswith("bertkit.model.") and module.split(".")[2] in FAMILIES}


def test_shared_model_modules_import_no_family():
    """model/*.py is what families share: it names no family, not even in annotations."""
    offenders = sorted(f"{path.name} -> {family}" for path in MODEL.glob("*.py") for family in family_imports(path)
                       if path.name not in ("__init__.py", "families.py"))  # the registry and the re-exports
    assert not offenders, "shared model modules importing a family:\n" + "\n".join(offenders)


def test_family_packages_import_only_the_family_they_are_built_on():
    """A family package imports another only when its registry entry declares it `built_on` that one
    (RoBERTa, ELECTRA and ALBERT on BERT); whatever else two families share lives in model/*.py."""
    from bertkit.model.families import MODEL_FAMILIES

    declared = {family.config.split(".")[2]: {family.built_on} - {None} for family in MODEL_FAMILIES.values()}
    offenders = sorted(f"{family}/{path.name} -> {other}" for family in FAMILIES
                       for path in (MODEL / family).glob("*.py") for other in family_imports(path)
                       if other != family and other not in declared.get(family, set()))
    assert not offenders, "undeclared imports between family packages:\n" + "\n".join(offenders)


def test_finetuning_tasks_and_serving_name_no_family_or_recipe():
    """The fine-tuning run, the task families and the server ask the registry: they import no family
    package and name no family's recipe (a family's fine-tuning recipe is its registry's)."""
    paths = [PACKAGE / "finetuning.py", *(PACKAGE / "tasks").glob("*.py"), *(PACKAGE / "serving").glob("*.py")]
    offenders = sorted(f"{path.relative_to(PACKAGE)} -> {family}" for path in paths for family in family_imports(path))
    offenders += sorted(f"{path.relative_to(PACKAGE)} names gpt1" for path in paths
                        if re.search(r"gpt1", path.read_text(encoding="utf-8"), re.IGNORECASE))
    assert not offenders, "\n".join(offenders)


def test_ignore_index_is_defined_once():
    definitions = [f"{path.relative_to(PACKAGE)}" for path in PACKAGE.rglob("*.py")
                   if re.search(r"^IGNORE_INDEX\s*(:[^=]*)?=", path.read_text(encoding="utf-8"), re.MULTILINE)]
    assert definitions == ["labels.py"], definitions


def test_registry_names_each_family_from_its_package():
    from bertkit.model.families import MODEL_FAMILIES

    for name, family in MODEL_FAMILIES.items():
        for path in (family.config, family.backbone):
            assert path.startswith("bertkit.model."), (name, path)
            package = path.split(":")[0].split(".")[2]
            assert package in FAMILIES, f"{name}: {path} is not in a family package"
