"""Where the residual stream lives on the device mesh, as a constraint the model applies.

The model knows no mesh (resnorm_jax/train/sharding.py maps its weights' logical names to
one). Left alone, XLA's partitioner lays out activations after the weights: with the weights
sharded over fsdp on 'embed', it shards the stream on d_model and replicates the batch, so
every chip runs every layer on the whole global batch (docs/tpu_compile/README.md measured
13x the model's FLOPs per chip). The code that jits a step therefore names the stream's
sharding (rows over the data-parallel axes) and traces the step inside `constrained`; the
model pins the stream to it at the embedding and at every layer's output. Outside such a
trace (one device, tests, tools) `constrain` is the identity and the program is unchanged.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterator
from typing import Any

import jax

_STREAM: contextvars.ContextVar[Any] = contextvars.ContextVar("stream_sharding", default=None)


@contextlib.contextmanager
def stream_sharding(sharding: jax.sharding.Sharding | None) -> Iterator[None]:
  """Within this context, `constrain` pins arrays to `sharding` (None: no constraint)."""
  token = _STREAM.set(sharding)
  try:
    yield
  finally:
    _STREAM.reset(token)


def constrained(fn: Callable, sharding: jax.sharding.Sharding | None) -> Callable:
  """`fn` traced with the stream pinned to `sharding` (what jax.jit of it compiles)."""
  if sharding is None:
    return fn

  @functools.wraps(fn)
  def wrapped(*args, **kwargs):
    with stream_sharding(sharding):
      return fn(*args, **kwargs)

  return wrapped


def current() -> jax.sharding.Sharding | None:
  """The enclosing `stream_sharding` context's sharding (None outside one): what a kernel the
  partitioner cannot split (model/splash.py) runs under shard_map with."""
  return _STREAM.get()


def constrain(x_BxT: jax.Array) -> jax.Array:
  """The stream (batch leading: [B, T, D], hyper-connections' [B, T, n, D]) on the sharding
  of the enclosing `stream_sharding` context; unchanged outside one."""
  sharding = _STREAM.get()
  return x_BxT if sharding is None else jax.lax.with_sharding_constraint(x_BxT, sharding)
