"""BERT's sentence pairs: B follows A (IsNext) or comes from another document (NotNext), 50/50."""

from __future__ import annotations

from bertkit.data.formats.base import InstanceFormat
from bertkit.data.instances import nsp_instances


class NspFormat(InstanceFormat):
    name = "nsp"
    help = "BERT sentence pairs with IsNext/NotNext (default)"
    min_documents = 2
    why_min_documents = "NotNext pairs take B from another document"

    def make(self, documents, recipe, rng, cls_id, sep_id, random_documents=None):
        instances = []
        for index in range(len(documents)):
            instances += nsp_instances(index, documents, recipe["max_seq_length"], recipe["short_seq_prob"], rng,
                                       cls_id, sep_id, random_documents)
        return instances
