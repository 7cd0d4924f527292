"""Generators that the tracks judge: models that produce an output from a condition.

:mod:`condeval.generators.captioners` holds the image-to-text captioners (BLIP, GIT) and
:mod:`condeval.generators.captioner_training` trains the mini-world's tiny ones (Lightning, kept
apart so that sampling never imports it). Text-to-image generators (diffusers pipelines) join
here. Submodules are imported on demand: importing this package loads neither torch nor
transformers.
"""
