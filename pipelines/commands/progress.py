"""Progress lines on stderr for commands that run longer than a few seconds.

A command reports its phases (``checking 10 input files``, ``running the pipeline on
FnApiRunner``, ...). Nothing is printed for a command that ends within ``quiet_for`` seconds;
after that the current phase is printed with the elapsed time, every new phase at once, and a
heartbeat line every ``interval`` seconds while a phase lasts (a pipeline on the local runner
gives no finer progress), so an operator can tell a long run from a hung one.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from costlib_pipelines import interrupts

__all__ = ["Progress"]


class Progress:
    """Phase reporter; call it with a phase line, use it as a context manager.

    Parameters
    ----------
    command : str
        Prefix of every line (``costlib recalibrate``).
    stream : text stream, optional
        Where lines go (default ``sys.stderr``).
    quiet_for : float
        Seconds before the first line.
    interval : float
        Seconds between heartbeat lines.
    """

    def __init__(self, command: str, stream: TextIO | None = None, *, quiet_for: float = 3.0,
                 interval: float = 15.0):
        self.command = command
        self.stream = stream if stream is not None else sys.stderr
        self.quiet_for = quiet_for
        self.interval = interval
        self.started = time.monotonic()
        self.phase = "starting"
        self.talking = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="costlib-progress",
                                        daemon=True)

    def _line(self, text: str) -> None:
        elapsed = time.monotonic() - self.started
        print(f"{self.command}: [{elapsed:6.1f} s] {text}", file=self.stream, flush=True)

    def __call__(self, phase: str) -> None:
        interrupts.doing(phase)
        with self._lock:
            self.phase = phase
            if self.talking:
                self._line(phase)

    def _beat(self) -> None:
        if self._stop.wait(self.quiet_for):
            return
        with self._lock:
            self.talking = True
            self._line(self.phase)
        while not self._stop.wait(self.interval):
            with self._lock:
                self._line(f"{self.phase} (still running)")

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        if self.talking and not isinstance(exc_info[1], KeyboardInterrupt) and (
                interrupts.received() is None):  # an interrupt has its own line
            self._line("finished" if exc_info[0] is None else "stopped")
