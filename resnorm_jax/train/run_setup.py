"""One run setup: from a config and devices to everything a train step needs.

The loop, the benchmark (resnorm_jax/hardware/bench.py), the AOT memory check
(experiments/aot_memory.py) and the paper reproductions all build their run here, so the
step a benchmark times and the memory a check reports are those of the real run.
Order: validate (model config, train settings, optimizer, mesh, batch divisibility), then
build abstractly (graph definitions, state shapes and shardings); nothing is allocated or
compiled until `init_state`, `compile_step` or `compile_eval` is called.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from ml_collections import ConfigDict

from resnorm_jax.config import cli
from resnorm_jax.data import batches as batches_lib
from resnorm_jax.data import corpora, sources
from resnorm_jax.data import vocab as vocab_lib
from resnorm_jax.model import model_def as mdl
from resnorm_jax.model.config_types import ModelConfig, model_config_from
from resnorm_jax.train import depth_profile, stop_rule
from resnorm_jax.train import sharding as shard_lib
from resnorm_jax.train import train_step as ts
from resnorm_jax.train.optimizers.build import make_optimizer
from resnorm_jax.train.optimizers.schedules import make_schedule

PyTree = Any
Batch = tuple[jax.Array, jax.Array]
# XLA's memory_analysis fields, per device.
MEMORY_KINDS = ("argument", "output", "alias", "temp", "generated_code")


def validate_finite(config: ConfigDict) -> None:
  """Refuses an infinite or NaN float anywhere in the config (opt.lr=inf, model.init_std=inf
  passed every range check: inf > 0), naming the key."""

  def walk(node, prefix: str) -> None:
    for key, value in node.items():
      if isinstance(value, (dict, ConfigDict)):
        walk(value, f"{prefix}{key}.")
      elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{prefix}{key}={value!r} must be a finite number")

  walk(config, "")


def validate_ranges(config: ConfigDict) -> None:
  """Refuses a run name that is not one folder name (it names runs/<name>-...: '../x' wrote
  outside runs/) and numeric model keys outside their range, naming the key, its value and
  what is valid."""
  if config.name:  # empty: the folder is named by the overrides and the time alone
    cli.check_folder_name(config.name, "name")
  std = config.model.init_std
  if isinstance(std, bool) or not isinstance(std, (int, float)) or not std > 0:
    raise ValueError(
      f"model.init_std={std!r} must be a number > 0 (the std of the normal and gpt2 init "
      "rules; the default is 0.02)"
    )


SEED_MAX = 2**31 - 1  # a population stacks its members' seeds as int32; PRNG keys wrap at 2^32


def check_seed(config: ConfigDict) -> None:
  """ValueError unless config.seed is an integer in [0, SEED_MAX]: checked before anything
  is written (an unchecked seed of -1 trains, writes a checkpoint, then fails at the first
  batch)."""
  seed = config.seed
  if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
    raise ValueError(f"seed={seed!r} must be an integer in [0, {SEED_MAX}]")
  data = config.data.get("seed")
  if data is not None and (isinstance(data, bool) or not 0 <= data <= SEED_MAX):
    raise ValueError(
      f"data.seed={data!r} must be an integer in [0, {SEED_MAX}], or unset (the data order of "
      "`seed`)"
    )


def validate_train(config: ConfigDict) -> None:
  """Refuses impossible training settings with the key, the value and what is valid."""
  t = config.train
  for key in (
    "steps",
    "batch_size",
    "seq_len",
    "log_every",
    "eval_every",
    "eval_batches",
    "final_eval_tokens",
    "checkpoint_every",
    "keep_checkpoints",
  ):
    v = t[key]
    if not isinstance(v, int) or v < 1:
      raise ValueError(f"train.{key}={v!r} must be a positive integer")
  z = t.get("z_loss", 0.0)
  if isinstance(z, bool) or not isinstance(z, (int, float)) or z < 0:
    raise ValueError(f"train.z_loss={z!r} must be a number >= 0 (0: off; PaLM's 1e-4)")
  if config.model.position == "learned" and t.seq_len > config.model.max_seq_len:
    raise ValueError(
      f"train.seq_len={t.seq_len} exceeds model.max_seq_len="
      f"{config.model.max_seq_len} (the learned position table)"
    )
  stop_rule.check(t)  # train.stop_when: a stop rule whose step k the run logs


def validate(
  config: ConfigDict,
  *,
  schedule_steps: int | None = None,
  vocab_size: int | None = None,
  platform: str | None = None,
) -> ModelConfig:
  """Every check of a run that needs no device: model config, train settings, optimizer and
  schedule. ValueError naming the key, its value and the valid choices; returns the model's
  resolved config. `build` calls it first; `sweeps.grid.resolve` calls it for every point of a
  sweep before any point runs.

  `vocab_size` and `platform` as in `model_config_from` (default: from the data and JAX's
  backend). The mesh and the batch's divisibility by it depend on the devices: `build`.
  """
  return _checked(config, schedule_steps, vocab_size, platform)[0]


def _checked(
  config: ConfigDict, schedule_steps: int | None, vocab_size: int | None, platform: str | None
) -> tuple[ModelConfig, optax.Schedule]:
  """validate's checks; the model config and the lr schedule, each made once per run."""
  validate_finite(config)
  validate_ranges(config)
  check_seed(config)
  mcfg = model_config(config, vocab_size=vocab_size, platform=platform)
  validate_train(config)
  depth_profile.drawing(config.diag.get("depth_images", "eval"), config.train.eval_every)
  sampling = config.data.get("sampling", "random")
  if sampling not in batches_lib.SAMPLERS:
    raise ValueError(f"data.sampling={sampling!r} is not one of {', '.join(batches_lib.SAMPLERS)}")
  schedule = make_schedule(config.opt, schedule_steps or config.train.steps)  # all opt.*
  return mcfg, schedule


def keep_freed_host_memory() -> bool:
  """On a CPU-only Linux host, keeps freed memory mapped for reuse (glibc malloc settings).

  XLA:CPU allocates each step's temporaries afresh. glibc serves such blocks with mmap (a
  thread's arena: any above 64 MiB) and unmaps them on free, so every step page-faults its
  temporaries in again. One arena and mmap/trim thresholds of 256 MiB keep them. Larger
  blocks (a 1000-layer model's) still come from mmap: keeping those too grew the peak RSS
  a lot, for faults that cost little at such step times (docs/benchmarks.md, sections 1
  and 3). Skipped
  where an accelerator plugin may be used (its buffers are not malloc'd) or off glibc.
  Call it before JAX starts its thread pools; returns True if applied.
  """
  import ctypes
  import glob
  import importlib.util

  platforms = jax.config.jax_platforms
  if platforms:
    cpu_only = set(platforms.lower().split(",")) == {"cpu"}
  else:
    # libtpu alone (requirements-dev.txt: the TPU compiler for deviceless compiles) is no
    # TPU: only a host with TPU device files (/dev/accel*, /dev/vfio/N) may use one.
    tpu_files = glob.glob("/dev/accel*") + glob.glob("/dev/vfio/[0-9]*")
    tpu = bool(tpu_files) and importlib.util.find_spec("libtpu") is not None
    cpu_only = not (importlib.util.find_spec("jax_plugins") or tpu)
  if not cpu_only:
    return False
  try:
    libc = ctypes.CDLL("libc.so.6")
  except OSError:
    return False
  m_trim_threshold, m_mmap_threshold, m_arena_max = -1, -3, -8  # glibc malloc.h
  ok = libc.mallopt(m_arena_max, 1) == 1
  ok &= libc.mallopt(m_mmap_threshold, 256 * 2**20) == 1
  ok &= libc.mallopt(m_trim_threshold, 256 * 2**20) == 1
  return bool(ok)


def model_config(
  config: ConfigDict, *, vocab_size: int | None = None, platform: str | None = None
) -> ModelConfig:
  """config.model resolved against the data, the one place a run does it: model.vocab_size=0
  takes the data's vocabulary (256 for bytes, a prepared folder's tokenizer padded to a
  multiple of 128), an explicit size is checked against a prepared folder's tokenizer
  (vocab.resolve_vocab_size; reads at most a manifest.json). `vocab_size` overrides both;
  `platform` as in model_config_from."""
  if vocab_size is None:
    vocab_size = vocab_lib.resolve_vocab_size(config.data, config.model.vocab_size)
  return model_config_from(config, vocab_size=vocab_size, platform=platform)


@functools.cache
def model_def_for(mcfg: ModelConfig) -> mdl.ModelDef:
  """One ModelDef per model config: functions jitted with it as a static argument (the
  reproductions' diagnostics) then compile once per model, not once per call."""
  return mdl.make_model_def(mcfg)


def aot_memory(compiled) -> dict[str, int]:
  """Per-device bytes of a compiled step by kind, and `total`; {} where XLA gives none.

  total = argument + output - alias + temp + generated_code: everything the step needs
  resident while it runs, the compiled code included (small on a GPU/TPU, but it occupies
  the same memory), so "it fits" is never optimistic.
  """
  mem = compiled.memory_analysis()
  if mem is None:
    return {}
  out = {k: int(getattr(mem, f"{k}_size_in_bytes", 0)) for k in MEMORY_KINDS}
  out["total"] = out["argument"] + out["output"] - out["alias"] + out["temp"]
  out["total"] += out["generated_code"]
  return out


@dataclasses.dataclass(frozen=True, eq=False)
class RunSetup:
  """A run's static parts: model, optimizer, mesh, shardings, abstract state, jitted step."""

  config: ConfigDict
  mcfg: ModelConfig
  model_def: mdl.ModelDef
  optimizer: optax.GradientTransformation
  schedule: optax.Schedule
  mesh: Mesh
  shardings: PyTree  # of the TrainState
  batch_sharding: NamedSharding
  abstract: PyTree  # the TrainState's shapes and dtypes, each with its sharding
  step_fn: Any  # jit of train_step: explicit shardings, donated state, replicated metrics
  eval_fn: Any  # jit of eval_step

  def init_state(self) -> ts.TrainState:
    """A fresh TrainState, created sharded (a pure function of config.seed)."""
    init = functools.partial(ts.init_state, self.model_def, self.optimizer, self.config.seed)
    return jax.jit(init, out_shardings=self.shardings)()

  @property
  def abstract_batch(self) -> tuple[jax.ShapeDtypeStruct, jax.ShapeDtypeStruct]:
    t = self.config.train
    shape = jax.ShapeDtypeStruct((t.batch_size, t.seq_len), np.int32, sharding=self.batch_sharding)
    return shape, shape

  def lower_step(self):
    """The train step traced for the abstract state and batch (nothing allocated)."""
    return self.step_fn.lower(self.abstract, self.abstract_batch)

  def compile_step(self):
    return self.lower_step().compile()

  def compile_eval(self):
    return self.eval_fn.lower(self.abstract, self.abstract_batch).compile()

  @property
  def num_params(self) -> int:
    return int(sum(x.size for x in jax.tree.leaves(self.abstract.params)))


def build(
  config: ConfigDict,
  devices: Sequence[jax.Device] | None = None,
  *,
  schedule_steps: int | None = None,
  vocab_size: int | None = None,
  platform: str | None = None,
) -> RunSetup:
  """Validates `config` and builds its run on `devices` (default: all) abstractly.

  `schedule_steps` (default train.steps) is the length of the learning-rate schedule;
  `vocab_size` and `platform` as in `validate` (a compile for a TPU topology on a host
  without the run's data: resnorm_jax/hardware/target_compile.py).
  ValueError on a bad config, optimizer, mesh or batch size, before anything compiles.
  """
  mcfg, schedule = _checked(config, schedule_steps, vocab_size, platform)
  t = config.train
  steps = schedule_steps or t.steps
  model_def = model_def_for(mcfg)
  # nGPT: + the sphere projection
  optimizer = make_optimizer(config.opt, steps, model_def, schedule=schedule)
  mesh = shard_lib.make_mesh(config.mesh, devices)
  shards, nproc = shard_lib.batch_shards(mesh, config.mesh.rules), jax.process_count()
  if t.batch_size % shards or t.batch_size % nproc:
    raise ValueError(
      f"train.batch_size={t.batch_size} must be divisible by the data-parallel "
      f"size {shards} (the mesh axes of the 'batch' rule) and the {nproc} processes"
    )
  init_fn = functools.partial(ts.init_state, model_def, optimizer, config.seed)
  shapes = jax.eval_shape(init_fn)
  shardings = shard_lib.state_shardings(shapes, model_def, optimizer, mesh, config.mesh.rules)
  abstract = jax.tree.map(
    lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), shapes, shardings
  )
  bsh = shard_lib.batch_sharding(mesh, config.mesh.rules)
  per_layer = bool(config.diag.per_layer)
  step = functools.partial(
    ts.train_step,
    model_def,
    optimizer,
    per_layer=per_layer,
    z_loss_weight=t.get("z_loss", 0.0),
    mechanism=per_layer and bool(config.diag.get("mechanism", False)),
  )
  step_fn = shard_lib.jit_train_step(step, shardings, bsh)
  eval_fn = shard_lib.jit_model_fn(
    functools.partial(ts.eval_step, model_def), bsh, in_shardings=(shardings, (bsh, bsh))
  )
  return RunSetup(
    config, mcfg, model_def, optimizer, schedule, mesh, shardings, bsh, abstract, step_fn, eval_fn
  )


def data_seed(config: ConfigDict) -> int:
  """The seed of the data order: data.seed when set, else `seed` (init and data alike)."""
  seed = config.data.get("seed")
  return config.seed if seed is None else seed


@dataclasses.dataclass(frozen=True)
class Batches:
  """The run's batch source: training batch of step n and held-out batch i, placed as
  global arrays. Pure functions of (seed, step or index, process): a resumed or
  benchmarked run sees the same data."""

  corpus: corpora.Corpus
  config: ConfigDict
  sharding: NamedSharding

  def train(self, step: int) -> Batch:
    t = self.config.train
    rows = batches_lib.get_batch(
      self.corpus.train,
      seed=data_seed(self.config),
      step=step,
      batch_size=t.batch_size,
      seq_len=t.seq_len,
      sampling=self.config.data.get("sampling", "random"),
      **_process(),
    )
    return self._place(rows)

  def held_out(self, index: int) -> Batch:
    t = self.config.train
    rows = batches_lib.eval_batch(
      self.corpus.val, index=index, batch_size=t.batch_size, seq_len=t.seq_len, **_process()
    )
    return self._place(rows)

  def _place(self, rows: tuple[np.ndarray, np.ndarray]) -> Batch:
    """This process's (inputs, targets) rows as global arrays on the batch sharding."""
    x, y = rows
    return shard_lib.global_batch(x, self.sharding), shard_lib.global_batch(y, self.sharding)


def _process() -> dict[str, int]:
  return {"process_index": jax.process_index(), "process_count": jax.process_count()}


def batches(run: RunSetup, corpus: corpora.Corpus | None = None) -> Batches:
  """The batch source of `run` on `corpus` (default: loaded from config.data)."""
  config = run.config
  if corpus is None:
    corpus = sources.load_corpus(config.data, run.mcfg.vocab_size, config.train.seq_len)
  return Batches(corpus, config, run.batch_sharding)
