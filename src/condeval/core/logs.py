"""Logging set-up for workflow steps: everything a step prints goes to its ``log:`` file."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

__all__ = ["log_to_file", "progress"]

#: Seconds between two progress lines in a log file (a terminal redraws its bar as usual).
LOG_INTERVAL_S = 30.0


def log_to_file(path: str | Path, level: int = logging.INFO) -> logging.Logger:
    """Send stderr, stdout and the ``condeval`` logger to ``path``.

    Progress bars (tqdm, Lightning) write to stderr and so land in the log too; tqdm bars made
    by :func:`progress` write one line per :data:`LOG_INTERVAL_S` seconds there.
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


class _LineWriter:
    """A file for tqdm that turns each redraw (``\\r`` + status) into one line of ``stream``."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> None:
        line = text.replace("\r", "").strip()
        if line:
            self.stream.write(line + "\n")

    def flush(self) -> None:
        self.stream.flush()


def progress(
    iterable=None,
    *,
    desc: str,
    unit: str = "it",
    total: int | None = None,
    enabled: bool = True,
    interval: float | None = None,
):
    """A tqdm progress bar that also shows when stderr is a job's log file.

    tqdm's ``disable=None`` hides a bar whenever stderr is not a terminal, which is always the
    case under Snakemake (:func:`log_to_file` sends stderr to the log). Here a terminal gets the
    usual bar and a file gets one plain line per ``interval`` seconds, plus the first and last.

    Parameters
    ----------
    iterable : iterable, optional
        What to iterate over; None for a bar updated by hand (``bar.update(n)``).
    desc, unit : str
        Label of the bar and of one step (e.g. ``"batch"``).
    total : int, optional
        Number of steps (default ``len(iterable)`` where it has one).
    enabled : bool, default True
        False returns a silent bar (the caller's ``progress=False``).
    interval : float, optional
        Seconds between lines in a log file (default :data:`LOG_INTERVAL_S`).

    Returns
    -------
    tqdm.tqdm
    """
    from tqdm.auto import tqdm

    stream = sys.stderr
    if not enabled:
        return tqdm(iterable, desc=desc, unit=unit, total=total, disable=True)
    if stream.isatty():
        return tqdm(iterable, desc=desc, unit=unit, total=total, file=stream, disable=False)
    interval = LOG_INTERVAL_S if interval is None else interval
    return tqdm(
        iterable,
        desc=desc,
        unit=unit,
        total=total,
        file=_LineWriter(stream),
        disable=False,
        mininterval=interval,
        ascii=True,
        ncols=100,
    )
