"""Ctrl-C for the ``iron-lm`` commands: a KeyboardInterrupt that is also remembered.

Python turns SIGINT into a KeyboardInterrupt raised wherever the main thread
happens to be, and library code can lose one raised inside it: numpy's
compiled ``numpy.random._generator`` clears an exception raised while its
module initialises (seen here: Ctrl-C right after the tiny model's notice,
while its random weights are drawn, and the command ran to the end). So
the commands install :data:`CTRL_C` for their run: its handler records the
press and raises as Python's does, the commands call :meth:`CtrlC.check`
at points of their own (before the first token is shown, before each later
one), and whoever handles the KeyboardInterrupt calls
:meth:`CtrlC.handled`. A press some library swallowed still ends the
command, with exit code 130, at the next check.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any


class CtrlC:
    """SIGINT raised as KeyboardInterrupt and remembered until handled."""

    def __init__(self) -> None:
        self.pending = False
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> CtrlC:
        # Only where SIGINT is Python's own: a host program's handler (or a
        # test runner's) stays as it is, and only the main thread may set it.
        self.pending = False
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            self._previous = signal.signal(signal.SIGINT, self._press)
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False

    def _press(self, signum: int, frame: FrameType | None) -> None:
        self.pending = True
        raise KeyboardInterrupt

    def check(self) -> None:
        """Raise KeyboardInterrupt for a press that was not handled yet."""
        if self.pending:
            raise KeyboardInterrupt

    def handled(self) -> None:
        """The KeyboardInterrupt was caught and acted on: forget the press."""
        self.pending = False


#: The commands' one instance (SIGINT has one handler per process).
CTRL_C = CtrlC()
