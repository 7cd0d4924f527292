"""Moved to :mod:`condeval.generators.captioners`; this re-export is kept for one release."""

from condeval.generators.captioners import ARCHITECTURES, Captioner, _config_class, _model_class, captioner_image_processor, tiny_captioner_config  # noqa: F401

__all__ = ["ARCHITECTURES", "tiny_captioner_config", "captioner_image_processor", "Captioner"]
