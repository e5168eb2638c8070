"""ELMo: the character-CNN biLM (Peters et al. 2018) whose layers feed a task through a scalar mix.

The family's public classes; helpers are imported from their modules (characters, layers, ...).
"""

from __future__ import annotations

from bertkit.model.elmo.config import ElmoConfig
from bertkit.model.elmo.modeling import ElmoBiLM, ElmoOutput, ElmoPreTrainedModel
from bertkit.model.scalar_mix import ScalarMix

__all__ = ["ElmoConfig", "ElmoBiLM", "ElmoOutput", "ElmoPreTrainedModel", "ScalarMix"]
