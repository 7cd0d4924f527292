"""Moved to :mod:`condeval.generators.captioner_training`; this re-export is kept for one release."""

from condeval.generators.captioner_training import CaptionerModule, VisionInit, train_captioner  # noqa: F401

__all__ = ["CaptionerModule", "VisionInit", "train_captioner"]
