"""Structured configs (Hydra + OmegaConf) and the composed sweep of experiments.

Three modules, one concern each: :mod:`.schema` (the dataclasses registered as Hydra's
``base_config``, and the :class:`Experiment`/:class:`Sweep` records), :mod:`.validate` (the
tables of allowed values and the checks that refuse a bad value, naming file, key or
override) and :mod:`.compose` (``conf/`` plus Hydra overrides -> a :class:`Sweep`). The names
below are the package's face; import them from ``phonetrain.config``.
"""

from phonetrain.config.compose import (compose_one, compose_sweep, eval_iterations,
                                       experiment_lower, experiment_model, normalize_overrides,
                                       plan_config)
from phonetrain.config.schema import (AXES, CONF_DIR, NAME_RE, NO_KERNEL, REPO_ROOT,
                                      BackendConfig, Config, ConfigError, DatasetConfig,
                                      DeviceConfig, DeviceFacts, Experiment, KernelConfig,
                                      LowerConfig, MeasureConfig, ModelConfig, ReportConfig,
                                      Sweep, SweepConfig, config_hash, schema_class, schema_keys)
from phonetrain.config.validate import (ADAM_KEYS, AT_MOST, BELOW_ONE, CHOICES, INT_MAX,
                                        MIN_INT, NON_NEGATIVE, POSITIVE,
                                        available_memory_bytes, batches_bytes)

__all__ = ["ADAM_KEYS", "AT_MOST", "AXES", "BELOW_ONE", "BackendConfig", "CHOICES", "CONF_DIR",
           "Config", "ConfigError", "DatasetConfig", "DeviceConfig", "DeviceFacts",
           "Experiment", "INT_MAX", "KernelConfig", "LowerConfig", "MIN_INT", "MeasureConfig",
           "ModelConfig", "NAME_RE", "NON_NEGATIVE", "NO_KERNEL", "POSITIVE", "REPO_ROOT",
           "ReportConfig", "Sweep", "SweepConfig", "available_memory_bytes", "batches_bytes",
           "compose_one", "compose_sweep", "config_hash", "eval_iterations",
           "experiment_lower", "experiment_model", "normalize_overrides", "plan_config",
           "schema_class", "schema_keys"]
