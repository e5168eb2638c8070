"""`--precision` reaches the inference loaders through one function (loader_options)."""

from __future__ import annotations

import pytest


def test_precision_reaches_the_loaders_in_one_place():
    from bertkit.errors import BertkitError
    from bertkit.serving.models import loader_options

    def takes_precision(directory, device=None, precision="fp32"):
        return precision

    def takes_none(directory, device=None):
        return None

    assert loader_options(takes_none, "fp32") == {}  # the loaders' default: nothing to pass
    assert loader_options(takes_precision, "int8") == {"precision": "int8"}
    with pytest.raises(BertkitError, match="precision: bf16 needs inference loaders that take precision="):
        loader_options(takes_none, "bf16")
