"""The one label value every loss skips (transformers' -100): a position that takes no part in a loss.

A base module (no torch) so the data layer, the objectives, the tasks and the models all import the
same definition."""

IGNORE_INDEX = -100
