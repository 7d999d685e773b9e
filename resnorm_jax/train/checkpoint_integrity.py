"""What detects bytes that orbax restores without complaint: the sha256 a checkpoint's `meta`
carries over its own canonical JSON (META_CHECKSUM, with META_VERSION), and the leaf table of
the state, each leaf's shape, dtype and a fingerprint of its bytes, recorded at save and
compared on restore."""

from __future__ import annotations

import hashlib
import json

import jax
import jax.numpy as jnp

# meta's own sha256 (over its canonical JSON without this key), and the version that has one:
# a meta without the version was written without a checksum and is read unchecked; one with the
# version but no checksum lost it (a flipped bit in the key's name) and is damaged.
META_CHECKSUM = "meta_sha256"
META_VERSION = ("meta_version", 2)


def meta_checksum(meta: dict) -> str:
  """sha256 of a meta's canonical JSON, its checksum key left out."""
  body = {k: v for k, v in meta.items() if k != META_CHECKSUM}
  return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def sealed(meta: dict) -> dict:
  """`meta` with its version and checksum: what a checkpoint stores."""
  meta = {**meta, META_VERSION[0]: META_VERSION[1]}
  return {**meta, META_CHECKSUM: meta_checksum(meta)}


def check_meta(meta: dict) -> None:
  """ValueError unless a read meta matches its checksum (a meta from before checksums, with
  neither version nor checksum, is taken as it is)."""
  if not isinstance(meta.get("leaves"), dict):
    raise ValueError("meta has no leaf table")
  if META_CHECKSUM not in meta and META_VERSION[0] not in meta:
    return
  if meta.get(META_CHECKSUM) != meta_checksum(meta):
    raise ValueError("meta does not match its sha256 (changed after it was written)")


def _leaf_fingerprint(x: jax.Array) -> jax.Array:
  """uint32 sum (mod 2^32) of a bijective mix of each element's bits.

  The mix is one-to-one, so any changed element (a flipped bit, zeroed bytes) changes the
  sum unless another change cancels it exactly (~2^-32); integer sums are exact in any
  order, so the value does not depend on sharding. Elementwise + one reduction: cheap to
  run and to compile, no reshape of a sharded array.
  """
  if x.dtype == jnp.bool_:
    x = x.astype(jnp.uint8)
  width = {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint32}[x.dtype.itemsize]
  u = jax.lax.bitcast_convert_type(x, width).astype(jnp.uint32)  # 8-byte: adds a dim of 2
  u = (u ^ (u >> 16)) * jnp.uint32(0x45D9F3B)  # xorshift-multiply (odd): bijective
  u = (u ^ (u >> 16)) * jnp.uint32(0x45D9F3B)
  return jnp.sum(u ^ (u >> 16), dtype=jnp.uint32)


@jax.jit
def _fingerprints(state) -> list[jax.Array]:
  return [_leaf_fingerprint(x) for x in jax.tree.leaves(state)]


def leaf_table(state) -> dict[str, list]:
  """{leaf path: [shape, dtype, fingerprint]} of a state (a sync with the device)."""
  prints = jax.device_get(_fingerprints(state))
  flat = jax.tree_util.tree_flatten_with_path(state)[0]
  return {
    jax.tree_util.keystr(path): [list(x.shape), str(x.dtype), int(fp)]
    for (path, x), fp in zip(flat, prints, strict=True)
  }
