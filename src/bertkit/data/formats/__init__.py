"""Instance formats of `bertkit data build`: one module each, one line each in this registry.

A format (bertkit.data.formats.base.InstanceFormat) turns one slice's tokenized documents
into instances `(input_ids, segment_b, label)`; the name is what `data build --format`
takes, what the data directory records and what an objective lists in `data_formats`.
"""

from __future__ import annotations

import importlib

from bertkit.errors import ConfigError

# name -> "module:class"
FORMATS = {
    "nsp": "bertkit.data.formats.nsp:NspFormat",
    "packed": "bertkit.data.formats.packed:PackedFormat",
    "sop": "bertkit.data.formats.sop:SopFormat",
    "xlnet": "bertkit.data.formats.xlnet:XLNetFormat",
}


def get_format(name: str):
    """The registered format `name` (an InstanceFormat instance)."""
    if name not in FORMATS:
        raise ConfigError(f"instance_format={name!r} is not one of {', '.join(FORMATS)}")
    module, cls = FORMATS[name].split(":")
    return getattr(importlib.import_module(module), cls)()
