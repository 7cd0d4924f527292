"""The paper config's hub repositories, written here at their real shapes with random weights.

Every repository ``config/sources.yaml`` fetches (:func:`catalogue_repos`) has a builder in :data:`REPOS`
that writes a folder laid out as the hub's: the same file names (``config.json``, ``model.safetensors``
or the diffusers ``diffusion_pytorch_model.safetensors``, shards with their index where the hub shards,
``model_index.json`` and one folder per component for a pipeline, tokenizer and processor files), from
the real config and model classes, in the hub's stored dtype. What is kept real: image sizes, patch
sizes, image and latent channels, the autoencoders' down-sampling depth and latent scaling, position
counts (``max_position_embeddings``, ``model_max_length``), special tokens and their ids, register
tokens, the pipelines' schedulers. What shrinks: depth (1–2 layers), widths (32–64), heads, vocabularies
(about a thousand tokens, trained here on :data:`CORPUS`). Widths that must agree across components
agree as on the hub: SD3's ``joint_attention_dim`` is its T5's width and ``pooled_projection_dim`` the
sum of its two CLIP projections; FLUX's ``pooled_projection_dim`` is its CLIP's width; Kandinsky's prior
``embedding_dim`` is its CLIP text width and projection and the decoder's image-embedding width.

The values kept come from the config classes' defaults (which are often the base checkpoint) and from
the hub's ``config.json`` files and diffusers' conversion scripts as ``../shared/REFERENCE.md`` records
them; each builder says which. Builds are deterministic: the same seed writes the same bytes.

Tokenizers are the real transformers classes over a vocabulary learned here by a deterministic
byte-pair learner (:func:`learn_merges`; the ``tokenizers`` library's trainers break ties in hash order,
so two processes learn different vocabularies): CLIP's byte-level BPE, BERT's WordPiece, and a Unigram
model for T5, XLM-R and SigLIP whose SentencePiece ``.model`` file is written as the protobuf it is.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import logging
import math
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

import torch

from condeval.core.io import atomic_directory

__all__ = [
    "REPOS",
    "REHEARSAL",
    "SCALES",
    "shapes",
    "write_hub_repo",
    "write_hub_repos",
    "catalogue_repos",
    "CORPUS",
    "learn_merges",
    "write_clip_tokenizer",
    "write_bert_tokenizer",
    "write_t5_tokenizer",
    "write_xlmr_tokenizer",
    "write_siglip_tokenizer",
    "XLMR_CLIP_CODE",
]

log = logging.getLogger(__name__)

#: The English text every rehearsal tokenizer learns its vocabulary from.
CORPUS = """
a man riding a red bicycle down a busy city street
two dogs playing with a yellow ball on the green grass
a woman holding an umbrella while walking in the rain
a plate of food with broccoli rice and grilled chicken
a cat sleeping on a wooden chair next to the window
three people standing on a beach watching the sunset
a large white airplane flying over the blue ocean
a little girl eating a slice of pizza at the table
a train traveling along the tracks through the mountains
a bowl of fresh fruit with apples oranges and bananas
a group of children playing soccer in the park
a brown horse grazing in a field near an old barn
a kitchen with a stove a sink and white cabinets
a young boy flying a colorful kite on a windy day
a bus parked on the side of the road in front of a building
an elephant walking through tall grass in the savanna
a bathroom with a toilet a mirror and a small shower
a man surfing a big wave in the ocean
a black and white photo of a clock tower in the town square
two giraffes standing near a tree at the zoo
a person skiing down a snowy hill under a clear sky
a red fire hydrant on the corner of a quiet street
a laptop computer sitting on a desk beside a cup of coffee
a bird perched on a branch of a flowering tree
a teddy bear sitting on a bed with striped sheets
a sheep and her lamb resting in a green meadow
a boat floating on a calm lake surrounded by forest
a woman riding a motorcycle along a country road
a stop sign at an intersection with cars waiting
a pair of scissors and a pencil lying on a sheet of paper
a round blue square and a small green triangle
a circle a star and a heart drawn in bright colors
one two three four five six seven eight nine ten
""".split("\n")

_CLIP_BOS, _CLIP_EOS = "<|startoftext|>", "<|endoftext|>"
_OPENAI_MEAN, _OPENAI_STD = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]
_IMAGENET_MEAN, _IMAGENET_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
_BICUBIC, _BILINEAR = 3, 2
_SPACE = "▁"  # SentencePiece's word-start mark
_T5_EXTRA_IDS = 100
#: Shrunk widths: every tower is ``_LAYERS`` deep with ``_HEADS`` heads (a width must be a multiple of it).
_LAYERS, _HEADS = 2, 2
_MODULE_FILE = "modeling_xlmr_clip.py"


# ------------------------------------------------------------------------------------------- files
def _write_json(path: Path, data) -> None:
    """``data`` as JSON with sorted keys, 2-space indent and a final newline (as ``save_pretrained`` writes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def _shard_size(model, shards: int) -> int:
    """The smallest ``max_shard_size`` (bytes) at which ``save_pretrained`` splits ``model`` into
    ``shards`` files, as the hub's large checkpoints are (e.g. ``model-00001-of-00002.safetensors``)."""
    from huggingface_hub import split_torch_state_dict_into_shards

    state = {name: tensor for name, tensor in model.state_dict().items()}
    low, high = 1, sum(t.numel() * t.element_size() for t in state.values())
    while low < high:  # the shard count only falls as the size grows
        middle = (low + high) // 2
        if len(split_torch_state_dict_into_shards(state, max_shard_size=middle).filename_to_tensors) <= shards:
            high = middle
        else:
            low = middle + 1
    return low


#: False while a repository is written without its weights (``write_hub_repo(..., weights=False)``).
_WEIGHTS: contextvars.ContextVar[bool] = contextvars.ContextVar("rehearsal_weights", default=True)


def _save_config(model, folder: Path) -> None:
    """Only the config file ``save_pretrained`` would write (diffusers' ``save_config``; transformers' config with
    the model's class in ``architectures``)."""
    if hasattr(model, "save_config"):
        model.save_config(folder)
        return
    model.config.architectures = [type(model).__name__]
    model.config.save_pretrained(folder)


def _save_model(model, folder: Path, dtype: torch.dtype = torch.float32, shards: int = 1) -> None:
    """``model.save_pretrained(folder)`` in ``dtype`` (the hub's stored dtype), in ``shards`` safetensors files;
    its config alone while a repository is written without weights.

    Raises
    ------
    RuntimeError
        When no shard size gives exactly ``shards`` files (a model with too few tensors).
    """
    if not _WEIGHTS.get():
        _save_config(model, folder)
        return
    model = model.to(dtype)
    if shards == 1:
        model.save_pretrained(folder)
        return
    model.save_pretrained(folder, max_shard_size=_shard_size(model, shards))
    written = sorted(path.name for path in folder.glob("*.safetensors"))
    if len(written) != shards:
        raise RuntimeError(f"{folder}: asked for {shards} weight shards, save_pretrained wrote {written}")


# ------------------------------------------------------------------------------ vocabulary learning
def learn_merges(words: dict[tuple[str, ...], int], max_merges: int, join=lambda a, b: a + b) -> list[tuple[str, str]]:
    """Byte-pair merges learned from ``words`` (symbol tuples with their counts), deterministically.

    Each step merges the most frequent adjacent pair, ties broken by the pair's text, until
    ``max_merges`` or every word is one symbol. ``join`` makes a merged symbol (WordPiece drops the
    right part's ``##``).

    Parameters
    ----------
    words : dict
        ``("c", "a", "t</w>") -> count``.
    max_merges : int
        At most this many merges.
    join : callable
        ``join(left, right)`` the merged symbol.

    Returns
    -------
    list of (str, str)
        The merges in the order learned (the BPE priority).

    Examples
    --------
    >>> learn_merges({("a", "b", "c"): 2, ("a", "b"): 1}, 5)
    [('a', 'b'), ('ab', 'c')]
    """
    merges = []
    for _ in range(max_merges):
        pairs = Counter()
        for symbols, count in words.items():
            for pair in zip(symbols, symbols[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best = min(pairs, key=lambda pair: (-pairs[pair], pair))
        merges.append(best)
        words = {_merge(symbols, best, join): count for symbols, count in words.items()}
    return merges


def _merge(symbols: tuple[str, ...], pair: tuple[str, str], join) -> tuple[str, ...]:
    """``symbols`` with every occurrence of ``pair`` replaced by its join, left to right."""
    merged, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            merged.append(join(*pair))
            i += 2
        else:
            merged.append(symbols[i])
            i += 1
    return tuple(merged)


def _corpus_words() -> Counter:
    """Word counts of :data:`CORPUS`."""
    return Counter(word for line in CORPUS for word in line.split())


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2 / CLIP byte-level alphabet: printable bytes map to themselves, the rest to code points from 256,
    in byte order (the order of CLIP's first 256 vocabulary entries)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [byte for byte in range(256) if byte not in printable]
    characters = [chr(byte) for byte in printable] + [chr(256 + i) for i in range(len(others))]
    return dict(zip(printable + others, characters))


@functools.cache
def _clip_vocabulary() -> tuple[dict[str, int], tuple[tuple[str, str], ...]]:
    """CLIP's BPE (vocab, merges) laid out as CLIP's: the 256 byte symbols, the same with ``</w>``, one
    token per merge, then ``<|startoftext|>`` and ``<|endoftext|>`` last (the largest ids, as 49406 and 49407)."""
    alphabet = list(_bytes_to_unicode().values())
    words = {(*word[:-1], word[-1] + "</w>"): count for word, count in _corpus_words().items()}
    merges = learn_merges(words, 400)
    tokens = list(dict.fromkeys([*alphabet, *(symbol + "</w>" for symbol in alphabet), *(a + b for a, b in merges)]))
    return {token: i for i, token in enumerate([*tokens, _CLIP_BOS, _CLIP_EOS])}, tuple(merges)


@functools.cache
def _wordpiece_vocabulary() -> tuple[str, ...]:
    """bert-base-uncased's layout: ``[PAD]`` 0, ``[unused0..98]``, ``[UNK]`` 100, ``[CLS]`` 101, ``[SEP]`` 102,
    ``[MASK]`` 103, then ASCII characters and their ``##`` continuations, then learned pieces."""
    specials = ["[PAD]", *(f"[unused{i}]" for i in range(99)), "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    characters = [chr(c) for c in range(ord("!"), ord("~") + 1) if not chr(c).isupper()]
    continuations = ["##" + c for c in characters if c.isalnum()]
    words = {(word[0], *("##" + c for c in word[1:])): count for word, count in _corpus_words().items()}
    merges = learn_merges(words, 400, join=lambda a, b: a + b.removeprefix("##"))
    pieces = [a + b.removeprefix("##") for a, b in merges]
    return tuple(dict.fromkeys([*specials, *characters, *continuations, *pieces]))


@functools.cache
def _unigram_pieces() -> tuple[tuple[str, float], ...]:
    """SentencePiece-style Unigram pieces with log-probability scores, highest first.

    Pieces are the byte-pair symbols of ``▁``-prefixed words (merges and single characters); a piece's
    score is the log of its frequency in the corpus's final segmentation (a floor for pieces it never
    uses, such as upper-case letters), rounded to 4 decimals so that sums never depend on the platform.
    """
    words = {(_SPACE, *word): count for word, count in _corpus_words().items()}
    merges = learn_merges(words, 400)
    usage = Counter()
    for symbols, count in words.items():
        for merge in merges:
            symbols = _merge(symbols, merge, str.__add__)
        usage.update({piece: count for piece in symbols})
    characters = [_SPACE, *(chr(c) for c in range(ord("!"), ord("~") + 1))]
    total = sum(usage.values())
    pieces = dict.fromkeys([*(a + b for a, b in merges), *characters])
    scored = {piece: round(math.log((usage[piece] or 0.01) / total), 4) for piece in pieces}
    return tuple(sorted(scored.items(), key=lambda item: (-item[1], item[0])))


# -------------------------------------------------------------------------------------- tokenizers
def _special_tokens_map(tokenizer, extra: Iterable[str] = ()) -> dict:
    """``special_tokens_map.json``: the tokenizer's named special tokens (and ``additional_special_tokens``)."""
    names = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
    tokens = {name: str(getattr(tokenizer, name)) for name in names if getattr(tokenizer, name, None) is not None}
    extra = list(extra)
    return {**tokens, "additional_special_tokens": extra} if extra else tokens


def _save_tokenizer(
    tokenizer, folder: Path, files: dict[str, str | bytes], *, fast_file: bool = True, special_map: dict | None = None
) -> None:
    """``tokenizer.save_pretrained(folder)`` plus the hub's legacy files (``files``: name -> content) and
    ``special_tokens_map.json``; without ``tokenizer.json`` where the hub has none (``fast_file=False``)."""
    tokenizer.save_pretrained(folder)
    for name, content in files.items():
        if isinstance(content, bytes):
            (folder / name).write_bytes(content)
        else:
            (folder / name).write_text(content, encoding="utf-8")
    if special_map is not None:
        _write_json(folder / "special_tokens_map.json", special_map)
    if not fast_file:
        (folder / "tokenizer.json").unlink()


def write_clip_tokenizer(folder: Path, *, pad_token: str = _CLIP_EOS, fast_file: bool = True) -> int:
    """A ``CLIPTokenizer`` (byte-level BPE, lower-cased, ``model_max_length`` 77) with ``vocab.json`` and
    ``merges.txt``; ``pad_token`` ``"!"`` as the LAION/OpenCLIP ViT-bigG tokenizers (SD3's second, Kandinsky's).
    Returns the vocabulary size."""
    from transformers import CLIPTokenizer

    vocab, merges = _clip_vocabulary()
    tokenizer = CLIPTokenizer(vocab=dict(vocab), merges=list(merges), pad_token=pad_token, model_max_length=77)
    files = {
        "vocab.json": json.dumps(vocab, ensure_ascii=False),
        "merges.txt": "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges),
    }
    _save_tokenizer(tokenizer, folder, files, fast_file=fast_file, special_map=_special_tokens_map(tokenizer))
    return len(vocab)


def write_bert_tokenizer(folder: Path, *, blip: bool = False, special_map: bool = True) -> dict[str, int]:
    """A bert-base-uncased tokenizer with ``vocab.txt``; ``blip``: BLIP's, which appends ``[DEC]`` (its
    ``bos_token``, the caption start) and ``[ENC]``. Returns the ids a text config needs."""
    from transformers import BertTokenizer

    extra = ("[DEC]", "[ENC]") if blip else ()
    vocab = [*_wordpiece_vocabulary(), *extra]
    kwargs = {"bos_token": "[DEC]", "additional_special_tokens": ["[ENC]"]} if blip else {}
    tokenizer = BertTokenizer(
        vocab={token: i for i, token in enumerate(vocab)}, do_lower_case=True, model_max_length=512, **kwargs
    )
    special = _special_tokens_map(tokenizer, ["[ENC]"] if blip else ()) if special_map else None
    _save_tokenizer(tokenizer, folder, {"vocab.txt": "".join(token + "\n" for token in vocab)}, special_map=special)
    ids = {
        name: tokenizer.convert_tokens_to_ids(token)
        for name, token in (("pad", "[PAD]"), ("cls", "[CLS]"), ("sep", "[SEP]"), ("dec", "[DEC]"))
    }
    return {"vocab_size": len(vocab), **ids}


def _sentencepiece_model(pieces: list[tuple[str, float]], special: dict[str, int]) -> bytes:
    """A SentencePiece ``ModelProto`` (Unigram) serialised, as ``spiece.model`` / ``sentencepiece.bpe.model``.

    ``special`` maps ``unk``/``bos``/``eos``/``pad`` to their piece index (−1: none). Built with the protobuf
    schema transformers ships, as SentencePiece itself is not installed here; the normaliser is the identity
    (SentencePiece's NFKC rules are a compiled table only SentencePiece can build).
    """
    from transformers.utils import sentencepiece_model_pb2_new as sentencepiece

    model = sentencepiece.ModelProto()
    kinds = {index: ("UNKNOWN" if name == "unk" else "CONTROL") for name, index in special.items() if index >= 0}
    for index, (text, score) in enumerate(pieces):
        piece = model.pieces.add()
        piece.piece, piece.score = text, score
        piece.type = sentencepiece.ModelProto.SentencePiece.Type.Value(kinds.get(index, "NORMAL"))
    trainer = model.trainer_spec
    trainer.model_type = sentencepiece.TrainerSpec.ModelType.Value("UNIGRAM")
    trainer.vocab_size = len(pieces)
    trainer.unk_id, trainer.bos_id, trainer.eos_id, trainer.pad_id = (special[k] for k in ("unk", "bos", "eos", "pad"))
    normalizer = model.normalizer_spec
    normalizer.name, normalizer.add_dummy_prefix = "identity", True
    normalizer.remove_extra_whitespaces = normalizer.escape_whitespaces = True
    return model.SerializeToString(deterministic=True)


def _t5_pieces() -> list[tuple[str, float]]:
    """T5's SentencePiece layout: ``<pad>`` 0, ``</s>`` 1, ``<unk>`` 2, then the learned pieces."""
    return [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), *_unigram_pieces()]


def write_t5_tokenizer(folder: Path, model_max_length: int = 512) -> int:
    """T5 v1.1's tokenizer (SD3's ``tokenizer_3``, FLUX's ``tokenizer_2``): ``T5Tokenizer`` (Unigram) with its
    ``spiece.model`` and the 100 sentinels ``<extra_id_99>`` … ``<extra_id_0>`` after the pieces. Returns the
    vocabulary size."""
    from transformers import T5Tokenizer

    pieces = _t5_pieces()
    sentinels = [(f"<extra_id_{i}>", 0.0) for i in reversed(range(_T5_EXTRA_IDS))]
    tokenizer = T5Tokenizer(vocab=[*pieces, *sentinels], extra_ids=_T5_EXTRA_IDS, model_max_length=model_max_length)
    spiece = _sentencepiece_model(pieces, {"pad": 0, "eos": 1, "unk": 2, "bos": -1})
    special = _special_tokens_map(tokenizer, [token for token, _ in reversed(sentinels)])
    _save_tokenizer(tokenizer, folder, {"spiece.model": spiece}, special_map=special)
    return len(tokenizer)


def write_xlmr_tokenizer(folder: Path) -> int:
    """XLM-RoBERTa's tokenizer: ``XLMRobertaTokenizer`` (Unigram; fairseq's ids ``<s>`` 0, ``<pad>`` 1, ``</s>`` 2,
    ``<unk>`` 3, the pieces, ``<mask>`` last; 512 positions) with ``sentencepiece.bpe.model`` (SentencePiece's
    own ids: ``<unk>`` 0, ``<s>`` 1, ``</s>`` 2, the pieces from 3, fairseq's offset being 1). The hub repo has
    no ``tokenizer_config.json`` or ``special_tokens_map.json``; ``save_pretrained`` writes the first (its
    ``model_max_length`` 512). Returns the vocabulary size."""
    from transformers import XLMRobertaTokenizer

    pieces = list(_unigram_pieces())
    vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), *pieces, ("<mask>", 0.0)]
    tokenizer = XLMRobertaTokenizer(vocab=vocab, model_max_length=512)
    spm = _sentencepiece_model(
        [("<unk>", 0.0), ("<s>", 0.0), ("</s>", 0.0), *pieces], {"unk": 0, "bos": 1, "eos": 2, "pad": -1}
    )
    _save_tokenizer(tokenizer, folder, {"sentencepiece.bpe.model": spm})
    return len(vocab)


def write_siglip_tokenizer(folder: Path) -> int:
    """SigLIP's tokenizer files as the hub has them: ``spiece.model`` (T5-like ids: ``</s>`` 1 is also the pad),
    ``tokenizer_config.json`` (``SiglipTokenizer``, lower-cased, ``model_max_length`` 64) and
    ``special_tokens_map.json``, with no ``tokenizer.json``. ``SiglipTokenizer`` needs SentencePiece, not
    installed here, so the files are written directly. Returns the vocabulary size."""
    pieces = _t5_pieces()
    (folder / "spiece.model").write_bytes(_sentencepiece_model(pieces, {"pad": 0, "eos": 1, "unk": 2, "bos": -1}))
    special = {"eos_token": "</s>", "pad_token": "</s>", "unk_token": "<unk>"}
    _write_json(folder / "special_tokens_map.json", special)
    _write_json(
        folder / "tokenizer_config.json",
        {
            **special,
            "additional_special_tokens": [],
            "clean_up_tokenization_spaces": True,
            "do_lower_case": True,
            "model_input_names": ["input_ids"],
            "model_max_length": 64,
            "processor_class": "SiglipProcessor",
            "sp_model_kwargs": {},
            "tokenizer_class": "SiglipTokenizer",
        },
    )
    return len(pieces)


# -------------------------------------------------------------------------------- image processors
def _clip_feature_extractor() -> dict:
    """OpenAI's and LAION's legacy ``preprocessor_config.json``: CLIP resize 224 (shortest edge), centre crop 224,
    bicubic, OpenAI CLIP mean and std."""
    return {
        "crop_size": 224,
        "do_center_crop": True,
        "do_normalize": True,
        "do_resize": True,
        "feature_extractor_type": "CLIPFeatureExtractor",
        "image_mean": _OPENAI_MEAN,
        "image_std": _OPENAI_STD,
        "resample": _BICUBIC,
        "size": 224,
    }


def _clip_image_processor(**extra) -> dict:
    """A ``CLIPImageProcessor`` file in the current layout (GIT, Kandinsky's prior): the same 224 pipeline."""
    return {
        "crop_size": {"height": 224, "width": 224},
        "do_center_crop": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": _OPENAI_MEAN,
        "image_processor_type": "CLIPImageProcessor",
        "image_std": _OPENAI_STD,
        "resample": _BICUBIC,
        "rescale_factor": 1 / 255,
        "size": {"shortest_edge": 224},
        **extra,
    }


def _blip_image_processor() -> dict:
    """BLIP's: resize to 384 × 384, bicubic, OpenAI CLIP mean and std."""
    return {
        "do_normalize": True,
        "do_resize": True,
        "image_mean": _OPENAI_MEAN,
        "image_processor_type": "BlipImageProcessor",
        "image_std": _OPENAI_STD,
        "processor_class": "BlipProcessor",
        "size": 384,
    }


def _dinov2_image_processor() -> dict:
    """DINOv2's ``BitImageProcessor``: resize 256 (shortest edge), centre crop 224, bicubic, ImageNet mean and std."""
    return {
        "crop_size": {"height": 224, "width": 224},
        "do_center_crop": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": _IMAGENET_MEAN,
        "image_processor_type": "BitImageProcessor",
        "image_std": _IMAGENET_STD,
        "resample": _BICUBIC,
        "rescale_factor": 1 / 255,
        "size": {"shortest_edge": 256},
    }


def _dinov3_image_processor() -> dict:
    """DINOv3's: ``DINOv3ViTImageProcessorFast``, resize to 224 × 224, bilinear, ImageNet mean and std."""
    return {
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": _IMAGENET_MEAN,
        "image_processor_type": "DINOv3ViTImageProcessorFast",
        "image_std": _IMAGENET_STD,
        "resample": _BILINEAR,
        "rescale_factor": 1 / 255,
        "size": {"height": 224, "width": 224},
    }


def _siglip_image_processor() -> dict:
    """SigLIP's: resize to 224 × 224, bicubic, mean and std 0.5."""
    return {
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_processor_type": "SiglipImageProcessor",
        "image_std": [0.5, 0.5, 0.5],
        "processor_class": "SiglipProcessor",
        "resample": _BICUBIC,
        "rescale_factor": 1 / 255,
        "size": {"height": 224, "width": 224},
    }


# ------------------------------------------------------------------------------------ model configs
def _tower(hidden: int, layers: int = _LAYERS, heads: int = _HEADS) -> dict:
    """A transformer tower's shrunk widths: ``hidden`` wide, MLP twice that."""
    return {
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
    }


def _vocab(shape: dict, tokenizer_size: int, key: str = "vocab_size") -> int:
    """The vocabulary of a model: ``shape[key]`` at full size, else its rehearsal tokenizer's ``tokenizer_size``."""
    return shape.get(key) or tokenizer_size


def _clip_text_config(vocab_size: int, tower: dict, projection: int, act: str = "quick_gelu"):
    """A CLIP text tower: 77 positions, OpenAI's config ids (``bos_token_id`` 0, ``eos_token_id`` 2, ``pad_token_id``
    1, which make transformers pool at the largest id, ``<|endoftext|>``, as the hub's CLIP configs do)."""
    from transformers import CLIPTextConfig

    return CLIPTextConfig(
        vocab_size=vocab_size,
        max_position_embeddings=77,
        projection_dim=projection,
        hidden_act=act,
        bos_token_id=0,
        eos_token_id=2,
        pad_token_id=1,
        **tower,
    )


def _clip_vision_config(patch_size: int, tower: dict, projection: int, act: str = "quick_gelu"):
    """A CLIP ViT at 224 px, 3 channels, patch ``patch_size``."""
    from transformers import CLIPVisionConfig

    return CLIPVisionConfig(
        image_size=224, patch_size=patch_size, num_channels=3, projection_dim=projection, hidden_act=act, **tower
    )


def _clip_model(vocab_size: int, patch_size: int, shape: dict, act: str = "quick_gelu"):
    """A ``CLIPModel`` of ``shape``'s ``text`` and ``vision`` towers and ``projection``."""
    from transformers import CLIPConfig, CLIPModel

    projection = shape["projection"]
    config = CLIPConfig(
        text_config=_clip_text_config(vocab_size, shape["text"], projection, act).to_dict(),
        vision_config=_clip_vision_config(patch_size, shape["vision"], projection, act).to_dict(),
        projection_dim=projection,
    )
    return CLIPModel(config)


def _t5_encoder(vocab_size: int, shape: dict):
    """T5 v1.1 XXL's encoder at ``shape`` (``d_model``, ``d_kv``, ``d_ff``, ``num_layers``, ``num_heads``): gated
    GELU, untied, 32 buckets up to distance 128; the vocabulary padded to a multiple of 128 as T5's 32,128."""
    from transformers import T5Config, T5EncoderModel

    config = T5Config(
        vocab_size=128 * math.ceil(_vocab(shape, vocab_size) / 128),
        d_model=shape["d_model"],
        d_kv=shape["d_kv"],
        d_ff=shape["d_ff"],
        num_layers=shape["num_layers"],
        num_decoder_layers=1,
        num_heads=shape["num_heads"],
        feed_forward_proj="gated-gelu",
        dense_act_fn="gelu_new",
        is_gated_act=True,
        relative_attention_num_buckets=32,
        relative_attention_max_distance=128,
        tie_word_embeddings=False,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    return T5EncoderModel(config)


def _autoencoder_kl(
    shape: dict,
    latent_channels: int,
    scaling_factor: float,
    shift_factor: float | None,
    *,
    quant_conv: bool,
    sample_size: int,
):
    """An ``AutoencoderKL`` of the Stable Diffusion design: 4 blocks (down-sampling × 8), mid-block attention,
    32 groups (the shrunk ones fewer), ``latent_channels`` maps scaled by ``scaling_factor`` and shifted by ``shift_factor``; the
    blocks' widths and resnets per block from ``shape`` (SD's 128, 256, 512, 512 and 2)."""
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        in_channels=3,
        out_channels=3,
        latent_channels=latent_channels,
        sample_size=sample_size,
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        block_out_channels=tuple(shape["block_out_channels"]),
        layers_per_block=shape["layers_per_block"],
        norm_num_groups=shape.get("norm_num_groups", 32),
        act_fn="silu",
        scaling_factor=scaling_factor,
        shift_factor=shift_factor,
        use_quant_conv=quant_conv,
        use_post_quant_conv=quant_conv,
        force_upcast=True,
    )


# --------------------------------------------------------------------------------- single models
def _oriented(model, vocab_size: int):
    """``model`` (a CLIP: ``get_image_features``, ``get_text_features``, ``text_projection``) with its text
    projection negated if random images and captions score below zero on average. A random CLIP's embeddings
    share one offset per tower, so every pair's cosine has that offset's sign: negative, CLIPScore clips every
    masked sample at 0, and the interval calibration meets a constant spread (seen in the rehearsal). A trained
    CLIP scores a caption above zero, as this one then does on average."""
    if next(model.parameters()).is_meta:  # full-size folders carry no weights
        return model
    generator = torch.Generator().manual_seed(0)
    size = model.config.vision_config.image_size
    with torch.no_grad():
        images = _tensor(model.get_image_features(pixel_values=torch.randn(4, 3, size, size, generator=generator)))
        ids = torch.randint(5, vocab_size, (4, 12), generator=generator)
        texts = _tensor(model.get_text_features(input_ids=ids, attention_mask=torch.ones_like(ids)))
        cosine = torch.nn.functional.normalize(images, dim=-1) @ torch.nn.functional.normalize(texts, dim=-1).T
        if cosine.mean() < 0:
            projection = model.text_projection
            last = [m for m in projection.modules() if isinstance(m, torch.nn.Linear)][-1]
            last.weight.neg_()
    return model


def _tensor(output) -> torch.Tensor:
    return output if torch.is_tensor(output) else output.pooler_output


def _build_clip(folder: Path, seed: int, shape: dict, *, patch_size: int, act: str) -> None:
    """A ``CLIPModel`` repository with its CLIP tokenizer and image processor (224 px)."""
    vocab_size = write_clip_tokenizer(folder)
    vocab = _vocab(shape, vocab_size)
    _save_model(_oriented(_clip_model(vocab, patch_size, shape, act), vocab), folder)
    _write_json(folder / "preprocessor_config.json", _clip_feature_extractor())


def _build_clip_vit_l14(folder: Path, seed: int, shape: dict) -> None:
    """``openai/clip-vit-large-patch14``: ``CLIPModel``, vision 224 px patch 14, text 77 positions, quick GELU."""
    _build_clip(folder, seed, shape, patch_size=14, act="quick_gelu")


def _build_laion_clip(folder: Path, seed: int, shape: dict, *, patch_size: int) -> None:
    """``laion/CLIP-ViT-{B-32,H-14}-laion2B-*``: the HF ``CLIPModel`` copy (GELU, as OpenCLIP's), its tokenizer
    and image processor. (The fetch takes only ``*.json``; the OpenCLIP weight files are left out.)"""
    _build_clip(folder, seed, shape, patch_size=patch_size, act="gelu")


def _build_dinov2_base(folder: Path, seed: int, shape: dict) -> None:
    """``facebook/dinov2-base``: ``Dinov2Model`` patch 14, ``image_size`` 518 (37² position embeddings,
    interpolated at 224), layer-scale 1, GELU, and its ``BitImageProcessor`` (256 → crop 224)."""
    from transformers import Dinov2Config, Dinov2Model

    config = Dinov2Config(image_size=518, patch_size=14, num_channels=3, layerscale_value=1.0, **shape)
    _save_model(Dinov2Model(config), folder)
    _write_json(folder / "preprocessor_config.json", _dinov2_image_processor())


def _build_dinov3_vitl16(folder: Path, seed: int, shape: dict) -> None:
    """``facebook/dinov3-vitl16-pretrain-lvd1689m``: ``DINOv3ViTModel`` at 224 px, patch 16, 4 register tokens,
    RoPE θ 100, no key bias; its processor file names ``DINOv3ViTImageProcessorFast`` as the hub's does."""
    from transformers import DINOv3ViTConfig, DINOv3ViTModel

    config = DINOv3ViTConfig(
        image_size=224,
        patch_size=16,
        num_channels=3,
        num_register_tokens=4,
        rope_theta=100.0,
        key_bias=False,
        layerscale_value=1.0,
        use_gated_mlp=False,
        **shape["tower"],
    )
    _save_model(DINOv3ViTModel(config), folder)
    _write_json(folder / "preprocessor_config.json", _dinov3_image_processor())


def _build_siglip_so400m(folder: Path, seed: int, shape: dict) -> None:
    """``google/siglip-so400m-patch14-224``: a whole ``SiglipModel`` (vision 224 px patch 14 with its attention-
    pooling head; text 64 positions, pad and eos ``</s>`` 1), its image processor (224², mean/std 0.5) and
    SentencePiece tokenizer files."""
    from transformers import SiglipConfig, SiglipModel, SiglipTextConfig, SiglipVisionConfig

    vocab_size = write_siglip_tokenizer(folder)
    text = SiglipTextConfig(
        vocab_size=_vocab(shape, vocab_size),
        max_position_embeddings=64,
        pad_token_id=1,
        eos_token_id=1,
        bos_token_id=None,
        projection_size=shape["projection"],
        **shape["text"],
    )
    vision = SiglipVisionConfig(image_size=224, patch_size=14, num_channels=3, **shape["vision"])
    _save_model(SiglipModel(SiglipConfig(text_config=text.to_dict(), vision_config=vision.to_dict())), folder)
    _write_json(folder / "preprocessor_config.json", _siglip_image_processor())


def _build_bert_base_uncased(folder: Path, seed: int, shape: dict) -> None:
    """``google-bert/bert-base-uncased``: ``BertForPreTraining`` weights (encoder, pooler, MLM and NSP heads, as
    the hub's), 512 positions, 2 token types, and its WordPiece tokenizer (no ``special_tokens_map.json``)."""
    from transformers import BertConfig, BertForPreTraining

    ids = write_bert_tokenizer(folder, special_map=False)
    config = BertConfig(
        vocab_size=_vocab(shape, ids["vocab_size"]),
        max_position_embeddings=512,
        type_vocab_size=2,
        pad_token_id=ids["pad"],
        **shape["tower"],
    )
    _save_model(BertForPreTraining(config), folder)


def _build_xlm_roberta(folder: Path, seed: int, shape: dict) -> None:
    """``FacebookAI/xlm-roberta-{base,large}``: ``XLMRobertaForMaskedLM`` (514 positions, 1 token type, pad 1,
    bos 0, eos 2; the tower of the multilingual CLIP's text of the same size) and its tokenizer.
    (The fetch takes only ``*.json`` and ``sentencepiece.bpe.model``.)"""
    from transformers import XLMRobertaForMaskedLM

    vocab_size = write_xlmr_tokenizer(folder)
    _save_model(XLMRobertaForMaskedLM(_xlmr_config(_vocab(shape, vocab_size), shape["tower"])), folder)


def _xlmr_config(vocab_size: int, tower: dict):
    """XLM-R's text config: 514 positions (512 + the padding offset), 1 token type, fairseq's special ids."""
    from transformers import XLMRobertaConfig

    return XLMRobertaConfig(
        vocab_size=vocab_size,
        max_position_embeddings=514,
        type_vocab_size=1,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        layer_norm_eps=1e-5,
        **tower,
    )


def _build_blip_captioner(folder: Path, seed: int, shape: dict) -> None:
    """``Salesforce/blip-image-captioning-{base,large}``: ``BlipForConditionalGeneration`` (ViT at 384 px, patch
    16; BERT decoder of 512 positions starting at ``[DEC]``, stopping at ``[SEP]`` 102, padding with ``[PAD]`` 0),
    ``BlipImageProcessor`` and the BERT tokenizer with ``[DEC]`` and ``[ENC]``."""
    from transformers import BlipConfig, BlipForConditionalGeneration, BlipTextConfig, BlipVisionConfig

    ids = write_bert_tokenizer(folder, blip=True)
    vision = BlipVisionConfig(image_size=384, patch_size=16, **shape["vision"])
    text = BlipTextConfig(
        vocab_size=_vocab(shape, ids["vocab_size"]),
        max_position_embeddings=512,
        encoder_hidden_size=shape["vision"]["hidden_size"],
        bos_token_id=ids["dec"],
        sep_token_id=ids["sep"],
        pad_token_id=ids["pad"],
        eos_token_id=2,
        **shape["text"],
    )
    config = BlipConfig(text_config=text.to_dict(), vision_config=vision.to_dict(), projection_dim=shape["projection"])
    _save_model(BlipForConditionalGeneration(config), folder)
    _write_json(folder / "preprocessor_config.json", _blip_image_processor())


def _build_git_captioner(folder: Path, seed: int, shape: dict, *, patch_size: int) -> None:
    """``microsoft/git-{base,large}-coco``: ``GitForCausalLM`` (CLIP ViT at 224 px, patch 16 or 14; text of 1024
    positions from ``[CLS]`` 101 to ``[SEP]`` 102), ``CLIPImageProcessor`` and the BERT tokenizer."""
    from transformers import GitConfig, GitForCausalLM, GitVisionConfig

    ids = write_bert_tokenizer(folder)
    vision = GitVisionConfig(image_size=224, patch_size=patch_size, num_channels=3, **shape["vision"])
    config = GitConfig(
        vision_config=vision.to_dict(),
        vocab_size=_vocab(shape, ids["vocab_size"]),
        max_position_embeddings=1024,
        bos_token_id=ids["cls"],
        eos_token_id=ids["sep"],
        pad_token_id=ids["pad"],
        **shape["text"],
    )
    _save_model(GitForCausalLM(config), folder)
    _write_json(folder / "preprocessor_config.json", _clip_image_processor(processor_class="GitProcessor"))


def _build_sd_vae_ft_mse(folder: Path, seed: int, shape: dict) -> None:
    """``stabilityai/sd-vae-ft-mse``: ``AutoencoderKL`` with 4 latent channels, × 8, scaling 0.18215, quant convs."""
    _save_model(_autoencoder_kl(shape["autoencoder"], 4, 0.18215, None, quant_conv=True, sample_size=256), folder)


# ------------------------------------------------------------------------ multilingual LAION CLIP
#: The remote code of the converted multilingual LAION CLIPs, written here (``trust_remote_code``).
XLMR_CLIP_CODE = '''"""A multilingual CLIP: an XLM-RoBERTa text tower, mean-pooled and projected, beside a CLIP vision tower.

Written for condeval's rehearsal checkpoints, with the layout of the converted OpenCLIP
``xlm-roberta-*-ViT-*`` models: ``vision_model`` a ``CLIPVisionModel``, ``text_model`` an
``XLMRobertaModel``, ``visual_projection`` on the vision tower's pooled output, ``text_projection``
one linear map or (``text_projection_type="mlp"``) OpenCLIP's two-layer GELU projection on the
attention-masked mean of the text tower's last hidden states, and ``logit_scale``.
"""

import torch
from huggingface_hub.dataclasses import strict
from torch import nn
from transformers import VisionTextDualEncoderConfig, VisionTextDualEncoderModel


@strict
class XLMRobertaCLIPConfig(VisionTextDualEncoderConfig):
    """``VisionTextDualEncoderConfig`` with the text projection's kind: ``linear`` or ``mlp``."""

    text_projection_type: str = "linear"


class XLMRobertaCLIPModel(VisionTextDualEncoderModel):
    """Text and image features of a multilingual CLIP, as tensors of width ``config.projection_dim``."""

    config_class = XLMRobertaCLIPConfig

    def __init__(self, config):
        super().__init__(config)
        if config.text_projection_type == "mlp":
            width, out = config.text_config.hidden_size, config.projection_dim
            self.text_projection = nn.Sequential(
                nn.Linear(width, (width + out) // 2, bias=False), nn.GELU(), nn.Linear((width + out) // 2, out, bias=False)
            )
        elif config.text_projection_type != "linear":
            raise ValueError(f"text_projection_type {config.text_projection_type!r}: expected linear or mlp")
        self.post_init()

    def get_text_features(self, input_ids, attention_mask=None, **kwargs):
        """(batch, projection_dim): the projected mean of the last hidden states over the attention mask."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden = self.text_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return self.text_projection((hidden * mask).sum(1) / mask.sum(1).clamp(min=1))

    def get_image_features(self, pixel_values, **kwargs):
        """(batch, projection_dim): the projected pooled output of the vision tower."""
        return self.visual_projection(self.vision_model(pixel_values=pixel_values).pooler_output)

    def forward(self, input_ids=None, pixel_values=None, attention_mask=None, **kwargs):
        """(logits_per_image, logits_per_text) of unit-normalised features scaled by exp(logit_scale)."""
        text = nn.functional.normalize(self.get_text_features(input_ids, attention_mask), dim=-1)
        image = nn.functional.normalize(self.get_image_features(pixel_values), dim=-1)
        logits_per_image = self.logit_scale.exp() * image @ text.t()
        return logits_per_image, logits_per_image.t()
'''


def _code_module(path: Path):
    """The module of a remote-code file, imported from ``path`` under a fixed name (without transformers'
    module cache, which would keep a copy per temporary folder)."""
    import importlib.util
    import sys

    name = "condeval_rehearsal_" + path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclass machinery looks the class's module up while it is built
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


def _build_multilingual_clip(
    folder: Path, seed: int, shape: dict, *, patch_size: int, text_projection_type: str
) -> None:
    """``calpt/CLIP-ViT-*-xlm-roberta-*``: a ``vision-text-dual-encoder`` config (CLIP vision at 224 px, patch
    ``patch_size``, GELU; XLM-R text of 514 positions) whose ``auto_map`` points at :data:`XLMR_CLIP_CODE`,
    loaded with ``AutoModel.from_pretrained(folder, trust_remote_code=True)``. ViT-B/32 projects text with
    OpenCLIP's MLP, ViT-H/14 with one linear map. No tokenizer or image processor: the paper config takes
    them from the XLM-R and LAION repositories."""
    (folder / _MODULE_FILE).write_text(XLMR_CLIP_CODE, encoding="utf-8")
    module = _MODULE_FILE.removesuffix(".py")
    code = _code_module(folder / _MODULE_FILE)
    config_class, model_class = code.XLMRobertaCLIPConfig, code.XLMRobertaCLIPModel
    vocab_size = _vocab(shape, len(_unigram_pieces()) + 5)  # XLM-R's: four specials before the pieces, <mask> after
    projection = shape["projection"]
    config = config_class(
        vision_config=_clip_vision_config(patch_size, shape["vision"], projection, act="gelu").to_dict(),
        text_config=_xlmr_config(vocab_size, shape["text"]).to_dict(),
        projection_dim=projection,
        text_projection_type=text_projection_type,
        auto_map={"AutoConfig": f"{module}.XLMRobertaCLIPConfig", "AutoModel": f"{module}.XLMRobertaCLIPModel"},
    )
    _save_model(_oriented(model_class(config), vocab_size), folder)


# ------------------------------------------------------------------------------------- pipelines
def _save_pipeline(
    pipeline,
    folder: Path,
    *,
    dtypes: dict[str, torch.dtype],
    shards: dict[str, int],
    tokenizers: dict[str, Callable[[Path], object]],
) -> None:
    """``model_index.json`` of ``pipeline`` and each component in its folder: models in ``dtypes[name]``
    (default float32) and ``shards[name]`` files, tokenizers by their writers, the rest ``save_pretrained``."""
    pipeline.save_config(folder)
    for name, write in tokenizers.items():
        (folder / name).mkdir()
        write(folder / name)
    for name, component in pipeline.components.items():
        if component is None:
            continue
        if isinstance(component, torch.nn.Module):
            _save_model(component, folder / name, dtypes.get(name, torch.float32), shards.get(name, 1))
        else:
            component.save_pretrained(folder / name)


def _clip_text_encoder(vocab_size: int, tower: dict, *, projection: bool, act: str):
    """SD3's / FLUX's / Kandinsky's CLIP text encoder: ``CLIPTextModelWithProjection`` (projection = the tower's
    width, as CLIP-L's 768 and bigG's 1280) or ``CLIPTextModel``."""
    from transformers import CLIPTextModel, CLIPTextModelWithProjection

    config = _clip_text_config(vocab_size, tower, tower["hidden_size"], act)
    return CLIPTextModelWithProjection(config) if projection else CLIPTextModel(config)


def _build_sd3(folder: Path, seed: int, shape: dict, *, qk_norm: str | None, transformer_dtype: torch.dtype) -> None:
    """``stabilityai/stable-diffusion-3-medium-diffusers`` / ``stable-diffusion-3.5-large``: a
    ``StableDiffusion3Pipeline`` folder.

    Kept real: ``SD3Transformer2DModel`` patch 2 on 16 latent channels, ``sample_size`` 128,
    ``pos_embed_max_size`` 192, head width 64 (SD3-M: 24 heads, SD3.5-L: 38 and ``qk_norm`` rms_norm);
    ``AutoencoderKL`` 16 channels × 8, scaling 1.5305, shift 0.0609, no quant convs; CLIP-L (quick GELU) and
    CLIP-G (GELU, pad ``!``) tokenizers of 77, T5 of 512 (``tokenizer_3``, sharded ``text_encoder_3``);
    ``FlowMatchEulerDiscreteScheduler`` shift 3.0; float16 weights (SD3.5-L's transformer bfloat16, in two
    shards). Shrunk: 1 joint block of 1 head, CLIP-L 32 and CLIP-G 48 wide (so ``pooled_projection_dim``
    80, as 768 + 1280 = 2048), T5 128 wide (= ``joint_attention_dim``, as 4096; wider than 32 + 48, as
    4096 > 2048, since SD3 pads the CLIP states to it).
    """
    from diffusers import SD3Transformer2DModel, StableDiffusion3Pipeline

    from condeval.generators.text_to_image import flow_scheduler

    clip_vocab = _vocab(shape, len(_clip_vocabulary()[0]), "clip_vocab_size")
    t5_vocab = len(_t5_pieces()) + _T5_EXTRA_IDS
    clip_l, clip_g = shape["clip_l"], shape["clip_g"]
    transformer = SD3Transformer2DModel(
        sample_size=128,
        patch_size=2,
        in_channels=16,
        out_channels=16,
        joint_attention_dim=shape["t5"]["d_model"],
        pooled_projection_dim=clip_l["hidden_size"] + clip_g["hidden_size"],
        pos_embed_max_size=192,
        qk_norm=qk_norm,
        **shape["transformer"],
    )
    pipeline = StableDiffusion3Pipeline(
        transformer=transformer,
        scheduler=flow_scheduler(3.0),
        vae=_autoencoder_kl(shape["autoencoder"], 16, 1.5305, 0.0609, quant_conv=False, sample_size=1024),
        text_encoder=_clip_text_encoder(clip_vocab, clip_l, projection=True, act="quick_gelu"),
        tokenizer=None,
        text_encoder_2=_clip_text_encoder(clip_vocab, clip_g, projection=True, act="gelu"),
        tokenizer_2=None,
        text_encoder_3=_t5_encoder(t5_vocab, shape["t5"]),
        tokenizer_3=None,
    )
    sharded = transformer_dtype != torch.float16  # SD3.5-L: its 8B transformer in two bfloat16 shards
    _save_pipeline(
        pipeline,
        folder,
        dtypes={name: torch.float16 for name in pipeline.components} | {"transformer": transformer_dtype},
        shards={"text_encoder_3": 2, "transformer": 2 if sharded else 1},
        tokenizers={
            "tokenizer": functools.partial(write_clip_tokenizer, fast_file=False),
            "tokenizer_2": functools.partial(write_clip_tokenizer, pad_token="!", fast_file=False),
            "tokenizer_3": write_t5_tokenizer,
        },
    )
    _index_components(
        folder, {"tokenizer": "CLIPTokenizer", "tokenizer_2": "CLIPTokenizer", "tokenizer_3": "T5TokenizerFast"}
    )


def _index_components(folder: Path, components: dict[str, str]) -> None:
    """Name transformers components in ``model_index.json`` as the hub's (tokenizers, image processors: the
    pipeline object was built without them, they are written by hand)."""
    index = json.loads((folder / "model_index.json").read_text())
    index.update({name: ["transformers", class_name] for name, class_name in components.items()})
    _write_json(folder / "model_index.json", index)


def _build_flux_dev(folder: Path, seed: int, shape: dict) -> None:
    """``black-forest-labs/FLUX.1-dev``: a ``FluxPipeline`` folder.

    Kept real: ``FluxTransformer2DModel`` patch 1 on 2×2-packed 16-channel latents (``in_channels`` 64),
    ``guidance_embeds``, rotary axes summing to the head width; ``AutoencoderKL`` 16 channels × 8, scaling
    0.3611, shift 0.1159; ``CLIPTextModel`` (77) for the pooled vector and ``T5EncoderModel`` (512) for the
    sequence; the scheduler's dynamic shift (base 0.5 at 256 tokens, max 1.15 at 4096, shift 3.0); bfloat16
    weights, transformer in 3 shards and T5 in 2. Shrunk: 1 double and 1 single block of 2 heads × 16 with
    rotary axes (4, 6, 6) (the real 24 × 128 with 16, 56, 56), CLIP 32 wide (``pooled_projection_dim``), T5 64
    (``joint_attention_dim``).
    """
    from diffusers import FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel

    clip_vocab = _vocab(shape, len(_clip_vocabulary()[0]), "clip_vocab_size")
    t5_vocab = len(_t5_pieces()) + _T5_EXTRA_IDS
    scheduler = FlowMatchEulerDiscreteScheduler(
        num_train_timesteps=1000,
        shift=3.0,
        use_dynamic_shifting=True,
        base_shift=0.5,
        max_shift=1.15,
        base_image_seq_len=256,
        max_image_seq_len=4096,
    )
    pipeline = FluxPipeline(
        scheduler=scheduler,
        vae=_autoencoder_kl(shape["autoencoder"], 16, 0.3611, 0.1159, quant_conv=False, sample_size=1024),
        text_encoder=_clip_text_encoder(clip_vocab, shape["clip"], projection=False, act="quick_gelu"),
        tokenizer=None,
        text_encoder_2=_t5_encoder(t5_vocab, shape["t5"]),
        tokenizer_2=None,
        transformer=FluxTransformer2DModel(
            patch_size=1,
            in_channels=4 * 16,
            joint_attention_dim=shape["t5"]["d_model"],
            pooled_projection_dim=shape["clip"]["hidden_size"],
            guidance_embeds=True,
            **shape["transformer"],
        ),
    )
    _save_pipeline(
        pipeline,
        folder,
        dtypes={name: torch.bfloat16 for name in pipeline.components},
        shards={"transformer": 3, "text_encoder_2": 2},
        tokenizers={
            "tokenizer": functools.partial(write_clip_tokenizer, fast_file=False),
            "tokenizer_2": write_t5_tokenizer,
        },
    )
    _index_components(folder, {"tokenizer": "CLIPTokenizer", "tokenizer_2": "T5TokenizerFast"})


def _build_kandinsky_prior(folder: Path, seed: int, shape: dict) -> None:
    """``kandinsky-community/kandinsky-2-2-prior``: a ``KandinskyV22PriorPipeline`` folder.

    Kept real: ``PriorTransformer`` over 77 text tokens with 4 additional embeddings, its CLIP ViT-bigG/14
    towers (text: 77 positions, GELU, pad ``!``; image: ``CLIPVisionModelWithProjection`` at 224 px, patch 14),
    ``UnCLIPScheduler`` (sample prediction, fixed_small_log, clip range 10), the 224 px ``CLIPImageProcessor``;
    float32. ``clip_mean`` 0 and ``clip_std`` 1 (the class starts ``clip_std`` at 0, which zeroes every
    embedding). The prior's ``embedding_dim`` is its CLIP text width and both projections (``shape["embedding"]``,
    1280 on the hub). Shrunk: 1 layer of 2 heads × 16, all widths 32 (image tower 48).
    """
    from diffusers import KandinskyV22PriorPipeline, PriorTransformer
    from transformers import CLIPVisionModelWithProjection

    from condeval.generators.text_to_image import kandinsky_schedulers

    embedding = shape["embedding"]
    prior = PriorTransformer(embedding_dim=embedding, num_embeddings=77, additional_embeddings=4, **shape["prior"])
    with torch.no_grad():
        prior.clip_mean.zero_()
        prior.clip_std.fill_(1.0)
    image_encoder = CLIPVisionModelWithProjection(_clip_vision_config(14, shape["vision"], embedding, act="gelu"))
    clip_vocab = _vocab(shape, len(_clip_vocabulary()[0]), "clip_vocab_size")
    pipeline = KandinskyV22PriorPipeline(
        prior=prior,
        image_encoder=image_encoder,
        tokenizer=None,
        scheduler=kandinsky_schedulers()[0],
        text_encoder=_clip_text_encoder(clip_vocab, shape["text"], projection=True, act="gelu"),
        image_processor=None,
    )
    _save_pipeline(
        pipeline,
        folder,
        dtypes={},
        shards={},
        tokenizers={"tokenizer": functools.partial(write_clip_tokenizer, pad_token="!", fast_file=False)},
    )
    _write_json(
        folder / "image_processor" / "preprocessor_config.json",
        _clip_image_processor(feature_extractor_type="CLIPFeatureExtractor"),
    )
    _index_components(folder, {"tokenizer": "CLIPTokenizer", "image_processor": "CLIPImageProcessor"})


def _build_kandinsky_decoder(folder: Path, seed: int, shape: dict) -> None:
    """``kandinsky-community/kandinsky-2-2-decoder``: a ``KandinskyV22Pipeline`` folder.

    Kept real: ``UNet2DConditionModel`` on 4 latent channels out 8 (noise and variance), image-embedding
    conditioning only (``addition_embed_type`` image, ``encoder_hid_dim_type`` image_proj), simple cross-attention
    blocks, scale-shift time conditioning, 4 levels; MoVQ ``VQModel`` 4 latent channels, 4 blocks (× 8) with
    attention in the deepest, spatial norm, 16384 codes; ``DDPMScheduler`` (linear betas 0.00085–0.012, epsilon,
    offset 1); float32. The UNet reads image embeddings ``shape["embedding"]`` wide (the prior's). Shrunk: every
    block 32 wide, one resnet per block.
    """
    from diffusers import KandinskyV22Pipeline, UNet2DConditionModel, VQModel

    from condeval.generators.text_to_image import kandinsky_schedulers

    movq = VQModel(
        in_channels=3,
        out_channels=3,
        latent_channels=4,
        vq_embed_dim=4,
        num_vq_embeddings=16384,
        sample_size=32,
        norm_type="spatial",
        norm_num_groups=shape["movq"].get("norm_num_groups", 32),
        layers_per_block=shape["movq"]["layers_per_block"],
        block_out_channels=tuple(shape["movq"]["block_out_channels"]),
        down_block_types=("DownEncoderBlock2D",) * 3 + ("AttnDownEncoderBlock2D",),
        up_block_types=("AttnUpDecoderBlock2D",) + ("UpDecoderBlock2D",) * 3,
    )
    unet_shape = shape["unet"]
    unet = UNet2DConditionModel(
        sample_size=64,
        in_channels=4,
        out_channels=8,
        block_out_channels=tuple(unet_shape["block_out_channels"]),
        layers_per_block=unet_shape["layers_per_block"],
        down_block_types=("ResnetDownsampleBlock2D",) + ("SimpleCrossAttnDownBlock2D",) * 3,
        up_block_types=("SimpleCrossAttnUpBlock2D",) * 3 + ("ResnetUpsampleBlock2D",),
        mid_block_type="UNetMidBlock2DSimpleCrossAttn",
        attention_head_dim=unet_shape["attention_head_dim"],
        cross_attention_dim=unet_shape["cross_attention_dim"],
        encoder_hid_dim=shape["embedding"],
        encoder_hid_dim_type="image_proj",
        addition_embed_type="image",
        class_embed_type=None,
        norm_num_groups=unet_shape["norm_num_groups"],
        only_cross_attention=False,
        resnet_time_scale_shift="scale_shift",
    )
    pipeline = KandinskyV22Pipeline(unet=unet, scheduler=kandinsky_schedulers()[1], movq=movq)
    _save_pipeline(pipeline, folder, dtypes={}, shards={}, tokenizers={})


# ------------------------------------------------------------------------------------------ shapes
_CLIP_SHRUNK = {"text": _tower(32), "vision": _tower(48), "projection": 32}
# 8 wide (8 groups): every job reading a 256- or 512-pixel image runs its autoencoder, 6-10x faster than 32 wide
_AUTOENCODER_SHRUNK = {"block_out_channels": (8, 8, 8, 8), "layers_per_block": 1, "norm_num_groups": 8}


def _t5_shrunk(width: int) -> dict:
    """T5's encoder shrunk to one layer of 4 heads, ``width`` wide, MLP twice that."""
    return {"d_model": width, "d_kv": width // 4, "d_ff": 2 * width, "num_layers": 1, "num_heads": 4}


#: Hub repository id -> the values its builder shrinks, at the rehearsal's size: transformer towers
#: (``hidden_size``, ``intermediate_size``, ``num_hidden_layers``, ``num_attention_heads``), projections, the
#: denoisers' and autoencoders' depths and widths; a vocabulary left out is the rehearsal tokenizer's.
#: :data:`condeval.rehearsal.full_size.FULL` holds the same keys at the checkpoints' real sizes.
REHEARSAL: dict[str, dict] = {
    "Salesforce/blip-image-captioning-base": {"vision": _tower(32), "text": _tower(32), "projection": 32},
    "Salesforce/blip-image-captioning-large": {"vision": _tower(48), "text": _tower(32), "projection": 32},
    "microsoft/git-base-coco": {"vision": _tower(32), "text": _tower(32, layers=1)},
    "microsoft/git-large-coco": {"vision": _tower(32), "text": _tower(32, layers=1)},
    "openai/clip-vit-large-patch14": _CLIP_SHRUNK,
    "laion/CLIP-ViT-B-32-laion2B-s34B-b79K": _CLIP_SHRUNK,
    "laion/CLIP-ViT-H-14-laion2B-s32B-b79K": _CLIP_SHRUNK,
    "facebook/dinov2-base": {
        "hidden_size": 32,
        "num_hidden_layers": _LAYERS,
        "num_attention_heads": _HEADS,
        "mlp_ratio": 2,
    },
    "facebook/dinov3-vitl16-pretrain-lvd1689m": {"tower": _tower(32)},
    "google/siglip-so400m-patch14-224": {"text": _tower(32), "vision": _tower(32), "projection": 32},
    "google-bert/bert-base-uncased": {"tower": _tower(32)},
    "FacebookAI/xlm-roberta-base": {"tower": _tower(32)},
    "FacebookAI/xlm-roberta-large": {"tower": _tower(48)},
    # the multilingual CLIPs: LAION's vision tower and XLM-R's text tower of the same size, their own projection
    "calpt/CLIP-ViT-B-32-xlm-roberta-base-laion5B-s13B-b90k": {
        "vision": _tower(48),
        "text": _tower(32),
        "projection": 24,
    },
    "calpt/CLIP-ViT-H-14-frozen-xlm-roberta-large-laion5B-s13B-b90k": {
        "vision": _tower(48),
        "text": _tower(48),
        "projection": 32,
    },
    "stabilityai/sd-vae-ft-mse": {"autoencoder": _AUTOENCODER_SHRUNK},
    # SD3: CLIP-L 32 and CLIP-G 48 wide (pooled projection 80, as 768 + 1280 = 2048), T5 128 wide (the joint
    # attention width, as 4096; wider than 32 + 48, as 4096 > 2048, since SD3 pads the CLIP states to it)
    "stabilityai/stable-diffusion-3-medium-diffusers": {
        "transformer": {
            "num_layers": 1,
            "num_attention_heads": 1,
            "attention_head_dim": 64,
            "caption_projection_dim": 64,
        },
        "clip_l": _tower(32),
        "clip_g": _tower(48),
        "t5": _t5_shrunk(128),
        "autoencoder": _AUTOENCODER_SHRUNK,
    },
    "stabilityai/stable-diffusion-3.5-large": {
        "transformer": {
            "num_layers": 1,
            "num_attention_heads": 1,
            "attention_head_dim": 64,
            "caption_projection_dim": 64,
        },
        "clip_l": _tower(32),
        "clip_g": _tower(48),
        "t5": _t5_shrunk(128),
        "autoencoder": _AUTOENCODER_SHRUNK,
    },
    # FLUX: rotary axes (4, 6, 6) sum to the head width 16, as (16, 56, 56) to 128
    "black-forest-labs/FLUX.1-dev": {
        "transformer": {
            "num_layers": 1,
            "num_single_layers": 1,
            "num_attention_heads": 2,
            "attention_head_dim": 16,
            "axes_dims_rope": (4, 6, 6),
        },
        "clip": _tower(32),
        "t5": _t5_shrunk(64),
        "autoencoder": _AUTOENCODER_SHRUNK,
    },
    # Kandinsky 2.2: one width (the prior's embedding, its CLIP text width and projections, the decoder's image
    # embedding), 1280 on the hub
    "kandinsky-community/kandinsky-2-2-prior": {
        "prior": {"num_attention_heads": 2, "attention_head_dim": 16, "num_layers": 1},
        "embedding": 32,
        "text": _tower(32),
        "vision": _tower(48),
    },
    "kandinsky-community/kandinsky-2-2-decoder": {
        "unet": {
            "block_out_channels": (32, 32, 32, 32),
            "layers_per_block": 1,
            "attention_head_dim": 16,
            "cross_attention_dim": 32,
            "norm_num_groups": 8,
        },
        # 32 wide: diffusers' SpatialNorm (the MoVQ decoder's) has 32 groups, whatever the config says
        "movq": {"block_out_channels": (32, 32, 32, 32), "layers_per_block": 1},
        "embedding": 32,
    },
}

SCALES = ("rehearsal", "full")


def shapes(repo: str, scale: str = "rehearsal") -> dict:
    """The values ``repo``'s builder takes at ``scale``: :data:`REHEARSAL`'s or the checkpoint's real ones
    (:data:`condeval.rehearsal.full_size.FULL`).

    Raises
    ------
    ValueError
        A scale other than :data:`SCALES`.
    """
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}; got {scale!r}")
    if scale == "rehearsal":
        return REHEARSAL[repo]
    from condeval.rehearsal.full_size import FULL

    return FULL[repo]


# ---------------------------------------------------------------------------------------- registry
_BUILDERS: dict[str, Callable[[Path, int, dict], None]] = {
    "Salesforce/blip-image-captioning-base": _build_blip_captioner,
    "Salesforce/blip-image-captioning-large": _build_blip_captioner,
    "microsoft/git-base-coco": functools.partial(_build_git_captioner, patch_size=16),
    "microsoft/git-large-coco": functools.partial(_build_git_captioner, patch_size=14),
    "openai/clip-vit-large-patch14": _build_clip_vit_l14,
    "facebook/dinov2-base": _build_dinov2_base,
    "stabilityai/stable-diffusion-3-medium-diffusers": functools.partial(
        _build_sd3, qk_norm=None, transformer_dtype=torch.float16
    ),
    "stabilityai/stable-diffusion-3.5-large": functools.partial(
        _build_sd3, qk_norm="rms_norm", transformer_dtype=torch.bfloat16
    ),
    "black-forest-labs/FLUX.1-dev": _build_flux_dev,
    "kandinsky-community/kandinsky-2-2-decoder": _build_kandinsky_decoder,
    "kandinsky-community/kandinsky-2-2-prior": _build_kandinsky_prior,
    "google-bert/bert-base-uncased": _build_bert_base_uncased,
    "calpt/CLIP-ViT-B-32-xlm-roberta-base-laion5B-s13B-b90k": functools.partial(
        _build_multilingual_clip, patch_size=32, text_projection_type="mlp"
    ),
    "FacebookAI/xlm-roberta-base": _build_xlm_roberta,
    "laion/CLIP-ViT-B-32-laion2B-s34B-b79K": functools.partial(_build_laion_clip, patch_size=32),
    "calpt/CLIP-ViT-H-14-frozen-xlm-roberta-large-laion5B-s13B-b90k": functools.partial(
        _build_multilingual_clip, patch_size=14, text_projection_type="linear"
    ),
    "FacebookAI/xlm-roberta-large": _build_xlm_roberta,
    "laion/CLIP-ViT-H-14-laion2B-s32B-b79K": functools.partial(_build_laion_clip, patch_size=14),
    "facebook/dinov3-vitl16-pretrain-lvd1689m": _build_dinov3_vitl16,
    "google/siglip-so400m-patch14-224": _build_siglip_so400m,
    "stabilityai/sd-vae-ft-mse": _build_sd_vae_ft_mse,
}


def _repo_seed(repo: str, seed: int) -> int:
    """The torch seed of ``repo``'s weights: ``seed`` mixed with the repository id, so repositories differ."""
    return (seed * 1_000_003 + zlib.crc32(repo.encode())) % 2**63


def _seeded(repo: str, build: Callable[[Path, int, dict], None]) -> Callable[..., None]:
    """``build`` at ``scale`` (:func:`shapes`), drawing its weights from torch's generator seeded by (``repo``,
    ``seed``), the caller's generator state kept, the libraries' chatter off; without ``weights``, built on the
    meta device and written without its weight files."""

    def builder(folder: Path, seed: int = 0, *, scale: str = "rehearsal", weights: bool = True) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        written = _WEIGHTS.set(weights)
        try:
            with torch.random.fork_rng(devices=[]), _quiet_libraries(), _build_device(weights):
                torch.manual_seed(_repo_seed(repo, seed))
                build(folder, seed, shapes(repo, scale))
        finally:
            _WEIGHTS.reset(written)

    builder.__doc__ = (build.func if isinstance(build, functools.partial) else build).__doc__
    builder.__name__ = builder.__qualname__ = f"build {repo}"
    return builder


def _build_device(weights: bool):
    """Where models are built: as the caller builds them with weights, else on the meta device (no memory)."""
    return contextlib.nullcontext() if weights else torch.device("meta")


#: Hub repository id -> ``builder(folder, seed, *, scale="rehearsal", weights=True)`` writing that repository's
#: files into ``folder`` (deterministic in ``seed``; see :func:`write_hub_repo`).
REPOS: dict[str, Callable[[Path, int], None]] = {repo: _seeded(repo, build) for repo, build in _BUILDERS.items()}


def write_hub_repo(repo: str, folder: Path, seed: int = 0, *, scale: str = "rehearsal", weights: bool = True) -> Path:
    """Write ``repo``'s rehearsal files into ``folder``, atomically (a temporary folder beside it, renamed).

    Parameters
    ----------
    repo : str
        A hub repository id of :data:`REPOS`.
    folder : Path
        Where the repository's files land (replaced whole if it exists).
    seed : int
        Seed of the random weights; the same seed writes the same bytes.
    scale : {"rehearsal", "full"}
        The shrunk depth and width (:data:`REHEARSAL`) or the checkpoint's real ones
        (:data:`condeval.rehearsal.full_size.FULL`; a full-size FLUX.1-dev with weights is 12B parameters
        built on the CPU and 33 GB written).
    weights : bool
        False: every file but the weights (configs, tokenizers, processors, schedulers), the models built on
        the meta device in a second; :func:`condeval.rehearsal.full_size.random_weights` loads such a folder
        with random weights made where they are used.

    Returns
    -------
    Path
        ``folder``.

    Raises
    ------
    KeyError
        ``repo`` has no builder.
    """
    if repo not in REPOS:
        raise KeyError(f"no rehearsal builder for hub repository {repo!r}; known: {sorted(REPOS)}")
    with atomic_directory(folder) as tmp:
        REPOS[repo](tmp, seed, scale=scale, weights=weights)
    return Path(folder)


@contextlib.contextmanager
def _quiet_libraries():
    """transformers' and diffusers' logging at error level and their progress bars off for the block (tiny
    configs trip size warnings, half-precision saves a float32-module warning, every save a bar)."""
    from diffusers.utils import logging as diffusers_logging
    from transformers.utils import logging as transformers_logging

    levels = transformers_logging.get_verbosity(), diffusers_logging.get_verbosity()
    bars = transformers_logging.is_progress_bar_enabled()
    transformers_logging.set_verbosity_error()
    diffusers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        transformers_logging.set_verbosity(levels[0])
        diffusers_logging.set_verbosity(levels[1])
        if bars:
            transformers_logging.enable_progress_bar()


def write_hub_repos(
    hub_root: Path, repos: Iterable[str] | None = None, seed: int = 0, *, scale: str = "rehearsal", weights: bool = True
) -> dict[str, Path]:
    """Write each repository at ``hub_root/<owner>/<name>/`` (default: every repository of :data:`REPOS`; ``scale``
    and ``weights`` as :func:`write_hub_repo`), skipping one whose folder exists. Returns ``{repo: folder}`` for
    all of them, written or found."""
    folders = {}
    for repo in REPOS if repos is None else repos:
        folder = Path(hub_root) / repo
        if folder.exists():
            log.info("%s exists, kept", folder)
        else:
            write_hub_repo(repo, folder, seed, scale=scale, weights=weights)
        folders[repo] = folder
    return folders


def catalogue_repos(catalogue: Path = Path("config/sources.yaml")) -> list[str]:
    """Every hub repository id a sources catalogue's ``hub:`` entries name, in catalogue order, once each."""
    import yaml

    sources = yaml.safe_load(Path(catalogue).read_text())["sources"]
    repos = [entry["repo"] for source in sources.values() for entry in source.get("hub", [])]
    return list(dict.fromkeys(repos))
