"""Pre-training objectives: one file each, one line each in this registry.

An objective class (bertkit.objectives.base) declares the data formats it trains on
(`data_formats`, names of bertkit.data.formats), its settings (`settings_class`,
bertkit.objectives.settings), its examples and batches (`example`, `collate`), its model
and its loss. `get_objective(name)` imports lazily so the CLI stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

from bertkit.errors import ConfigError

# name -> "module:class"
OBJECTIVES = {
    "mlm_nsp": "bertkit.objectives.mlm_nsp:MlmNspObjective",
    "mlm": "bertkit.objectives.mlm_nsp:MlmObjective",
    "roberta": "bertkit.objectives.roberta:RobertaObjective",
    "spanbert": "bertkit.objectives.spanbert:SpanBertObjective",
    "ltr": "bertkit.objectives.ltr:LtrObjective",
    "electra": "bertkit.objectives.electra:ElectraObjective",
    "deberta-v3": "bertkit.objectives.deberta_v3:DebertaV3Objective",
    "albert": "bertkit.objectives.albert:AlbertObjective",
    "xlnet": "bertkit.objectives.xlnet:XLNetObjective",
    "t5": "bertkit.objectives.t5:T5Objective",
    "clm": "bertkit.objectives.clm:ClmObjective",
    "bilm": "bertkit.objectives.bilm:BilmObjective",
    "bart": "bertkit.objectives.bart:BartObjective",
}


def get_objective(name: str):
    if name not in OBJECTIVES:
        raise ConfigError(f"field 'objective' must be one of {', '.join(OBJECTIVES)}, got {name!r}")
    module, cls = OBJECTIVES[name].split(":")
    return getattr(importlib.import_module(module), cls)


def setting_owners() -> dict[str, dict[str, Any]]:
    """Every objective setting's name -> {objective: its default there} (imports every objective)."""
    import dataclasses

    owners: dict[str, dict[str, Any]] = {}
    for name in OBJECTIVES:
        for f in dataclasses.fields(get_objective(name).settings_class):
            owners.setdefault(f.name, {})[name] = f.default
    return owners
