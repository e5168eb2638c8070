"""Wall-clock budgets: `--budget 90s|10m|2h` and the schedule laid out over the time.

A budget run's learning rate at a step is a function of the fraction of the budget
spent, not of the step: linear warm-up to the peak over the first `warmup_ratio` of the
time, then linear decay to 0 at the end (a one-cycle-like triangle). Evaluations fall at
each 1/`budget_evals` of the time. The elapsed time is wall-clock time since training
started (evaluations and checkpoint saves included, so the run ends on time), plus what
a resumed run's checkpoint had already spent.

A budget run is not bit-reproducible: how many steps fit in the time, and so where each
step falls on the schedule, depends on the machine and its load.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable

from bertkit.errors import ConfigError

_UNITS = {"s": 1, "m": 60, "h": 3600}
_BUDGET = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh])\s*$")


def parse_budget(text: str) -> float:
    """'90s' / '10m' / '2h' (or '1.5h') -> seconds; a bad value is one line naming --budget."""
    match = _BUDGET.match(str(text))
    if match is None:
        raise ConfigError(f"--budget {text!r}: expected a wall-clock time such as 90s, 10m or 2h")
    seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if seconds <= 0:
        raise ConfigError(f"--budget {text!r}: must be more than 0 seconds")
    return seconds


def describe_budget(seconds: float) -> str:
    """Seconds back as the shortest exact text: 5400 -> '90m', 7200 -> '2h', 95 -> '95s'."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def budget_lr_factor(fraction: float, warmup_ratio: float) -> float:
    """The lr multiplier at `fraction` of the budget spent: up linearly over `warmup_ratio`,
    then down linearly to 0 at 1."""
    fraction = min(max(fraction, 0.0), 1.0)
    if fraction < warmup_ratio:
        return fraction / warmup_ratio
    return max(0.0, (1.0 - fraction) / (1.0 - warmup_ratio))


class BudgetClock:
    """The time a budget run has spent: `already` seconds (restored from a checkpoint)
    plus the `clock`'s seconds since `start()`. `clock` is injectable so tests need not sleep."""

    def __init__(self, budget_seconds: float, evaluations: int, already: float = 0.0,
                 clock: Callable[[], float] = time.perf_counter):
        self.budget = budget_seconds
        self.evaluations = evaluations
        self.already = already
        self.clock = clock
        self._started: float | None = None
        self._next_mark = 1

    def start(self) -> None:
        self._started = self.clock()
        self._next_mark = math.floor(self.fraction() * self.evaluations) + 1

    def elapsed(self) -> float:
        return self.already + (self.clock() - self._started if self._started is not None else 0.0)

    def fraction(self) -> float:
        return self.elapsed() / self.budget

    def spent(self, reserve: float = 0.0) -> bool:
        """Whether the budget is spent, keeping `reserve` seconds (the last evaluation's
        length: the final evaluation must fit in the budget too)."""
        return self.elapsed() + reserve >= self.budget

    def evaluation_due(self) -> bool:
        """True once per 1/`evaluations` of the budget passed (at most once per call)."""
        fraction = self.fraction()
        if fraction * self.evaluations < self._next_mark:
            return False
        self._next_mark = math.floor(fraction * self.evaluations) + 1
        return True
