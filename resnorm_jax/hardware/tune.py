"""`compile_for --tune`: the fastest way to run one experiment on a TPU slice, by the compiler.

A candidate keeps the experiment (the global batch, float32 master weights, the loss) and
changes only how the step runs: the mesh (pure data parallel, fsdp over the slice, data x
fsdp), the remat policy, the attention implementation (dense, or the splash kernel on a TPU)
and the XLA flags MaxText sets for TPUs (async collectives, latency-hiding scheduler). Each is
compiled deviceless (target_compile.py) and ranked by the TPU cost model's step estimate.

Compiles are the cost (~44 s of CPU each at :paper width), so the search prunes:
1. memory, without the loop correction: for each mesh the remat policies from the least
   recompute (none) to the most (full); the first that fits is that mesh's finalist and the
   rest are not compiled (an assumption: more recompute at the same mesh adds FLOPs; it
   fails where the saved activations make the step bytes-bound, as the :paper configs'
   float32 attention probabilities do, docs/tpu_compile/README.md);
2. the finalists and the config's own settings get the loop-corrected estimate (a second
   compile, scan_unroll=2): the winner is never slower than the config as it is;
3. on the fastest: splash attention, then whole-weight gathers instead of windowed einsums,
   then the MaxText flags (each kept only if faster);
4. a splash winner at the remat policies with less recompute (least first): the memory pass
   chose each remat with dense attention's saved probabilities, which splash does not keep;
   the first that fits gets its estimate.
Every result is cached in a JSON file keyed by the train step as lowered (the program, which
holds the config, the candidate and the code), the topology, the compile options, the loop
correction and the jax and libtpu versions (tune_cache.py): a rerun compiles nothing it has
already compiled, and a change to the code that changes the program compiles it again. The
candidates are tune_space.py's.

Gradient accumulation is not a candidate: the train step has no microbatch loop in this
codebase, so a global batch no candidate holds is reported, not split.

The splash kernel is a Mosaic custom call the cost model counts as 0 FLOPs and 0 bytes
(docs/tpu_compile/README.md); its estimate adds the kernel's analytic work at the chip's
peak (`splash_seconds`) and says so in the source. Every time and MFU here is the TPU
compiler's cost-model estimate, not a measurement.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from ml_collections import ConfigDict

from resnorm_jax.hardware import hlo_bytes
from resnorm_jax.hardware import target_compile as tc
from resnorm_jax.hardware.target_report import size
from resnorm_jax.hardware.tpu_target import GIB, TargetError
from resnorm_jax.hardware.tune_cache import (
  DEFAULT_CACHE,
  Cache,
  Result,
  cache_key,
)
from resnorm_jax.hardware.tune_compile import (
  Target,
  _corrected,
  _memory_pass,
  lowered,
  target,
  with_attribution,
)
from resnorm_jax.hardware.tune_space import (
  ATTENTIONS,
  MESHES,
  Candidate,
  mesh_overrides,
  overrides,
  own_candidate,
  with_flags,
)
from resnorm_jax.hardware.xla_flags import (
  FLAG_PARTS,
  accepted_flags,
  flag_parts,
  flags_of,
)


def _stale(r: Result) -> bool:
  """A cached attribution counted by older rules (before hlo_bytes.VERSION): version 1 read a
  computation up to its first line starting "}", which a Pallas kernel's attributes have
  (a splash program's count lost ops); version 2 charged a stacked buffer sliced inside a
  nested fusion whole; version 3 counted VMEM's traffic as HBM's (any program's count).
  Counted again."""
  return bool(r.fits and r.attributed_bytes and r.attribution < hlo_bytes.VERSION)


def evaluate(
  cache: Cache,
  config: ConfigDict,
  tgt: Target,
  c: Candidate,
  vocab: int,
  corrected: bool,
  same_as: Result | None = None,
) -> Result:
  """A candidate's memory pass and, where it fits and `corrected`, its loop-corrected
  estimate; each from the cache where it holds them, else compiled and cached.

  `same_as`: the corrected result of the same program compiled without the XLA flags; where
  the flags leave the first compile's memory and cost exactly as they were, its loop
  correction is reused (said in the source) instead of compiled again.

  The cache's key is the program as lowered (tune_cache.py): each call lowers the candidate's
  step first (seconds), so a change to the code is never read from a compile of other code."""
  low, program = lowered(config, tgt, c, vocab)
  if low is None:
    return Result(fits=False, error=program, hbm_limit=tgt.hbm_limit)
  options = flags_of(c.flags, tgt.flags)
  key = cache_key(program, tgt.name, options, False)
  one = cache.get(key)
  if one is None or _stale(one):  # a stale attribution: compiled again, counted again
    one = _memory_pass(low, tgt, options, program)
    cache.put(key, one)
  if not (corrected and one.fits):
    return one
  same = same_as and (same_as.raw_cost, same_as.per_chip_bytes) == (
    one.raw_cost,
    one.per_chip_bytes,
  )
  if same:
    reused = "; the flags left the cost unchanged at one layer per iteration: correction reused"
    reuse = dataclasses.replace(
      same_as,
      source=same_as.source + reused,
      cpu_s=one.cpu_s,
      cached=one.cached,
      top_ops=one.top_ops,
    )
    return with_attribution(reuse, one, config, tgt, vocab)  # this program's own count
  key = cache_key(program, tgt.name, options, True)
  two = cache.get(key)
  if two is None:
    two = _corrected(config, tgt, c, vocab, one)
    cache.put(key, two)
  elif _stale(two):  # its estimate stands; its attributed roofline from `one`'s new count
    two = with_attribution(two, one, config, tgt, vocab)
    cache.put(key, two)
    two = dataclasses.replace(two, cached=True)
  return two


def line(c: Candidate, r: Result) -> str:
  """One candidate: fits, GB per chip, estimated step, MFU, bound, top 3 ops by bytes."""
  tail = " [cached]" if r.cached else f" [{r.cpu_s:.0f} s CPU]"
  if r.error:
    return f"  {c.label:<56} refused: {r.error}"
  gib = f"{size(r.per_chip_bytes):>10}" if r.per_chip_bytes else "         ?"
  if not r.fits:
    return f"  {c.label:<56} no fit {gib} per chip (of {size(r.hbm_limit)}){tail}"
  if r.step_s is None:
    return f"  {c.label:<56} fits   {gib} per chip, no estimate (memory pass only){tail}"
  bound = f"attributed-bytes roofline MFU {r.attributed_mfu:.1%}; " if r.attributed_mfu else ""
  return (
    f"  {c.label:<56} fits   {gib} per chip  est {r.step_s:.4g} s  MFU {r.mfu:6.1%}  "
    f"{r.bound}-bound ({bound}top HBM bytes, HLO ops x loop trips: {'; '.join(r.top_ops)}){tail}"
  )


def winner(results: dict[Candidate, Result]) -> Candidate | None:
  """The fitting candidate with the smallest loop-corrected step estimate (None: none fits)."""
  ranked = [(r.step_s, c.label, c) for c, r in results.items() if r.fits and r.step_s]
  return min(ranked)[2] if ranked else None


@dataclasses.dataclass
class Tuned:
  target: Target
  vocab: int
  results: dict[Candidate, Result]
  best: Candidate | None


def tune(
  config: ConfigDict,
  topology: str,
  *,
  vocab_size: int = 0,
  cache_path: str = DEFAULT_CACHE,
  log: Callable[[str], None] = print,
  meshes: Sequence[str] = MESHES,
  remats: Sequence[str] = tc.REMAT_ORDER,
  attentions: Sequence[str] = ATTENTIONS,
  flag_sets: Sequence[str] = ("default", *FLAG_PARTS),
) -> Tuned:
  """Compiles `config`'s candidates for `topology` (memory first, then the finalists'
  loop-corrected estimates, then splash and each of FLAG_PARTS in `flag_sets` on the
  fastest), logging one line per candidate; TargetError for bad input, before anything
  compiles."""
  tgt = target(topology, log)
  chips, t = len(tgt.devices), config.train
  if t.batch_size % chips:
    raise TargetError(
      f"train.batch_size={t.batch_size} does not split over {tgt.name}'s {chips} chips"
    )
  for m in meshes:
    mesh_overrides(m, chips)  # an unknown name: ValueError here
  parts = [p for name in flag_sets for p in flag_parts(name)]  # likewise
  vocab, note = tc.resolve_vocab(config, vocab_size, "tpu")
  cache = Cache(cache_path)
  hbm, peak = tgt.hbm_limit / GIB, tgt.chip.bf16_flops / 1e12
  log(
    f"tune {config.name} on {tgt.name} ({chips} x {tgt.chip.name}, {hbm:.2f} GiB per chip), "
    f"batch {t.batch_size} x {t.seq_len}, {peak:.0f} TFLOP/s bf16"
  )
  if note:
    log(f"note: {note}")
  if parts:
    tgt.flags = accepted_flags(
      tgt.devices, {k: v for p in parts for k, v in FLAG_PARTS[p].items()}, log
    )
  log("note: gradient accumulation is not a candidate: train_step has no microbatch loop")
  results: dict[Candidate, Result] = {}

  def run(c: Candidate, corrected: bool, same_as: Result | None = None) -> Result:
    results[c] = r = evaluate(cache, config, tgt, c, vocab, corrected, same_as)
    if not r.fits or corrected:
      log(line(c, r))
    return r

  finalists = []
  for mesh in meshes:
    for i, remat in enumerate(remats):
      c = Candidate(mesh, remat)
      if run(c, False).fits:
        finalists.append(c)
        if remats[i + 1 :]:
          log(f"  mesh={mesh}: remat {', '.join(remats[i + 1 :])} not compiled ({remat} fits "
              "with less recompute)")  # fmt: skip
        break
  own = own_candidate(config, chips)
  if own not in finalists:  # the config as it is: a winner is never slower than it
    finalists.append(own)
  for c in finalists:
    run(c, True)
  best = winner(results)
  if best and "splash" in attentions and best.attention != "splash":
    run(dataclasses.replace(best, attention="splash"), True)
    best = winner(results)
  for part in (p for p in FLAG_PARTS if p in parts):
    if best and flags_of(with_flags(best, part).flags, tgt.flags) != flags_of(
      best.flags, tgt.flags
    ):
      run(with_flags(best, part), True, results[best])
      best = winner(results)
  if best and best.attention == "splash":  # less recompute, now that no probabilities are kept
    best = _less_recompute(best, remats, results, run)
  log(winner_line(best, results.get(best), chips))
  return Tuned(tgt, vocab, results, best)


def _less_recompute(best: Candidate, remats: Sequence[str], results, run) -> Candidate:
  """The splash winner at the remat policies with less recompute than its own, on its mesh,
  with its flags: the first that fits (least recompute first) gets its estimate.

  The memory pass picked each mesh's remat with dense attention, whose saved float32
  probabilities ([L, B, H, T, T]) are most of what `none` keeps: on v5p:2x2x2 Post-LN 96
  `:paper` fsdp with remat none fits (72.96 GiB), 24 GiB of it those, and its step was the
  slower one; splash keeps none of them."""
  lighter = remats[: remats.index(best.remat)] if best.remat in remats else ()
  for remat in lighter:
    c = dataclasses.replace(best, remat=remat)
    if run(c, False).fits:
      run(c, True)
      return winner(results)
  return best


def winner_line(best: Candidate | None, r: Result | None, chips: int) -> str:
  if best is None or r is None:
    return "winner: none (no candidate fits this slice at this global batch)"
  keys = " ".join(f"--config.{k}={v}" for k, v in overrides(best, chips).items())
  named = " and ".join(flag_parts(best.flags))
  flags = f" (and the {named} XLA flags in LIBTPU_INIT_ARGS)" if named else ""
  return (
    f"winner: {best.label}: {size(r.per_chip_bytes)} per chip, est {r.step_s:.4g} s/step, "
    f"MFU {r.mfu:.1%} ({r.bound}-bound; {r.source}); run it with {keys}{flags}"
  )
