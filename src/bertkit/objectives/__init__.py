"""Pre-training objectives: one file each, one line each in this registry.

`get_objective(name)` imports lazily so the CLI stays fast.
"""

from __future__ import annotations

import importlib

from bertkit.errors import ConfigError

# name -> "module:class"
OBJECTIVES = {
    "mlm_nsp": "bertkit.objectives.mlm_nsp:MlmNspObjective",
    "mlm": "bertkit.objectives.mlm_nsp:MlmObjective",
    "roberta": "bertkit.objectives.roberta:RobertaObjective",
    "spanbert": "bertkit.objectives.spanbert:SpanBertObjective",
    "ltr": "bertkit.objectives.ltr:LtrObjective",
    "electra": "bertkit.objectives.electra:ElectraObjective",
    "albert": "bertkit.objectives.albert:AlbertObjective",
}


def get_objective(name: str):
    if name not in OBJECTIVES:
        raise ConfigError(f"field 'objective' must be one of {', '.join(OBJECTIVES)}, got {name!r}")
    module, cls = OBJECTIVES[name].split(":")
    return getattr(importlib.import_module(module), cls)
