"""The paper config's rehearsal: its whole DAG on data and checkpoints made here, at the real shapes.

``config/paper.yaml`` runs on the real datasets and hub checkpoints of a GPU cluster. The rehearsal
runs the same rules, on this machine, before any lab does: ``config/rehearsal.yaml`` laid over the
paper config shrinks only counts (items, samples, shards, epochs, steps), and

- :mod:`condeval.rehearsal.data` writes every dataset in its real format at its real size (COCO 2014
  JPEGs and annotation JSON, FOIL-it, FOIL-nocaps, RichHF-18K TFRecords, the judgment sets, CelebA,
  RxRx1's six-channel 512 × 512 PNG sites);
- :mod:`condeval.rehearsal.models` writes every hub repository the paper config fetches, in the hub's
  folder layout, from the real config classes at the real resolutions, channels, patch sizes, token
  lengths and dtypes, with random weights and shrunk depth and width;
- :mod:`condeval.rehearsal.serve` serves both on loopback, HTTP downloads under ``fetch.mirror`` and
  the repositories through a Hugging Face hub endpoint (``HF_ENDPOINT``), so that the paper config's
  own fetch rules bring them in.

``tools/rehearse.py`` puts the three together and runs the paper config's targets. Nothing here is
imported by the tracks.
"""
