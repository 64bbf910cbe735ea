"""Dataset errors."""


class DatasetError(ValueError):
    """A dataset that cannot be read or used; the message names the file or key and the fix."""
