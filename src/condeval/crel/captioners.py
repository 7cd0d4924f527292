"""Moved to :mod:`condeval.generators.captioners`; this re-export is kept for one release."""

from condeval.generators.captioners import (  # noqa: F401
    ARCHITECTURES,
    Captioner,
    _config_class,
    _model_class,
    captioner_image_processor,
    tiny_captioner_config,
)

__all__ = ["ARCHITECTURES", "tiny_captioner_config", "captioner_image_processor", "Captioner"]
