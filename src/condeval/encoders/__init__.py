"""Feature extractors shared by every track, each loaded from a saved folder with ``from_pretrained``:
CLIP and BERT (:mod:`~condeval.encoders.features`), DINO (:mod:`~condeval.encoders.dino`), the trust
score's DINOv3 and SigLIP patch encoders (:mod:`~condeval.encoders.patch_encoder`), and feature shards
with their provenance (:mod:`~condeval.encoders.shards`, readable without torch). Submodules are imported
on demand: importing this package loads neither torch nor transformers.
"""
