"""A word-level tokenizer in Hugging Face format, built offline from a fixed vocabulary.

The mini-world's encoders and captioners share it. It is a ``PreTrainedTokenizerFast`` (the
``tokenizers`` WordLevel model): saved with ``save_pretrained`` and loaded with
``AutoTokenizer.from_pretrained(path)``, exactly as ``bert-base-uncased`` or a CLIP tokenizer loads
from a local directory on a cluster. Being a fast tokenizer it reports character offsets, which map
tokens back to words.

Special tokens follow BERT: ``[PAD]`` (id 0), ``[UNK]``, ``[CLS]`` (start), ``[SEP]`` (end),
``[MASK]``; an encoded caption is ``[CLS] w1 ... wn [SEP]``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast

__all__ = ["SPECIAL_TOKENS", "build_word_tokenizer"]

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def build_word_tokenizer(words: Sequence[str], model_max_length: int = 50) -> PreTrainedTokenizerFast:
    """A lower-casing, whitespace/punctuation-splitting word tokenizer over ``words``.

    Parameters
    ----------
    words : sequence of str
        The vocabulary (duplicates and case are folded); ids follow the special tokens in order.
    model_max_length : int
        Longest encoded sequence, special tokens included (the paper's BERT length is 50).

    Returns
    -------
    transformers.PreTrainedTokenizerFast
        With ``pad``, ``unk``, ``cls``/``bos``, ``sep``/``eos`` and ``mask`` tokens set.
    """
    lowered = list(dict.fromkeys(word.lower() for word in words))
    clash = sorted(set(lowered) & {t.lower() for t in SPECIAL_TOKENS})
    if clash:
        raise ValueError(f"vocabulary words collide with special tokens: {clash}")
    vocab = {token: i for i, token in enumerate([*SPECIAL_TOKENS, *lowered])}
    core = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    core.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        model_max_length=model_max_length,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        bos_token="[CLS]",
        eos_token="[SEP]",
        mask_token="[MASK]",
    )


def save_word_tokenizer(words: Sequence[str], path: str | os.PathLike, model_max_length: int = 50) -> None:
    """Build the tokenizer of ``words`` and ``save_pretrained`` it into ``path``."""
    build_word_tokenizer(words, model_max_length).save_pretrained(str(path))
