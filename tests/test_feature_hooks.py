"""Features (resnorm_jax/model/variants/, Feature) compose or refuse, before anything is built.

Every hook says how several features on it combine (variants.HOOKS: chained in their declared
order, or one feature at most) and every attention path says which hooks it applies
(model/attention_paths.py). Each pair of registered features, the test-only ones below
included, either builds a model that carries both features' modules or is refused when the
config is validated, in one line naming both; a feature whose hook the attention path lacks
is refused naming the path, never dropped. A learnable temperature on the logits composes
with softcapping (temperature, then the cap), against NumPy.
"""

import dataclasses
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from conftest import TINY, tiny_config
from resnorm_jax.model import attention_paths, variants
from resnorm_jax.model.transformer import Transformer

X = np.random.default_rng(0).normal(0.5, 2.0, (2, 5, 8)).astype(np.float32)
# Where the built model holds each hook's module: (in the layers' attention?, attribute).
PLACES = {
  "attn_logits": (True, "logit_map"),
  "attn_cap": (True, "softcap"),
  "attn_sink": (True, "sink"),
  "attn_output": (True, "gate"),
  "out_logits": (False, "logit_map"),
}


class Temperature(nnx.Module):
  """tau * logits, tau a learnable scalar (a test's logits feature)."""

  def __init__(self, tau: float):
    self.tau = nnx.Param(jnp.asarray(tau, jnp.float32))

  def __call__(self, x: jax.Array) -> jax.Array:
    return x * self.tau[...]


class Shift(nnx.Module):
  """logits + b (a second logits map, to see the chain's order)."""

  def __init__(self, b: float):
    self.b = b

  def __call__(self, x: jax.Array) -> jax.Array:
    return x + self.b


class ZeroSink(nnx.Module):
  def __call__(self) -> jax.Array:
    return jnp.zeros((TINY["num_heads"],), jnp.float32)


# The test-only features turned on: they have no config keys of their own to turn them on.
ACTIVE: set[str] = set()


def _test_feature(name: str, **hooks) -> variants.Feature:
  """A test-only feature, on while its name is in ACTIVE."""
  return variants.Feature(name, f"{name} (a test's)", on=lambda cfg: name in ACTIVE, **hooks)


TEMPERATURE = _test_feature("temperature", attn_logits=lambda cfg: Temperature(0.5))
SECOND_SINK = _test_feature("zerosink", attn_sink=lambda cfg: ZeroSink())
TEST_ONLY = {"temperature", "zerosink", "shift"}


@pytest.fixture
def register(monkeypatch):
  """Registers test-only features beside the package's, turned on, for one test."""

  def add(*feats: variants.Feature) -> None:
    for f in feats:
      monkeypatch.setitem(variants._registry()[variants.FEATURE], f.name, f)
      ACTIVE.add(f.name)

  yield add
  ACTIVE.clear()


def _config(*names: str):
  """A tiny config with the features `names` turned on (their turned_on keys; a test-only
  feature by ACTIVE) and no other test-only one."""
  ACTIVE.clear()
  feats = [variants.get(variants.FEATURE, n) for n in names]
  ACTIVE.update(n for n in names if n in TEST_ONLY)
  return tiny_config(**{k: v for f in feats for k, v in f.turned_on.items()})


def _members(module) -> list:
  """The modules a hook's place holds: a chain's maps, or the one module."""
  if module is None:
    return []
  return list(module.maps) if isinstance(module, variants.Chain) else [module]


def _carried(model: Transformer, cfg, hook: str) -> list:
  if hook == "frozen":
    return list(variants.frozen_paths(cfg))
  in_attn, attr = PLACES[hook]
  return _members(getattr(model.layers.attn if in_attn else model, attr))


def _build(cfg) -> Transformer:
  return Transformer(cfg, rngs=nnx.Rngs(params=0))


def _kind(thing):
  return thing if callable(thing) and not isinstance(thing, nnx.Module) else type(thing)


def test_every_hook_is_declared_and_every_path_is_a_resolved_attention():
  from resnorm_jax.model.config_types import ATTENTION_IMPLEMENTATIONS

  fields = {f.name for f in dataclasses.fields(variants.Feature)}
  assert {h.name for h in variants.HOOKS} <= fields
  assert set(PLACES) | {"frozen"} == {h.name for h in variants.HOOKS}
  assert set(attention_paths.PATHS) == set(ATTENTION_IMPLEMENTATIONS)
  attention_hooks = {h.name for h in variants.HOOKS if h.attention}
  for path, hooks in attention_paths.PATHS.items():
    assert hooks <= attention_hooks, path
  assert attention_paths.PATHS["dense"] == attention_hooks  # the einsums apply every one


def test_each_feature_turned_on_acts_on_its_hooks():
  for name in variants.names(variants.FEATURE):
    f = variants.get(variants.FEATURE, name)
    cfg = _config(name)
    assert f.on(cfg) and f.hooks(cfg), name
    assert not f.hooks(_config()), name  # off by default: no hook


@pytest.mark.parametrize("extra", [(), (TEMPERATURE, SECOND_SINK)], ids=["package", "with-test"])
def test_every_pair_of_features_is_carried_or_refused_naming_both(register, extra):
  """Every pair of the registry's features (read from it, test-only ones registered first)."""
  register(*extra)
  names = variants.names(variants.FEATURE)
  assert len(names) >= 3
  kinds = {}  # {(feature, hook): the kind of module it makes}, from a model with it alone
  for name in names:
    f = variants.get(variants.FEATURE, name)
    cfg = _config(name)
    alone = _build(cfg)
    for hook in f.hooks(cfg):
      carried = _carried(alone, cfg, hook)
      kinds[name, hook] = _kind(carried[0])
  outcomes = {}
  for a, b in itertools.combinations(names, 2):
    fa, fb = (variants.get(variants.FEATURE, n) for n in (a, b))
    try:
      cfg = _config(a, b)
    except ValueError as err:
      assert a in str(err) and b in str(err) and "\n" not in str(err), str(err)
      outcomes[a, b] = "refused"
      continue
    model = _build(cfg)
    for hook in set(fa.hooks(cfg)) | set(fb.hooks(cfg)):
      have = [_kind(m) for m in _carried(model, cfg, hook)]
      for f in (fa, fb):
        if hook in f.hooks(cfg):
          assert kinds[f.name, hook] in have, (a, b, hook)
          have.remove(kinds[f.name, hook])
    outcomes[a, b] = "carried"
  if extra:  # the test's features: one composes with softcapping, one is refused with sinks
    assert outcomes[("softcap", "temperature")] == "carried"
    assert outcomes[("sinks", "zerosink")] == "refused"


def test_two_features_on_a_hook_that_takes_one_are_refused_at_validation(register):
  """variants.feature_module used to return the first feature's module, silently; then it
  refused, but only when the model was built. Now the config is refused."""
  register(SECOND_SINK)
  with pytest.raises(
    ValueError,
    match=r"^sinks and zerosink both act on the attn_sink hook \(.*\), which takes one "
    r"feature: turn one of them off$",
  ):
    tiny_config(attn_sinks=True)


def test_a_chain_with_an_undeclared_order_is_refused_and_a_declared_one_is_kept(register):
  register(TEMPERATURE, _test_feature("shift", attn_logits=lambda cfg: Shift(1.0)))
  with pytest.raises(ValueError, match=r"^temperature and shift both act on the attn_logits "
                     r"hook at order 0, so their chain's order is undeclared"):  # fmt: skip
    tiny_config()
  register(_test_feature("shift", attn_logits=lambda cfg: Shift(1.0), order=-1))
  maps = _members(_build(tiny_config()).layers.attn.logit_map)
  assert [type(m) for m in maps] == [Shift, Temperature]


@pytest.mark.parametrize("path", sorted(attention_paths.PATHS))
def test_each_path_carries_a_feature_or_refuses_it_naming_the_path(register, path):
  register(TEMPERATURE)
  for name in variants.names(variants.FEATURE):
    f = variants.get(variants.FEATURE, name)
    cfg = _config(name)
    lacked = [
      h for h in f.hooks(cfg) if variants.HOOK[h].attention and h not in attention_paths.PATHS[path]
    ]
    if lacked:
      with pytest.raises(ValueError) as err:
        dataclasses.replace(cfg, attention=path)
      msg = str(err.value)
      assert f"model.attention={path!r} does not apply the " in msg and f.name in msg, msg
      assert "valid values: " + ", ".join(attention_paths.applying(lacked[0])) in msg
      continue
    cfg = dataclasses.replace(cfg, attention=path)
    model = _build(cfg)
    for hook in f.hooks(cfg):
      assert _carried(model, cfg, hook), (name, path, hook)
  ACTIVE.clear()


def _np_layer_attention(attn, h, tau: float, cap: float) -> np.ndarray:
  """Causal attention in NumPy: logits q.k / sqrt(K), times tau, then c tanh(l / c)."""
  w = {n: np.asarray(getattr(attn, n).kernel[...], np.float64) for n in ("q", "k", "v", "out")}
  b, t, d = h.shape
  heads = TINY["num_heads"]
  kd = d // heads
  q, k, v = ((h @ w[n]).reshape(b, t, heads, kd) for n in ("q", "k", "v"))
  logits = np.einsum("bthk,bshk->bhts", q, k) / math.sqrt(kd) * tau
  if cap:
    logits = cap * np.tanh(logits / cap)
  logits = np.where(np.tril(np.ones((t, t), bool)), logits, -np.inf)
  p = np.exp(logits - logits.max(-1, keepdims=True))
  p = p / p.sum(-1, keepdims=True)
  return np.einsum("bhts,bshk->bthk", p, v).reshape(b, t, d) @ w["out"]


def test_a_temperature_composes_with_softcapping_then_the_cap_against_numpy(register):
  """The bug: a second logits feature turned softcapping off. Both apply now, the
  temperature first, the cap on what it made (what reaches the softmax is bounded by c)."""
  register(TEMPERATURE)
  model = _build(tiny_config(norm_position="pre", attn_softcap=0.4))
  graphdef, state = nnx.split(model.layers)
  attn = nnx.merge(graphdef, jax.tree.map(lambda a: a[1], state)).attn
  attn.logit_map.tau[...] = jnp.asarray(3.0, jnp.float32)
  with jax.disable_jit():
    stats = {}
    got = np.asarray(attn(jnp.asarray(X), stats=stats), np.float64)
  h = X.astype(np.float64)
  expected = _np_layer_attention(attn, h, tau=3.0, cap=0.4)
  np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
  assert float(stats["attn_logit_max"]) <= np.float32(0.4)
  # Each of the two bites: without either, the output differs.
  for tau, cap in ((1.0, 0.4), (3.0, 0.0)):
    assert np.abs(expected - _np_layer_attention(attn, h, tau=tau, cap=cap)).max() > 1e-3


def test_the_splash_kernel_refuses_a_logits_map_it_cannot_apply(register):
  """The splash path read the cap off the logits module by its attribute, and any other
  logits feature was silently ignored there; now the config is refused."""
  register(TEMPERATURE)
  cfg = tiny_config(attn_softcap=0.4)
  with pytest.raises(
    ValueError,
    match=r"^model\.attention='splash' does not apply the attn_logits hook that temperature "
    r"turns on; valid values: dense$",
  ):
    dataclasses.replace(cfg, attention="splash")
