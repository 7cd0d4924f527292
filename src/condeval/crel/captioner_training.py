"""Moved to :mod:`condeval.generators.captioner_training`; this re-export is kept for one release."""

from condeval.generators.captioner_training import CaptionerModule, train_captioner  # noqa: F401

__all__ = ["CaptionerModule", "train_captioner"]
