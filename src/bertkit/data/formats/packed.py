"""RoBERTa's FULL-SENTENCES: one segment of whole sentences packed across documents."""

from __future__ import annotations

from bertkit.data.formats.base import InstanceFormat
from bertkit.data.instances import packed_instances


class PackedFormat(InstanceFormat):
    name = "packed"
    help = "RoBERTa full sentences, one segment"
    needs_tokens = ("sep",)  # a tokenizer without a classification token (T5's) packs `s1 s2 ... </s>`

    def make(self, documents, recipe, rng, cls_id, sep_id, random_documents=None):
        return list(packed_instances(documents, recipe["max_seq_length"], cls_id, sep_id))
