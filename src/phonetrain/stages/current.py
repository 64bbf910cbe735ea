"""The per-device stamp under its former module name, for importers not yet moved to
:mod:`phonetrain.stages.stamp`."""

from phonetrain.stages.stamp import STAMP, stamp

__all__ = ["STAMP", "stamp"]
