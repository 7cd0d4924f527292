"""Encoders behind one interface, and L2-normalised feature shards with their provenance.

:class:`ClipEncoder` and :class:`BertEncoder` load a saved folder with ``from_pretrained(path)``:
the tiny models trained here, or ``openai/clip-vit-large-patch14`` and ``bert-base-uncased`` from
a local directory on a cluster. Every feature they return is L2-normalised (rows of unit norm),
the reading every track uses.

A feature shard is a safetensors file holding ``features`` (n, d) float32 and ``ids`` (n,) int64,
whose metadata records the encoder's name, content hash, kind of input and preprocessing, so a
shard can always be traced to the exact weights that made it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from condeval.core.io import atomic_path, files_sha256
from condeval.core.logs import progress
from condeval.metrics import unit_rows

__all__ = ["ClipEncoder", "BertEncoder", "image_feature_encoder", "FeatureShardError", "model_identity", "write_feature_shard", "read_feature_shards",
           "check_one_encoder", "image_encoder"]  # fmt: skip


class FeatureShardError(ValueError):
    """A feature shard is unreadable, incomplete, non-finite, or made by another encoder (names the file)."""


def model_identity(path: str | os.PathLike) -> dict:
    """Name, revision (a hub snapshot's commit, if the folder is one) and weights hash of a saved model."""
    path = Path(path)
    weights = sorted(path.glob("*.safetensors")) or sorted(path.glob("*.bin"))
    if not weights:
        raise FileNotFoundError(f"{path}: no *.safetensors or *.bin weights file")
    config = json.loads((path / "config.json").read_text()) if (path / "config.json").exists() else {}
    revision = path.name if path.parent.name == "snapshots" else None
    return {
        "name": config.get("_name_or_path") or path.name,
        "path": str(path),
        "revision": revision,
        "weights_sha256": files_sha256(weights),
    }


def _batches(items: Sequence, batch_size: int, desc: str):
    for start in progress(range(0, len(items), batch_size), desc=desc, unit="batch"):
        yield items[start : start + batch_size]


def _unit_rows(features: torch.Tensor) -> np.ndarray:
    return unit_rows(features.float()).cpu().numpy().astype(np.float32)


class ClipEncoder:
    """A ``CLIPModel`` with its tokenizer and image processor, loaded from one folder.

    Parameters
    ----------
    path : path-like
        Folder holding ``config.json``, weights, tokenizer and ``preprocessor_config.json``.
    device : str, optional
        Torch device (default CPU).
    max_length : int, optional
        Token cap (default: the text tower's position embeddings).
    tokenizer, image_processor : path-like, optional
        Folders to read them from instead of ``path``.
    trust_remote_code : bool
        For the converted multilingual LAION checkpoints (an XLM-R text tower, ``calpt/CLIP-ViT-*-xlm-roberta-*``),
        which transformers has no class for: their text tower is the checkpoint's own code
        (``AutoModel.from_pretrained(..., trust_remote_code=True)``), their vision tower is read
        into a ``CLIPModel``, as the CLIPScore risk-control code loads them. Runs the folder's code:
        only for checkpoints you trust.
    """

    def __init__(self, path: str | os.PathLike, device: str | None = None, max_length: int | None = None, *,
                 tokenizer: str | os.PathLike | None = None, image_processor: str | os.PathLike | None = None,
                 trust_remote_code: bool = False):  # fmt: skip
        from transformers import AutoImageProcessor, AutoModel, AutoTokenizer, CLIPModel

        self.path = Path(path)
        self.device = torch.device(device or "cpu")
        self.model = CLIPModel.from_pretrained(str(path)).eval().to(self.device)
        # The tower get_text_features is called on: the CLIPModel itself, or the remote-code model.
        self.text_model = (
            AutoModel.from_pretrained(str(path), trust_remote_code=True).eval().to(self.device)
            if trust_remote_code
            else self.model
        )
        self.tokenizer = AutoTokenizer.from_pretrained(str(tokenizer or path))
        self.image_processor = AutoImageProcessor.from_pretrained(str(image_processor or path))
        self.max_length = max_length or getattr(self.model.config.text_config, "max_position_embeddings", 77)

    def text_embeddings(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Projected, unnormalised caption embeddings of token ids (whichever tower holds the text)."""
        out = self.text_model.get_text_features(input_ids=input_ids, attention_mask=attention_mask)
        return out if isinstance(out, torch.Tensor) else out.pooler_output  # remote code may return the tensor

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
        for batch in _batches(list(images), batch_size, "CLIP images"):
            pil = [
                Image.open(i).convert("RGB") if isinstance(i, (str, os.PathLike)) else i.convert("RGB") for i in batch
            ]
            pixels = self.image_processor(pil, return_tensors="pt")["pixel_values"].to(self.device)
            chunks.append(_unit_rows(self.model.get_image_features(pixel_values=pixels).pooler_output))
        return np.concatenate(chunks) if chunks else np.zeros((0, self.model.config.projection_dim), np.float32)

    #: What :meth:`encode` returns, as feature shards record it.
    feature = "projected image embedding"

    @property
    def width(self) -> int:
        return int(self.model.config.projection_dim)

    def encode(self, images, batch_size: int = 128) -> np.ndarray:
        """Unit-norm image embeddings of uint8 RGB images (N, 3, H, W), the array layout of
        :meth:`condeval.encoders.patch_encoder.PatchEncoder.encode`."""
        images = np.asarray(images)
        if images.ndim != 4 or images.shape[1] != 3 or images.dtype != np.uint8:
            raise ValueError(
                f"{self.path}: CLIP encodes uint8 RGB images (N, 3, H, W); got {images.dtype} {images.shape}"
            )
        return self.image_features([Image.fromarray(image.transpose(1, 2, 0)) for image in images], batch_size)

    @torch.no_grad()
    def text_features(self, texts: Sequence[str], batch_size: int = 256) -> np.ndarray:
        """Unit-norm caption embeddings (n, projection_dim)."""
        chunks = []
        for batch in _batches(list(texts), batch_size, "CLIP texts"):
            tokens = self.tokenizer(
                list(batch), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
            ).to(self.device)
            chunks.append(_unit_rows(self.text_embeddings(tokens["input_ids"], tokens["attention_mask"])))
        return np.concatenate(chunks) if chunks else np.zeros((0, self.model.config.projection_dim), np.float32)


class BertEncoder:
    """A ``BertModel`` whose caption feature is the [CLS] hidden state (the paper's BERT-SIM).

    Captions are truncated at ``max_length`` tokens (the paper: 50).
    """

    def __init__(self, path: str | os.PathLike, device: str | None = None, max_length: int = 50):
        from transformers import AutoTokenizer, BertModel

        self.path = Path(path)
        self.device = torch.device(device or "cpu")
        self.model = BertModel.from_pretrained(str(path), add_pooling_layer=False).eval().to(self.device)
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.max_length = max_length

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
        for batch in _batches(list(texts), batch_size, "BERT texts"):
            tokens = self.tokenizer(
                list(batch), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
            ).to(self.device)
            chunks.append(_unit_rows(self.model(**tokens).last_hidden_state[:, 0]))
        return np.concatenate(chunks) if chunks else np.zeros((0, self.model.config.hidden_size), np.float32)


def image_feature_encoder(path: str | os.PathLike, device: str | None = None):
    """The encoder of a saved folder by its ``model_type``: :class:`ClipEncoder` for a CLIP, else
    :class:`~condeval.encoders.patch_encoder.PatchEncoder` (DINOv3, SigLIP); both ``encode`` uint8
    images (N, C, H, W) into unit rows."""
    from transformers import AutoConfig

    if AutoConfig.from_pretrained(str(path)).model_type == "clip":
        return ClipEncoder(path, device=device)
    from condeval.encoders.patch_encoder import PatchEncoder

    return PatchEncoder(path, device=device)


def image_encoder(name: str, path: str | os.PathLike, device: str | None = None):
    """The image encoder ``name`` (``clip``: :class:`ClipEncoder`; ``dino``:
    :class:`condeval.encoders.dino.DinoEncoder`) loaded from ``path``."""
    if name == "clip":
        return ClipEncoder(path, device=device)
    if name == "dino":
        from condeval.encoders.dino import DinoEncoder

        return DinoEncoder(path, device=device)
    raise ValueError(f"no image encoder {name!r}; expected 'clip' or 'dino'")


def write_feature_shard(path: str | os.PathLike, ids: np.ndarray, features: np.ndarray, metadata: dict) -> None:
    """Write one shard atomically; ``metadata`` (JSON-serialisable) goes in the safetensors header."""
    ids, features = np.asarray(ids, dtype=np.int64), np.ascontiguousarray(features, dtype=np.float32)
    if features.ndim != 2 or ids.shape != (features.shape[0],):
        raise ValueError(f"{path}: need features (n, d) and ids (n,); got {features.shape} and {ids.shape}")
    if not np.isfinite(features).all():
        raise ValueError(f"{path}: features hold NaN or inf (row {int(np.argwhere(~np.isfinite(features))[0, 0])})")
    header = {key: json.dumps(value, sort_keys=True) for key, value in metadata.items()}
    with atomic_path(path, suffix=".safetensors") as tmp:
        save_file({"ids": ids, "features": features}, str(tmp), metadata=header)


def _read_shard(path: Path) -> tuple[dict, np.ndarray, np.ndarray]:
    """One shard's metadata, ids and features, each checked; :class:`FeatureShardError` names ``path``."""
    from safetensors import SafetensorError

    try:
        with safe_open(str(path), framework="numpy") as handle:
            meta = {k: json.loads(v) for k, v in (handle.metadata() or {}).items()}
        arrays = load_file(str(path))
    except FileNotFoundError:
        raise FeatureShardError(f"{path}: feature shard not found") from None
    except (SafetensorError, json.JSONDecodeError, OSError) as error:
        raise FeatureShardError(f"{path}: not a readable feature shard, truncated or corrupt ({error})") from None
    for key in ("ids", "features"):
        if key not in arrays:
            raise FeatureShardError(f"{path}: the shard has no '{key}' array (has {sorted(arrays)})")
    ids, features = arrays["ids"], arrays["features"]
    if features.ndim != 2 or ids.shape != (features.shape[0],):
        raise FeatureShardError(f"{path}: need features (n, d) and ids (n,); found {features.shape} and {ids.shape}")
    if not np.isfinite(features).all():
        raise FeatureShardError(
            f"{path}: features hold NaN or inf (row {int(np.argwhere(~np.isfinite(features))[0, 0])})"
        )
    if not isinstance(meta.get("encoder"), dict) or not meta["encoder"].get("weights_sha256"):
        raise FeatureShardError(
            f"{path}: the shard's metadata names no encoder weights hash ('encoder.weights_sha256')"
        )
    return meta, ids, features


def _expected_hash(encoder: str | os.PathLike | dict) -> str:
    """The weights hash of an encoder given as its identity or as a saved folder (or its manifest)."""
    if isinstance(encoder, dict):
        return encoder["weights_sha256"]
    from condeval.core.io import saved_folder

    return model_identity(saved_folder(encoder, verify=False))["weights_sha256"]


def read_feature_shards(
    paths: Sequence[str | os.PathLike], encoder: str | os.PathLike | dict | None = None
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Concatenate shards in order: ids (n,), features (n, d), and the first shard's metadata.

    Parameters
    ----------
    paths : sequence of path-like
        The shards, in order.
    encoder : path-like or dict, optional
        The encoder the reading rule uses (its saved folder, ``<folder>.sha256`` manifest, or
        :func:`model_identity`); every shard's ``encoder.weights_sha256`` must equal its hash.

    Raises
    ------
    FeatureShardError
        Naming the shard: unreadable or truncated, no ``ids`` or ``features``, NaN or inf, no
        encoder hash, made by another encoder than the first shard or than ``encoder``, or of
        another width.
    """
    if not paths:
        raise FeatureShardError("no feature shards given")
    expected = _expected_hash(encoder) if encoder is not None else None
    ids, features, first = [], [], None
    for path in map(Path, paths):
        meta, shard_ids, shard_features = _read_shard(path)
        made_by = meta["encoder"]["weights_sha256"]
        if expected is not None and made_by != expected:
            raise FeatureShardError(
                f"{path}: made by encoder weights {made_by[:12]}, but this rule uses {expected[:12]} ({encoder}); rerun the features"
            )
        if first is None:
            first = meta
        elif made_by != first["encoder"]["weights_sha256"]:
            raise FeatureShardError(
                f"{path}: made by another encoder than {paths[0]} ({meta['encoder']} vs {first['encoder']})"
            )
        if features and shard_features.shape[1] != features[0].shape[1]:
            raise FeatureShardError(
                f"{path}: feature width {shard_features.shape[1]} differs from {features[0].shape[1]}"
            )
        ids.append(shard_ids)
        features.append(shard_features)
    return np.concatenate(ids), np.concatenate(features), first


def check_one_encoder(metadata: dict[str, dict]) -> None:
    """Raise unless every named source's metadata (from :func:`read_feature_shards`) has one encoder.

    Image and caption features compared by a similarity must come from the same CLIP: features of
    two encoders live in unrelated spaces and their cosine means nothing.
    """
    hashes = {name: meta["encoder"]["weights_sha256"] for name, meta in metadata.items()}
    if len(set(hashes.values())) > 1:
        listing = ", ".join(f"{name}: {digest[:12]}" for name, digest in hashes.items())
        raise FeatureShardError(f"feature sources must come from one encoder, but their weights differ ({listing})")
