"""ALBERT's sentence order: two consecutive segments of one document, swapped (label 1) half the time."""

from __future__ import annotations

from bertkit.data.formats.base import InstanceFormat
from bertkit.data.instances import sop_instances


class SopFormat(InstanceFormat):
    name = "sop"
    help = "ALBERT sentence order"

    def make(self, documents, recipe, rng, cls_id, sep_id, random_documents=None):
        instances = []
        for document in documents:
            instances += sop_instances(document, recipe["max_seq_length"], recipe["short_seq_prob"], rng, cls_id, sep_id)
        return instances
