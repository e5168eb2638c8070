"""The encoding pipelines a trained vocabulary is served with (`tokenizers` objects).

One place decides, per algorithm, the normalizer, pre-tokenizer, decoder and the
post-processor that frames model inputs as `CLS A SEP (B SEP)` with token type ids 0/1:

  wordpiece, wordpiece-freq  BERT normalizer, BertPreTokenizer, WordPiece "##" pieces
  bpe                        BERT normalizer, BertPreTokenizer, BPE with a "</w>"
                             end-of-word suffix (Sennrich et al.; GPT-1)
  bbpe                       BERT normalizer + runs of spaces collapsed and the text
                             stripped (extra spaces would become tokens of their own),
                             ByteLevel (GPT-2/RoBERTa: prefix space, GPT-2 split regex,
                             bytes as printable symbols)
"""

from __future__ import annotations

from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors

from bertkit.tokenization.train.corpus import text_normalizer
from bertkit.tokenization.train.options import SpecialTokens, TextOptions
from bertkit.tokenization.wordpiece import WORDPIECE_PREFIX, bert_template, wordpiece_backend

BPE_SUFFIX = "</w>"


def with_pipeline(tokenizer: Tokenizer, algorithm: str, text: TextOptions) -> Tokenizer:
    """Set normalizer, pre-tokenizer and decoder of `tokenizer` for `algorithm`; returns it."""
    tokenizer.normalizer = text_normalizer(text)
    if algorithm == "bbpe":
        tokenizer.normalizer = normalizers.Sequence(
            [tokenizer.normalizer, normalizers.Replace(Regex(" {2,}"), " "), normalizers.Strip()]
        )
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        tokenizer.decoder = decoders.ByteLevel()
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        if algorithm == "bpe":
            tokenizer.decoder = decoders.BPEDecoder(suffix=BPE_SUFFIX)
        else:
            tokenizer.decoder = decoders.WordPiece(prefix=WORDPIECE_PREFIX)
    return tokenizer


def wordpiece_tokenizer(vocab: list[str], specials: SpecialTokens, text: TextOptions) -> Tokenizer:
    """The BERT WordPiece pipeline over `vocab` (tokens in id order)."""
    backend = wordpiece_backend({token: i for i, token in enumerate(vocab)}, specials.unk, text_normalizer(text))
    return finish(backend, "wordpiece", specials)


def finish(tokenizer: Tokenizer, algorithm: str, specials: SpecialTokens) -> Tokenizer:
    """Register the special tokens (never split, skipped when decoding) and the input template."""
    tokenizer.add_special_tokens(specials.tokens())
    cls, sep = specials.cls, specials.sep
    template = bert_template(cls, tokenizer.token_to_id(cls), sep, tokenizer.token_to_id(sep))
    if algorithm == "bbpe":  # offsets without the leading-space symbol, as RoBERTa
        tokenizer.post_processor = processors.Sequence([processors.ByteLevel(trim_offsets=True), template])
    else:
        tokenizer.post_processor = template
    return tokenizer
