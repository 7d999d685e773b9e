"""The line a run prints once it has compiled: what it trains (the model, its parameters, the
devices, the compile time, the corpus). A single run (loop.py) adds the mesh, the attention,
the no-context baselines and its folder; a population (population/run.py) its members' lrs
and seeds."""

from __future__ import annotations

from collections.abc import Sequence

from ml_collections import ConfigDict

from resnorm_jax.model.config_types import ModelConfig
from resnorm_jax.train import run_setup as setup_lib
from resnorm_jax.train import sharding as shard_lib


def _model(mcfg: ModelConfig, *, block_and_init: bool) -> str:
  """The layers, the norm, where it sits and the residual (and the block and init)."""
  text = (
    f"{mcfg.num_layers} layers, norm={mcfg.norm} position={mcfg.norm_position} "
    f"residual={mcfg.residual}"
  )
  return text + (f" block={mcfg.block} init={mcfg.init}" if block_and_init else "")


def run_banner(run_setup: setup_lib.RunSetup, corpus, baselines: dict, extra: dict) -> str:
  """A single run's line; `extra`: its devices, compile seconds and workdir. The corpus's
  warning, if any, follows on a line of its own."""
  mcfg, config = run_setup.mcfg, run_setup.config
  return (
    f"{config.name}: {_model(mcfg, block_and_init=True)}; {run_setup.num_params:,} params; "
    f"mesh {dict(run_setup.mesh.shape)} on {shard_lib.describe_devices(extra['devices'])}; "
    f"attention {mcfg.attention}; compiled in {extra['compile_seconds']:.1f}s; "
    f"unigram entropy {baselines['unigram_entropy']:.3f} nats "
    f"(held-out {baselines['heldout_unigram_entropy']:.3f}); "
    f"{corpus.description}; run folder {extra['workdir']}"
  ) + _warning(corpus)


def population_banner(
  shared, configs: Sequence[ConfigDict], start: int, compile_seconds: float
) -> str:
  """A population's line: its members' `configs`, the program starting at step `start`; `shared`
  (population_member.Shared): their run setup, corpus and devices."""
  run_setup, corpus, devices = shared.run_setup, shared.corpus, shared.devices
  mcfg = run_setup.mcfg
  lrs = ", ".join(f"{c.opt.lr:g}" for c in configs)
  seeds = ", ".join(str(c.seed) for c in configs)
  return (
    f"{configs[0].name}: population of {len(configs)} from step {start} (lr {lrs}; seed "
    f"{seeds}); {_model(mcfg, block_and_init=False)}; {run_setup.num_params:,} params each; "
    f"on {shard_lib.describe_devices(devices)}; compiled in {compile_seconds:.1f}s; "
    f"{corpus.description}"
  ) + _warning(corpus)


def _warning(corpus) -> str:
  """The corpus's one-line warning on a line of its own (the stdlib corpus of another Python
  than the committed results'), or ''."""
  text = getattr(corpus, "warning", "")
  return f"\n{text}" if text else ""
