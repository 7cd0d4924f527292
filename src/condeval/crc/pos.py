"""Part-of-speech tagging behind one interface: which words attention-mask sampling may mask.

The paper masks the words whose universal POS tag (UPOS) is a noun, proper noun, numeral, verb,
adjective or adverb. On a cluster the tags come from stanza, its models read from a local folder
(never downloaded at run time). Offline, the mini-world's own lexicon tags its words: its grammar
knows every token's part of speech (``annotations/tokens_{split}2014.jsonl``).
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

from condeval.datasets import DatasetFormatError

__all__ = ["MASKABLE_UPOS", "PosTagger", "LexiconTagger", "StanzaTagger", "maskable_words"]

MASKABLE_UPOS = frozenset({"NOUN", "PROPN", "NUM", "VERB", "ADJ", "ADV"})


class PosTagger(Protocol):
    """Tags pre-split words with UPOS tags, one per word."""

    def tag(self, words: Sequence[str]) -> list[str]: ...


def maskable_words(tagger: PosTagger, words: Sequence[str]) -> list[int]:
    """Indices of the words attention-mask sampling may mask (their UPOS is in MASKABLE_UPOS)."""
    tags = tagger.tag(words)
    if len(tags) != len(words):
        raise ValueError(f"the tagger returned {len(tags)} tags for {len(words)} words: {list(words)}")
    return [i for i, tag in enumerate(tags) if tag in MASKABLE_UPOS]


class LexiconTagger:
    """Tags each word with its most frequent UPOS in a lexicon; unknown words get ``X``.

    Parameters
    ----------
    lexicon : mapping of str to str
        Lower-cased word → UPOS tag.

    Examples
    --------
    >>> from condeval.crc.pos import LexiconTagger, maskable_words
    >>> tagger = LexiconTagger({"a": "DET", "red": "ADJ", "star": "NOUN", "above": "ADP"})
    >>> tagger.tag(["A", "red", "star", "above", "it"])          # case-blind; an unknown word is X
    ['DET', 'ADJ', 'NOUN', 'ADP', 'X']
    >>> maskable_words(tagger, ["A", "red", "star", "above", "it"])  # the words sampling may mask
    [1, 2]
    """

    def __init__(self, lexicon: dict[str, str]):
        self.lexicon = dict(lexicon)

    def tag(self, words: Sequence[str]) -> list[str]:
        return [self.lexicon.get(word.lower(), "X") for word in words]

    @classmethod
    def from_token_files(cls, paths: Iterable[str | os.PathLike]) -> LexiconTagger:
        """The lexicon of the mini-world's token sidecars (``tokens``, ``pos`` per caption)."""
        counts: dict[str, Counter] = defaultdict(Counter)
        for path in map(Path, paths):
            try:
                lines = path.read_text().splitlines()
            except FileNotFoundError:
                raise DatasetFormatError(f"{path}: file not found") from None
            for number, line in enumerate(lines, 1):
                try:
                    record = json.loads(line)
                    tokens, tags = record["tokens"], record["pos"]
                except (json.JSONDecodeError, KeyError, TypeError):
                    raise DatasetFormatError(f"{path}: line {number} is not a record with 'tokens' and 'pos'") from None
                if len(tokens) != len(tags):
                    raise DatasetFormatError(f"{path}: line {number} has {len(tokens)} tokens but {len(tags)} tags")
                for token, tag in zip(tokens, tags):
                    counts[token.lower()][tag] += 1
        return cls({word: tags.most_common(1)[0][0] for word, tags in counts.items()})


class StanzaTagger:
    """stanza's English POS tagger on pre-split words, its models read from ``model_dir``.

    ``download_method=None`` keeps stanza from reaching the network; a missing model is an error.

    Examples
    --------
    With stanza's English models in ``model_dir``, ``StanzaTagger(model_dir).tag(["a", "red", "star"])`` gives
    one UPOS tag per word; a folder without them is refused, and nothing is downloaded:

    >>> import tempfile
    >>> from condeval.crc.pos import StanzaTagger
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     try:
    ...         StanzaTagger(folder)
    ...     except FileNotFoundError as error:
    ...         print("resources.json" in str(error))
    True
    """

    def __init__(self, model_dir: str | os.PathLike, lang: str = "en", use_gpu: bool = False):
        import stanza

        self.pipeline = stanza.Pipeline(
            lang=lang,
            processors="tokenize,pos",
            tokenize_pretokenized=True,
            dir=str(model_dir),
            download_method=None,
            use_gpu=use_gpu,
            verbose=False,
        )

    def tag(self, words: Sequence[str]) -> list[str]:
        document = self.pipeline([list(words)])
        return [word.upos for sentence in document.sentences for word in sentence.words]
