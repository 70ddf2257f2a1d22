"""Progress of long command-line runs: a bar on a terminal, one summary line elsewhere.

A progress bar redraws itself with carriage returns, several times a second. On a terminal
that is what a user wants; in a log file, a pipe or CI output it is hundreds of ``\\r``
fragments. Every command that shows progress (``glove-ros demo``, ``glove-ros bench llm``)
goes through :class:`Progress`, so they all decide the same way: a bar (tqdm, on stderr)
only when stderr is a terminal or ``--progress`` asks for one, otherwise nothing while
the run goes and one summary line when it ends. ``--no-progress`` turns the bar off on a
terminal. This module is separate from the commands because the decision is theirs in
common, and it imports tqdm only when a bar is actually drawn.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import Any, TextIO

__all__ = ["Progress", "add_progress_argument", "say", "wants_bar"]

_lock = threading.Lock()
_open_bars = 0  # bars drawn right now: lines printed meanwhile go above them (tqdm.write)


def add_progress_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--progress`` / ``--no-progress`` (default: a bar only on a terminal)."""
    parser.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=None,
        help="draw a progress bar on stderr (default: only when stderr is a terminal; "
        "otherwise one summary line at the end)")


def wants_bar(flag: bool | None = None, stream: Any = None) -> bool:
    """Whether to draw a bar: ``flag`` when given (--progress / --no-progress), else
    whether ``stream`` (default: stderr) is a terminal."""
    if flag is not None:
        return bool(flag)
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def say(line: str, file: TextIO | None = None) -> None:
    """Print ``line`` (default: to stdout) without breaking a bar drawn meanwhile."""
    out = sys.stdout if file is None else file
    if _open_bars:
        from tqdm import tqdm

        tqdm.write(line, file=out)
    else:
        print(line, file=out)
    out.flush()


class Progress:
    """Counts finished items of a run of ``total``; see the module docstring.

    ``enabled`` is the ``--progress`` flag (None: decide by whether ``stream`` is a
    terminal). Without a bar, :meth:`close` prints one line:
    ``episodes: 40/40 tasks in 12.3 s``.
    """

    def __init__(self, total: int | None, desc: str, unit: str = "item", *,
                 enabled: bool | None = None, stream: TextIO | None = None) -> None:
        global _open_bars
        self.total = total
        self.desc = desc
        self.unit = unit
        self.n = 0
        self.stream = sys.stderr if stream is None else stream
        self._t0 = time.monotonic()
        self._bar: Any = None
        self._closed = False
        if wants_bar(enabled, self.stream):
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, unit=unit, file=self.stream,
                             leave=False, dynamic_ncols=True)
            with _lock:
                _open_bars += 1

    @property
    def bar(self) -> bool:
        """Whether a bar is drawn."""
        return self._bar is not None

    def update(self, n: int = 1) -> None:
        """``n`` more items finished."""
        self.n += n
        if self._bar is not None:
            self._bar.update(n)

    def write(self, line: str, file: TextIO | None = None) -> None:
        """Print ``line`` (default: to stdout) above the bar."""
        say(line, file)

    def summary(self) -> str:
        """The line printed at the end when no bar was drawn."""
        of = f"/{self.total}" if self.total is not None else ""
        unit = self.unit if self.n == 1 and not of else self.unit + "s"
        return f"{self.desc}: {self.n}{of} {unit} in {time.monotonic() - self._t0:.1f} s"

    def close(self) -> None:
        """Remove the bar, or print the summary line; a second call does nothing."""
        global _open_bars
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
            with _lock:
                _open_bars -= 1
        else:
            print(self.summary(), file=self.stream, flush=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
