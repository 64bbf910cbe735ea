"""The one exception hierarchy of phonetrain.

Every error a user should read as one message (bad config, bad data file, a device that cannot
be reached, a runner that failed, a results file that cannot be read) is a
:class:`PhonetrainError`: a message naming the file, key or device, and a ``hint`` saying what
to do. Command-line entry points and stage processes print ``str(error)`` (message, then hint)
without a traceback; anything else is a bug and keeps its traceback.

The wings subclass it where the error arises (``ConfigError`` in :mod:`phonetrain.config`,
``RunnerError`` in :mod:`phonetrain.runner`, ...); this module imports nothing of the package,
so every module may use it.
"""

from __future__ import annotations


class PhonetrainError(Exception):
    """An error reported to the user as one message.

    ``message`` names what is wrong (file, key, device, run); ``hint`` (may be empty) says what
    to try. ``str(e)`` is ``"<message>; <hint>"``.
    """

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}; {self.hint}" if self.hint else self.message


class StageError(PhonetrainError):
    """A workflow stage that could not complete; the message names the device and run."""


class ResultsFileError(PhonetrainError, ValueError):
    """A file under the results folder that is missing, truncated or malformed; the message
    names the file (rerun the stage that writes it)."""
