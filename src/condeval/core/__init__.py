"""Math and plumbing every track shares, once: conformal quantiles (:mod:`~condeval.core.conformal`),
risk control (:mod:`~condeval.core.risk`), atomic validated I/O (:mod:`~condeval.core.io`), resumable
Lightning training (:mod:`~condeval.core.training`), devices, logs, config canonicalisation, tables,
network blocks and raw-data fetching. Submodules are imported on demand: importing this package loads
nothing beyond the standard library.
"""
