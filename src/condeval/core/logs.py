"""Logging set-up for workflow steps: everything a step prints goes to its ``log:`` file."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

__all__ = ["log_to_file"]


def log_to_file(path: str | Path, level: int = logging.INFO) -> logging.Logger:
    """Send stderr, stdout and the ``condeval`` logger to ``path``.

    Progress bars (tqdm, Lightning) write to stderr and so land in the log too.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    stream = open(path, "a", buffering=1)
    # Redirect the file descriptors too, so handlers bound to the original streams at import
    # time (Lightning's, tqdm's) and C-level output also reach the log.
    for fd in (1, 2):
        os.dup2(stream.fileno(), fd)
    sys.stderr = stream
    sys.stdout = stream
    logging.basicConfig(
        stream=stream, level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True
    )
    return logging.getLogger("condeval")
