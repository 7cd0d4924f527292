"""stanza's English tokenize and POS models, with random weights, laid out as ``stanza.download`` leaves them.

A lab fetches the real models once with ``stanza.download('en', model_dir=..., processors='tokenize,pos')``;
:class:`condeval.crc.pos.StanzaTagger` then reads them with ``download_method=None``. The rehearsal has no
network, so :func:`write_stanza_models` writes the same folder here::

    resources.json                      the entries stanza's Pipeline reads for ``en``, with md5s
    en/tokenize/combined.pt             tokenizer (not loaded with tokenize_pretokenized=True)
    en/pos/combined_charlm.pt           POS tagger: UPOS, XPOS and UFeats heads
    en/pretrain/conll17.pt              word vectors the tagger reads
    en/forward_charlm/1billion.pt       character language models the tagger reads
    en/backward_charlm/1billion.pt

``stanza.download`` would also fetch ``en/mwt/combined.pt``, as it adds MWT to a tokenizer that has one;
the Pipeline never loads MWT for pre-split words, so none is written, resources.json lists none, and the
tokenizer is built without MWT output. The package names are the ones stanza's resource builder gives
English (``default_packages``).

Every model is built by stanza's own classes from stanza's own training defaults (the argument parsers of
``stanza.models.tagger``, ``charlm`` and ``tokenizer``), with tiny widths, a vocabulary of the given words
and random weights, and saved by the classes' ``save`` methods; each file is then re-saved in torch's
default format, whose bytes, unlike those of the legacy format stanza saves in, depend only on the
contents. stanza's loaders (``torch.load(..., weights_only=True)``) read both. The tags the tagger gives
are random, from the real UPOS tag set.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from stanza.models import charlm as charlm_script
from stanza.models import tagger as tagger_script
from stanza.models import tokenizer as tokenizer_script
from stanza.models.common.char_model import CHARLM_END, CHARLM_START, CharacterLanguageModelTrainer
from stanza.models.common.doc import FEATS, ID, TEXT, UPOS, XPOS, Document
from stanza.models.common.foundation_cache import FoundationCache
from stanza.models.common.pretrain import Pretrain
from stanza.models.common.vocab import EMPTY_ID, PAD_ID, ROOT_ID, UNK_ID, CharVocab, CompositeVocab
from stanza.models.pos.data import Dataset as PosDataset
from stanza.models.pos.trainer import Trainer as PosTrainer
from stanza.models.tokenization.trainer import Trainer as TokenizeTrainer
from stanza.models.tokenization.vocab import Vocab as TokenizeVocab
from stanza.resources.common import get_md5, logging_level_context
from stanza.resources.default_packages import PACKAGES, default_charlms, default_pretrains, default_treebanks

__all__ = ["DEFAULT_WORDS", "UPOS_TAGS", "EnglishPackages", "write_stanza_models"]

LANG = "en"

#: The 17 universal POS tags of Universal Dependencies v2, the tag set of stanza's ``word.upos``.
UPOS_TAGS = (
    "ADJ",
    "ADP",
    "ADV",
    "AUX",
    "CCONJ",
    "DET",
    "INTJ",
    "NOUN",
    "NUM",
    "PART",
    "PRON",
    "PROPN",
    "PUNCT",
    "SCONJ",
    "SYM",
    "VERB",
    "X",
)

#: The words of the default vocabulary: a caption of the mini-world.
DEFAULT_WORDS = ("a", "red", "circle", "beside", "two", "blue", "squares")

# A Penn Treebank tag and UD English features for each UPOS, so that the XPOS and UFeats vocabularies
# (and heads) have the kinds of entries the real English model has.
_XPOS = {
    "ADJ": "JJ",
    "ADP": "IN",
    "ADV": "RB",
    "AUX": "MD",
    "CCONJ": "CC",
    "DET": "DT",
    "INTJ": "UH",
    "NOUN": "NN",
    "NUM": "CD",
    "PART": "RP",
    "PRON": "PRP",
    "PROPN": "NNP",
    "PUNCT": ".",
    "SCONJ": "IN",
    "SYM": "SYM",
    "VERB": "VBZ",
    "X": "FW",
}
_FEATS = {
    "ADJ": "Degree=Pos",
    "ADV": "Degree=Pos",
    "DET": "Definite=Ind|PronType=Art",
    "NOUN": "Number=Sing",
    "NUM": "NumForm=Word|NumType=Card",
    "PRON": "Case=Nom|Number=Sing|Person=1|PronType=Prs",
    "PROPN": "Number=Sing",
    "VERB": "Mood=Ind|Number=Sing|Person=3|Tense=Pres|VerbForm=Fin",
}

# Tiny widths; every other option is the training script's default.
_TAGGER_DIMS = {
    "hidden_dim": 8,
    "char_hidden_dim": 8,
    "deep_biaff_hidden_dim": 8,
    "composite_deep_biaff_hidden_dim": 4,
    "word_emb_dim": 8,
    "char_emb_dim": 8,
    "tag_emb_dim": 4,
    "transformed_dim": 8,
    "num_layers": 1,
}
_CHARLM_DIMS = {"char_emb_dim": 8, "char_hidden_dim": 8}
_TOKENIZER_DIMS = {"emb_dim": 8, "hidden_dim": 8}
_PRETRAIN_DIM = 8

# A logit no random score reaches: the special ids (padding, unknown, root) are never a tag.
_NEVER = -1.0e4


@dataclass(frozen=True)
class EnglishPackages:
    """The packages ``stanza.download('en', processors='tokenize,pos')`` fetches, named as stanza names them.

    The defaults are derived as stanza's resource builder (``stanza.resources.prepare_resources``) derives
    them: the default treebank's tokenizer, its ``_charlm`` tagger, and the language's default pretrain and
    character language model as the tagger's dependencies.
    """

    tokenize: str = default_treebanks[LANG]
    pos: str = default_treebanks[LANG] + "_charlm"
    pretrain: str = default_pretrains[LANG]
    charlm: str = default_charlms[LANG]

    def files(self) -> dict[tuple[str, str], Path]:
        """Each ``(processor, package)`` and its file, relative to the model folder."""
        pairs = [("tokenize", self.tokenize), ("pos", self.pos), ("pretrain", self.pretrain)]
        pairs += [("forward_charlm", self.charlm), ("backward_charlm", self.charlm)]
        return {(processor, package): Path(LANG, processor, f"{package}.pt") for processor, package in pairs}

    def pos_dependencies(self) -> list[dict[str, str]]:
        """The POS model's dependencies as resources.json lists them."""
        return [
            {"model": "pretrain", "package": self.pretrain},
            {"model": "forward_charlm", "package": self.charlm},
            {"model": "backward_charlm", "package": self.charlm},
        ]


def write_stanza_models(model_dir: str | Path, words: Sequence[str] = DEFAULT_WORDS, seed: int = 0) -> Path:
    """Write stanza's English tokenize and POS models, with random weights, into ``model_dir``.

    Parameters
    ----------
    model_dir : str or Path
        The folder to pass to ``stanza.Pipeline(dir=...)``; created if missing.
    words : sequence of str
        The vocabulary of the tagger, word vectors and character models (their characters).
    seed : int
        Seeds the random weights. The same seed and words give the same bytes in every file.

    Returns
    -------
    Path
        ``model_dir``.
    """
    model_dir = Path(model_dir)
    words = _vocabulary(words)
    packages = EnglishPackages()
    paths = {key: model_dir / relative for key, relative in packages.files().items()}
    for path in paths.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    # fork_rng: seeding must not move the caller's global torch generator
    with torch.random.fork_rng(devices=[]), tempfile.TemporaryDirectory() as scratch, _quiet():
        torch.manual_seed(seed)
        pretrain = _write_pretrain(paths["pretrain", packages.pretrain], words, Path(scratch))
        forward = _write_charlm(paths["forward_charlm", packages.charlm], words, "forward")
        backward = _write_charlm(paths["backward_charlm", packages.charlm], words, "backward")
        _write_pos(paths["pos", packages.pos], words, pretrain, forward, backward, packages)
        _write_tokenizer(paths["tokenize", packages.tokenize], words, packages)
    for path in paths.values():
        _resave_canonically(path)
    _write_resources(model_dir, packages)
    return model_dir


def _quiet():
    """stanza's logger at ERROR while the models are built (its training code logs each step at INFO)."""
    return logging_level_context(None, False)


def _vocabulary(words: Sequence[str]) -> list[str]:
    """The distinct words, in first-seen order; an error for none, or for one holding whitespace."""
    if isinstance(words, str):
        raise TypeError("words must be a sequence of words, not one string")
    distinct = list(dict.fromkeys(words))
    if not distinct:
        raise ValueError("words is empty: the models need at least one word")
    bad = [word for word in distinct if not word or any(char.isspace() for char in word)]
    if bad:
        raise ValueError(f"words must be non-empty and hold no whitespace: {bad}")
    return distinct


def _write_pretrain(path: Path, words: Sequence[str], scratch: Path) -> Pretrain:
    """Random word vectors, converted from a word2vec text file as stanza converts the real ones."""
    # the tagger looks words up lower-cased (stanza.models.pos.data.Dataset.preprocess)
    lowered = list(dict.fromkeys(word.lower() for word in words))
    vectors = torch.randn(len(lowered), _PRETRAIN_DIM)
    text = scratch / "vectors.txt"
    lines = [f"{len(lowered)} {_PRETRAIN_DIM}"]
    lines += [word + " " + " ".join(f"{value:.6f}" for value in row.tolist()) for word, row in zip(lowered, vectors)]
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    path.unlink(missing_ok=True)  # Pretrain.load would read an old .pt file instead of converting the text
    pretrain = Pretrain(str(path), vec_filename=str(text))
    pretrain.load()  # reads the text file, saves the .pt file
    return pretrain


def _write_charlm(path: Path, words: Sequence[str], direction: str) -> Path:
    """A random character language model over the words' characters, saved as ``stanza.models.charlm`` does."""
    args = _script_args(charlm_script.parse_args, _CHARLM_DIMS, shorthand=f"{LANG}_charlm", direction=direction)
    chars = sorted({char for word in words for char in word} | {CHARLM_START, CHARLM_END})
    trainer = CharacterLanguageModelTrainer.from_new_model(args, {"char": CharVocab([chars])})
    trainer.save(str(path), full=False)
    return path


def _write_pos(
    path: Path, words: Sequence[str], pretrain: Pretrain, forward: Path, backward: Path, packages: EnglishPackages
) -> None:
    """A random POS tagger with the real heads and tag sets, on the pretrain and the character models."""
    args = _script_args(
        tagger_script.parse_args,
        _TAGGER_DIMS,
        lang=LANG,
        shorthand=f"{LANG}_{packages.tokenize}",
        word_cutoff=0,
        charlm=True,
        charlm_shorthand=f"{LANG}_{packages.charlm}",
        charlm_forward_file=str(forward),
        charlm_backward_file=str(backward),
    )
    vocab = PosDataset.init_vocab([_tagged_document(words)], args)
    trainer = PosTrainer(args=args, vocab=vocab, pretrain=pretrain, device="cpu", foundation_cache=FoundationCache())
    _randomize_heads(trainer.model)
    # the files' own places are not saved: bytes must not depend on model_dir, and the Pipeline passes them
    trainer.args["charlm_forward_file"] = f"saved_models/charlm/{LANG}_{packages.charlm}_forward_charlm.pt"
    trainer.args["charlm_backward_file"] = f"saved_models/charlm/{LANG}_{packages.charlm}_backward_charlm.pt"
    trainer.save(str(path))


def _tagged_document(words: Sequence[str]) -> Document:
    """One sentence that uses every word and every UPOS tag, for the tagger's vocabularies."""
    length = max(len(words), len(UPOS_TAGS))
    rows = []
    for index in range(length):
        upos = UPOS_TAGS[index % len(UPOS_TAGS)]
        text = words[index % len(words)]
        rows.append({ID: (index + 1,), TEXT: text, UPOS: upos, XPOS: _XPOS[upos], FEATS: _FEATS.get(upos, "_")})
    return Document([rows])


def _randomize_heads(tagger: torch.nn.Module) -> None:
    """Random weights for the classifier heads, which stanza starts at zero, and no special id as a tag.

    With zero heads every tag scores the same and argmax gives id 0, ``<PAD>``; a trained model never
    predicts the vocabulary's special ids, so their biases are pushed out of reach. At these tiny widths
    the random bias of the hidden layers under the heads outweighs what differs from word to word, and
    nearly every word would get one tag; without it the tags vary, so maskable and other words both occur.
    """
    for hidden in [tagger.upos_hid, *tagger.tag_hid.values()]:
        torch.nn.init.zeros_(hidden.bias)
    for layer, composite in _heads(tagger):
        torch.nn.init.normal_(layer.weight)
        torch.nn.init.zeros_(layer.bias)
        special = [PAD_ID, UNK_ID, ROOT_ID] if composite else [PAD_ID, UNK_ID, EMPTY_ID, ROOT_ID]
        with torch.no_grad():
            layer.bias[special] = _NEVER  # a composite vocab's <EMPTY> is a real answer: feature absent


def _heads(tagger: torch.nn.Module) -> list[tuple[torch.nn.Module, bool]]:
    """Each classifier's output layer (a Linear or Bilinear) and whether its vocabulary is composite."""
    heads = [(tagger.upos_clf, False)]
    for name, clf in tagger.tag_clf.items():
        composite = isinstance(tagger.vocab[name], CompositeVocab)
        for scorer in clf if composite else [clf]:
            heads.append((getattr(scorer, "W_bilin", scorer), composite))
    return heads


def _write_tokenizer(path: Path, words: Sequence[str], packages: EnglishPackages) -> None:
    """A random tokenizer over the words' characters, without MWT output (no MWT model is written)."""
    args = _script_args(
        tokenizer_script.parse_args,
        _TOKENIZER_DIMS,
        lang=LANG,
        shorthand=f"{LANG}_{packages.tokenize}",
        use_mwt=False,
    )
    args["feat_funcs"] = list(tokenizer_script.DEFAULT_FEAT_FUNCS)
    args["feat_dim"] = len(args["feat_funcs"])
    args["num_dict_feat"] = 0
    text = " ".join(words) + "\n\n"
    vocab = TokenizeVocab([[(char, 0) for char in text]], lang=LANG)
    args["vocab_size"] = len(vocab)
    trainer = TokenizeTrainer(args=args, vocab=vocab, device="cpu")
    trainer.save(str(path))


def _script_args(parse_args, dims: dict, **options) -> dict:
    """A stanza training script's default arguments, with ``dims`` and ``options`` set and on the CPU.

    The device is fixed so that the saved config, and so the bytes, do not depend on the machine.
    """
    args = parse_args(["--cpu"])
    args.update(dims)
    args.update(options)
    return args


def _resave_canonically(path: Path) -> None:
    """Re-save a file stanza wrote in torch's default format, whose bytes depend only on what it holds.

    stanza saves with ``_use_new_zipfile_serialization=False``; that legacy format keys each storage by its
    memory address (``torch.serialization._legacy_save``), so the same model gives new bytes on every run.
    Both formats are what ``torch.load`` reads; loading here with ``weights_only=True``, as stanza loads,
    also proves the file holds nothing stanza's loaders would refuse.
    """
    torch.save(torch.load(path, weights_only=True), path)


def _write_resources(model_dir: Path, packages: EnglishPackages) -> None:
    """``resources.json`` with the entries stanza's Pipeline reads for ``en``, and each file's md5."""
    entries: dict = {}
    for (processor, package), relative in packages.files().items():
        entries.setdefault(processor, {})[package] = {"md5": get_md5(model_dir / relative)}
    entries["pos"][packages.pos]["dependencies"] = packages.pos_dependencies()
    default = {"tokenize": packages.tokenize, "pos": packages.pos}
    entries["default_processors"] = dict(default)
    entries[PACKAGES] = {"default": default}
    entries["lang_name"] = "English"
    resources = {
        LANG: entries,
        "english": {"alias": LANG},
        # stanza formats this before checking an md5, even when the file is already in place
        "url": "https://huggingface.co/stanfordnlp/stanza-{lang}/resolve/v{resources_version}/models/{filename}",
    }
    (model_dir / "resources.json").write_text(json.dumps(resources, indent=2) + "\n", encoding="utf-8")
