"""Encoders behind one interface, and L2-normalised feature shards with their provenance.

:class:`ClipEncoder` and :class:`BertEncoder` load a saved folder with ``from_pretrained(path)``:
the tiny models trained here, or ``openai/clip-vit-large-patch14`` and ``bert-base-uncased`` from
a local directory on a cluster. Every feature they return is L2-normalised (rows of unit norm),
the reading every track uses.

Feature shards (:mod:`condeval.encoders.shards`, re-exported here) hold their features with the
encoder's name and weights hash.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from condeval.encoders.inputs import (
    ArrayImages,
    ResizedImage,
    batches,
    image_list,
    rgb_images,
    text_list,
    unit_feature_rows,
)
from condeval.encoders.shards import (
    FeatureShardError,
    check_one_encoder,
    encode_feature_shard,
    model_identity,
    read_feature_shards,
    write_feature_shard,
)

__all__ = [
    "ClipEncoder",
    "BertEncoder",
    "image_feature_encoder",
    "FeatureShardError",
    "model_identity",
    "write_feature_shard",
    "encode_feature_shard",
    "read_feature_shards",
    "check_one_encoder",
    "image_encoder",
    "clip_vision_tower",
    "ResizedImage",
]


class ClipEncoder(ArrayImages):
    """A ``CLIPModel`` with its tokenizer and image processor, loaded from one folder.

    Parameters
    ----------
    path : path-like
        Folder holding ``config.json``, weights, tokenizer and ``preprocessor_config.json``.
    device : str, optional
        Torch device (default CPU).
    max_length : int, optional
        Token cap (default: the tokenizer's ``model_max_length`` or the text tower's positions, the
        smaller: XLM-R has 514 positions for 512 tokens).
    tokenizer, image_processor : path-like, optional
        Folders to read them from instead of ``path``.
    trust_remote_code : bool
        For the converted multilingual LAION checkpoints (an XLM-R text tower, ``calpt/CLIP-ViT-*-xlm-roberta-*``),
        which transformers has no class for: the checkpoint is the folder's own code
        (``AutoModel.from_pretrained(..., trust_remote_code=True)``), loaded once; its text tower gives the
        caption features and its CLIP vision tower (:func:`clip_vision_tower`) the image features, as
        the CLIPScore risk-control code reads them. Runs the folder's code: only for checkpoints you trust.
    dtype : {"auto", "bfloat16", "float16", "float32"}, optional
        The model's precision (:func:`condeval.core.devices.torch_dtype`: bfloat16 on a GPU by default);
        features are returned in float32 whatever it is.

    Attributes
    ----------
    model : torch.nn.Module
        The ``CLIPModel`` or the remote-code model: ``get_text_features`` and ``logit_scale``.
    vision_tower : CLIPVisionTransformer
        Embeddings, encoder and layer norms of the image tower (attention-mask sampling masks inside it).
    visual_projection : torch.nn.Linear

    Examples
    --------
    >>> import tempfile, numpy as np, torch
    >>> from PIL import Image
    >>> from transformers import CLIPModel
    >>> from condeval.encoders.clip import ClipSizes, clip_image_processor, tiny_clip_config
    >>> from condeval.encoders.features import ClipEncoder
    >>> from condeval.encoders.tokenizer import build_word_tokenizer
    >>> tokenizer = build_word_tokenizer(["a", "red", "blue", "star", "ring"])
    >>> _ = torch.manual_seed(0)
    >>> sizes = ClipSizes(vision_width=16, vision_layers=1, text_width=16, text_layers=1, heads=2, projection_dim=8)
    >>> config = tiny_clip_config(tokenizer, 16, sizes)
    >>> with tempfile.TemporaryDirectory() as folder:       # a random tiny CLIP saved as a checkpoint is
    ...     for part in (CLIPModel(config), tokenizer, clip_image_processor(16)):
    ...         _ = part.save_pretrained(folder)
    ...     encoder = ClipEncoder(folder)                    # loaded like openai/clip-vit-large-patch14
    >>> texts = encoder.text_features(["a red star", "a blue ring"])
    >>> images = encoder.image_features([Image.new("RGB", (16, 16), "red")])
    >>> texts.shape, images.shape
    ((2, 8), (1, 8))
    >>> np.linalg.norm(texts, axis=1).round(3).tolist()       # every feature is L2-normalised
    [1.0, 1.0]
    """

    def __init__(
        self,
        path: str | os.PathLike,
        device: str | None = None,
        max_length: int | None = None,
        *,
        tokenizer: str | os.PathLike | None = None,
        image_processor: str | os.PathLike | None = None,
        trust_remote_code: bool = False,
        dtype: str | None = None,
    ):
        from transformers import AutoImageProcessor, AutoModel, AutoTokenizer, CLIPModel

        from condeval.core.devices import check_device, log_precision, torch_dtype

        self.path = Path(path)
        self.device = check_device(device or "cpu")
        self.dtype = torch_dtype(dtype, self.device)
        loaded = (
            AutoModel.from_pretrained(str(path), trust_remote_code=True, dtype=self.dtype)
            if trust_remote_code
            else CLIPModel.from_pretrained(str(path), dtype=self.dtype)
        )
        self.model = loaded.eval().to(self.device)
        log_precision(self.model, self.path)
        self.vision_tower = clip_vision_tower(self.model, self.path)
        self.visual_projection = self.model.visual_projection
        self.tokenizer = AutoTokenizer.from_pretrained(str(tokenizer or path))
        self.image_processor = AutoImageProcessor.from_pretrained(str(image_processor or path))
        self.max_length = max_length or min(
            text_positions(self.model.config.text_config), self.tokenizer.model_max_length
        )

    def text_embeddings(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Projected, unnormalised caption embeddings of token ids, float32 (whichever tower holds the text)."""
        out = self.model.get_text_features(input_ids=input_ids, attention_mask=attention_mask)
        return (
            out if isinstance(out, torch.Tensor) else out.pooler_output
        ).float()  # remote code may return the tensor

    def image_embeddings(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Projected, unnormalised image embeddings of processed pixels, float32."""
        pooled = self.vision_tower(pixel_values=pixel_values.to(self.device, self.dtype)).pooler_output
        return self.visual_projection(pooled).float()

    @property
    def identity(self) -> dict:
        return model_identity(self.path)

    @property
    def preprocessing(self) -> dict:
        return {"image_processor": self.image_processor.to_dict(), "max_length": self.max_length, "normalisation": "L2"}

    @torch.no_grad()
    def image_features(self, images: Sequence[Image.Image | str], batch_size: int = 128) -> np.ndarray:
        """Unit-norm image embeddings (n, projection_dim); ``images`` are PIL images or file paths."""
        chunks = []
        for batch in batches(image_list(images), batch_size, "CLIP images"):
            pixels = self.image_processor(rgb_images(batch), return_tensors="pt")["pixel_values"]
            chunks.append(unit_feature_rows(self.image_embeddings(pixels)))
        return np.concatenate(chunks) if chunks else np.zeros((0, self.model.config.projection_dim), np.float32)

    #: What :meth:`encode` returns, as feature shards record it.
    feature = "projected image embedding"

    @property
    def width(self) -> int:
        return int(self.model.config.projection_dim)

    @torch.no_grad()
    def text_features(self, texts: Sequence[str], batch_size: int = 256) -> np.ndarray:
        """Unit-norm caption embeddings (n, projection_dim)."""
        chunks = []
        for batch in batches(text_list(texts), batch_size, "CLIP texts"):
            tokens = self.tokenizer(
                list(batch), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
            ).to(self.device)
            chunks.append(unit_feature_rows(self.text_embeddings(tokens["input_ids"], tokens["attention_mask"])))
        return np.concatenate(chunks) if chunks else np.zeros((0, self.model.config.projection_dim), np.float32)


def clip_vision_tower(model, path: str | os.PathLike = "the model"):
    """The CLIP vision tower of a CLIP-like model (its embeddings, pre-layer-norm, encoder and post-layer-norm):
    ``model.vision_model`` as ``CLIPModel`` and a ``VisionTextDualEncoderModel`` (the converted multilingual
    LAION checkpoints) hold it, or inside it where the model nests one more ``vision_model`` (older code).

    Raises
    ------
    TypeError
        Naming ``path``, when the model has no such tower and ``visual_projection`` (attention-mask sampling
        masks inside the tower's layers).
    """
    vision = getattr(model, "vision_model", None)
    vision = getattr(vision, "vision_model", vision)
    if not all(hasattr(vision, part) for part in _CLIP_TOWER_PARTS) or not hasattr(model, "visual_projection"):
        raise TypeError(
            f"{path}: no CLIP vision tower (vision_model: {type(vision).__name__}) and "
            "visual_projection to read images with"
        )
    return vision


_CLIP_TOWER_PARTS = ("embeddings", "pre_layrnorm", "encoder", "post_layernorm")


def text_positions(text_config) -> int:
    """Tokens a text tower reads: its position table, less RoBERTa's and XLM-R's offset (their positions start
    after the padding id: 514 positions hold 512 tokens)."""
    positions = getattr(text_config, "max_position_embeddings", 77)
    if getattr(text_config, "model_type", None) in ("roberta", "xlm-roberta"):
        positions -= text_config.pad_token_id + 1
    return positions


class BertEncoder:
    """A ``BertModel`` whose caption feature is the [CLS] hidden state (the paper's BERT-SIM).

    Captions are truncated at ``max_length`` tokens (the paper: 50), or at the model's
    ``max_position_embeddings`` where it has fewer positions.

    Examples
    --------
    >>> import tempfile, numpy as np, torch
    >>> from transformers import BertModel
    >>> from condeval.encoders.bert import tiny_bert_config
    >>> from condeval.encoders.features import BertEncoder
    >>> from condeval.encoders.tokenizer import build_word_tokenizer
    >>> tokenizer = build_word_tokenizer(["a", "red", "blue", "star", "ring"])
    >>> _ = torch.manual_seed(0)
    >>> bert = BertModel(tiny_bert_config(tokenizer, width=16, layers=1, heads=2, max_length=12),
    ...                  add_pooling_layer=False)
    >>> with tempfile.TemporaryDirectory() as folder:       # a random tiny BERT saved as a checkpoint is
    ...     bert.save_pretrained(folder)
    ...     _ = tokenizer.save_pretrained(folder)
    ...     encoder = BertEncoder(folder)                    # loaded like bert-base-uncased
    >>> encoder.max_length                                   # the paper's 50, capped at the model's 12 positions
    12
    >>> features = encoder.text_features(["a red star", "a blue ring", "a red star"])
    >>> np.linalg.norm(features, axis=1).round(3).tolist(), bool(np.allclose(features[0], features[2]))
    ([1.0, 1.0, 1.0], True)
    """

    def __init__(
        self, path: str | os.PathLike, device: str | None = None, max_length: int = 50, dtype: str | None = None
    ):
        from transformers import AutoTokenizer, BertModel

        from condeval.core.devices import check_device, log_precision, torch_dtype

        self.path = Path(path)
        self.device = check_device(device or "cpu")
        self.dtype = torch_dtype(dtype, self.device)
        model = BertModel.from_pretrained(str(path), add_pooling_layer=False, dtype=self.dtype)
        self.model = model.eval().to(self.device)
        log_precision(self.model, self.path)
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.max_length = min(max_length, self.model.config.max_position_embeddings)

    @property
    def identity(self) -> dict:
        return model_identity(self.path)

    @property
    def preprocessing(self) -> dict:
        return {"max_length": self.max_length, "pooling": "[CLS] last hidden state", "normalisation": "L2"}

    @torch.no_grad()
    def text_features(self, texts: Sequence[str], batch_size: int = 256) -> np.ndarray:
        """Unit-norm [CLS] features (n, hidden_size)."""
        chunks = []
        for batch in batches(text_list(texts), batch_size, "BERT texts"):
            tokens = self.tokenizer(
                list(batch), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
            ).to(self.device)
            chunks.append(unit_feature_rows(self.model(**tokens).last_hidden_state[:, 0]))
        return np.concatenate(chunks) if chunks else np.zeros((0, self.model.config.hidden_size), np.float32)


def image_feature_encoder(
    path: str | os.PathLike, device: str | None = None, dtype: str | None = None, image_size: int | None = None
):
    """The encoder of a saved folder by its ``model_type``: :class:`ClipEncoder` for a CLIP, else
    :class:`~condeval.encoders.patch_encoder.PatchEncoder` (DINOv3, SigLIP; ``image_size`` overrides its
    processor's); both ``encode`` uint8 images (N, C, H, W) into rows, in precision ``dtype``."""
    from transformers import AutoConfig

    if AutoConfig.from_pretrained(str(path)).model_type == "clip":
        if image_size is not None:
            raise ValueError(f"{path}: image_size is for DINOv3 and SigLIP folders; a CLIP reads its processor's size")
        return ClipEncoder(path, device=device, dtype=dtype)
    from condeval.encoders.patch_encoder import PatchEncoder

    return PatchEncoder(path, device=device, dtype=dtype, image_size=image_size)


def image_encoder(name: str, path: str | os.PathLike, device: str | None = None, dtype: str | None = None):
    """The image encoder ``name`` (``clip``: :class:`ClipEncoder`; ``dino``:
    :class:`condeval.encoders.dino.DinoEncoder`) loaded from ``path`` in precision ``dtype``."""
    if name == "clip":
        return ClipEncoder(path, device=device, dtype=dtype)
    if name == "dino":
        from condeval.encoders.dino import DinoEncoder

        return DinoEncoder(path, device=device, dtype=dtype)
    raise ValueError(f"no image encoder {name!r}; expected 'clip' or 'dino'")
