"""The one-line error for a BART tokenizer that lacks a special token reads as English."""

from types import SimpleNamespace

import pytest

from bertkit.errors import BertkitError
from bertkit.objectives.bart import bart_special_ids


@pytest.mark.parametrize("missing, words", [("mask_token_id", "has no mask token (<mask>)"),
                                            ("eos_token_id", "has no end-of-sequence token (</s>)"),
                                            ("bos_token_id", "has no beginning-of-sequence token (<s>)")])
def test_missing_special_token_message(missing, words):
    tokenizer = SimpleNamespace(**{"mask_token_id": 4, "eos_token_id": 2, "bos_token_id": 0, missing: None})
    with pytest.raises(BertkitError) as error:
        bart_special_ids(tokenizer, "tok/")
    assert words in str(error.value) and " no a " not in str(error.value) and " no an " not in str(error.value)
