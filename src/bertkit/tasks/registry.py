"""Task families (classification, tagging, multiple choice, QA): one registry entry each.

Fine-tuning, evaluation, `predict` and the CLI never compare family names: they look the
family up here and call its entry, which answers from the family's own module. Adding a
task family = its module (the functions of bertkit.tasks.hooks it needs, a
`TaskProgram` subclass for the shared loop) + one `register(TaskFamily(...))` line below
(a family made elsewhere, e.g. in a test, registers itself the same way). A family
whose model needs a head no model family has yet also adds that head to the model
families' `tasks` (bertkit.model.families).

The entry declares (a `TaskFamily`):
- `name` (saved in bertkit_task.json as `TaskSpec.family`) and `aliases` (glue, ner,
  squad: other names `get_task_family` accepts);
- `module`: the family's module — read_examples / encode / collate / model_class, plus
  the optional hooks of bertkit.tasks.hooks (metrics, predict, predict inputs, report
  lines, evaluation label map, head config, inferred spec); a hook the module lacks is
  the default there;
- `program`: its `TaskProgram` ("module:Class"); `feature_program` the feature-based
  variant (`finetune ner --features`), None when the family has none;
- `head`: the model-family head key it trains (bertkit.model.families `tasks`), its
  name unless it reuses another family's head;
- `label_names`: whether its models carry a label map (id2label); `placeholder_labels`:
  whether a head fine-tuned elsewhere with LABEL_i names is taken in the task's label
  order (a teacher for distillation); `max_seq_length`:
  its default sequence length (SQuAD's 384 windows), None for the run's default;
- `commands`: the `bertkit finetune` / `distill --task` subcommands that train it,
  `evaluate_command`: how `bertkit evaluate` scores it (named in error messages).
References are strings imported on first use, so the CLI stays fast.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

from bertkit.errors import ConfigError
from bertkit.tasks import hooks

# the built-in families' names: spelled here only
CLASSIFICATION = "classification"
TAGGING = "tagging"
MULTIPLE_CHOICE = "multiple_choice"
QA = "qa"
TEXT2TEXT = "text2text"
# what a text-to-text family's files hold (`--task`); here, not in bertkit.tasks.text2text, so the
# command line offers them without importing torch
TEXT2TEXT_TASKS = ("glue", "squad", "ner", "pairs")


@dataclass(frozen=True)
class TaskFamily:
    """One task family (see the module docstring for the fields)."""

    name: str
    module: str
    program: str
    aliases: tuple[str, ...] = ()
    head: str | None = None
    label_names: bool = True
    placeholder_labels: bool = False
    max_seq_length: int | None = None
    feature_program: str | None = None
    commands: tuple[str, ...] = ()
    evaluate_command: str | None = None

    @property
    def title(self) -> str:
        """The name in prose ("multiple choice")."""
        return self.name.replace("_", " ")

    @property
    def head_name(self) -> str:
        return self.head or self.name

    def load_module(self) -> ModuleType:
        return importlib.import_module(self.module)

    def program_class(self):
        return _resolve(self.program)

    def feature_program_class(self):
        return None if self.feature_program is None else _resolve(self.feature_program)

    def hook(self, name: str) -> Callable[..., Any]:
        """The family module's `name` hook, or the default of bertkit.tasks.hooks."""
        if name not in hooks.HOOKS:
            raise AttributeError(f"no task-family hook {name!r} (hooks: {', '.join(hooks.HOOKS)})")
        return getattr(self.load_module(), name, None) or getattr(hooks, name)


    def evaluation_label_map(self, spec, config, examples: list, origin: str) -> dict[str, int] | None:
        """The model's label -> id map checked against the file's labels (the family's
        `evaluation_label_map` hook); None for a family whose models carry no label names."""
        if not self.label_names:
            return None
        return self.hook("evaluation_label_map")(spec, config, examples, origin)


TASK_FAMILIES: dict[str, TaskFamily] = {}


def register(family: TaskFamily) -> TaskFamily:
    """Add (or replace) a task family; its name and aliases must not name another family."""
    taken = {name: owner.name for owner in TASK_FAMILIES.values() if owner.name != family.name
             for name in (owner.name, *owner.aliases)}
    for name in (family.name, *family.aliases):
        if name in taken:
            raise ConfigError(f"task family {family.name!r}: {name!r} already names task family {taken[name]!r}")
    TASK_FAMILIES[family.name] = family
    return family


def unregister(name: str) -> None:
    TASK_FAMILIES.pop(name, None)


def _key(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def get_task_family(name: str) -> TaskFamily:
    """The entry of task family `name` or one of its aliases (case and - / _ ignored:
    "NER", "multiple-choice")."""
    key = _key(name)
    for family in TASK_FAMILIES.values():
        if key == family.name or key in family.aliases:
            return family
    known = [n for family in TASK_FAMILIES.values() for n in (family.name, *family.aliases)]
    raise ConfigError(f"task family {name!r}: unknown; expected one of {', '.join(known)}")


def task_family_names() -> tuple[str, ...]:
    return tuple(TASK_FAMILIES)


def task_families() -> tuple[TaskFamily, ...]:
    return tuple(TASK_FAMILIES.values())


def command_families() -> dict[str, str]:
    """`bertkit finetune` / `distill --task` subcommand -> the task family it trains."""
    return {command: family.name for family in TASK_FAMILIES.values() for command in family.commands}


def _resolve(reference: str):
    module, name = reference.split(":")
    return getattr(importlib.import_module(module), name)


_PROGRAMS = "bertkit.tasks.programs"

register(TaskFamily(CLASSIFICATION, "bertkit.tasks.classification", f"{_PROGRAMS}:ClassificationProgram",
                    aliases=("glue",), placeholder_labels=True, commands=("glue", "classify"),
                    feature_program="bertkit.tasks.feature_tagger:FeatureClassificationProgram",
                    evaluate_command="glue / classify"))
register(TaskFamily(TAGGING, "bertkit.tasks.tagging", f"{_PROGRAMS}:TaggingProgram", aliases=("ner",),
                    feature_program="bertkit.tasks.feature_tagger:FeatureTaggingProgram", commands=("ner",),
                    evaluate_command="ner"))
register(TaskFamily(MULTIPLE_CHOICE, "bertkit.tasks.multiple_choice", f"{_PROGRAMS}:MultipleChoiceProgram",
                    label_names=False, commands=("multiple-choice",), evaluate_command="multiple-choice"))
register(TaskFamily(QA, "bertkit.tasks.qa", f"{_PROGRAMS}:QuestionAnsweringProgram", aliases=("squad",),
                    label_names=False, max_seq_length=384, commands=("squad",), evaluate_command="squad --model"))
register(TaskFamily(TEXT2TEXT, "bertkit.tasks.text2text", "bertkit.tasks.text2text:Text2TextProgram",
                    label_names=False, max_seq_length=512, commands=("text2text",), evaluate_command="text2text"))
