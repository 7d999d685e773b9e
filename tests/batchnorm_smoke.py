"""The checkpoint tests' config, the smoke config with model.norm=batchnorm, and its TrainState's
shapes on one device (tests/test_checkpoint_*.py, tests/test_resume_policy.py)."""

import functools

import jax

from configs import smoke
from resnorm_jax.model import model_def as mdl
from resnorm_jax.model.config_types import model_config_from
from resnorm_jax.train import train_step as ts
from resnorm_jax.train.optimizers.build import make_optimizer


def abstract_state(config):
  """The TrainState shapes of `config`, on one device (restores need no mesh)."""
  model_def = mdl.make_model_def(model_config_from(config))
  optimizer = make_optimizer(config.opt, config.train.steps)
  abstract = jax.eval_shape(functools.partial(ts.init_state, model_def, optimizer, config.seed))
  device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
  return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=device), abstract)


def config(**overrides):
  config = smoke.get_config()
  config.model.norm = "batchnorm"
  for key, value in overrides.items():
    section, name = key.split("__")
    config[section][name] = value
  return config
