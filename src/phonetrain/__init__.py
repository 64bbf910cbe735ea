"""phonetrain: on-device DNN training on smartphone GPUs vs CPUs, as a declarative pipeline."""

__version__ = "0.1.0"
