"""Dataset errors."""

from phonetrain.errors import PhonetrainError


class DatasetError(PhonetrainError, ValueError):
    """A dataset that cannot be read or used; the message names the file or key and the fix."""
