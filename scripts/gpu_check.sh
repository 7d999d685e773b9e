#!/usr/bin/env bash
# GPU throughput check: the train step in bfloat16 at a GPU-sized shape (24 layers, d_model
# 1024, 16 heads, d_ff 4096, seq 1024, batch 16 = 16,384 tokens per step) and its MFU against
# the bfloat16 matmul rate measured in the same process (scripts/benchmark.py). Target: MFU
# >= 35% on an H100/H200-class GPU, for the best remat policy. Each policy runs with both
# attention paths: `dense` (einsums, the [B, H, T, T] probabilities materialised) and `fused`
# (jax.nn.dot_product_attention, cuDNN flash attention in bfloat16 on a GPU).
#
#   bash scripts/gpu_check.sh [OUT_DIR] [--config.k=v ...]     (default OUT_DIR runs/gpu_check)
#
# Needs JAX's CUDA plugin at the pinned version: pip install "jax[cuda12]==0.10.2".
# Each run writes OUT_DIR/gpu_<attention>_<remat>.json and prints a table; a summary comes
# last. REMATS (default "full dots_no_batch none") and ATTENTIONS ("dense fused") pick runs.
set -euo pipefail
cd "$(dirname "$0")/.."

# GPU_CHECK_ON_CPU=1 skips the two GPU checks: the whole script then runs on CPU (with a tiny
# shape passed as overrides), which is how tests/test_benchmark.py checks it without a GPU.
if [ "${GPU_CHECK_ON_CPU:-0}" != 1 ]; then
  if ! command -v nvidia-smi > /dev/null; then
    echo "error: no NVIDIA GPU here (nvidia-smi not found)" >&2
    exit 1
  fi
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  if ! python -c "import jax, sys; sys.exit(jax.default_backend() != 'gpu')"; then
    echo "error: JAX sees no GPU; pip install \"jax[cuda12]==0.10.2\"" >&2
    exit 1
  fi
fi

out="${1:-runs/gpu_check}"
if [ $# -gt 0 ]; then shift; fi
mkdir -p "$out"

# :paper sets bfloat16 compute; the shape below replaces its width, depth and batch.
shape=(
  --config=configs/prenorm_96L.py:paper
  --config.model.num_layers=24
  --config.model.d_model=1024
  --config.model.num_heads=16
  --config.model.d_ff=4096
  --config.model.max_seq_len=1024
  --config.train.seq_len=1024
  --config.train.batch_size=16
  --config.model.dtype=bfloat16
  --config.mesh.data=-1
  --config.mesh.fsdp=1
  # A throughput check: byte-level stdlib text, as before :paper read real data (the
  # vocabulary changes the head's cost; --config.data.* / model.vocab_size after OUT_DIR win).
  --config.data.source=stdlib
  --config.data.allow_stdlib=true
  --config.model.vocab_size=256
)
# XLA plans (on CPU) about 89 GiB for remat none at this shape, 22 GiB for dots_no_batch and
# 10 GiB for full; benchmark.py skips a policy whose plan exceeds the GPU's memory. A policy
# that fails (out of memory at run time, say) is reported and the others still run.
failed=0
for attention in ${ATTENTIONS:-dense fused}; do
  for remat in ${REMATS:-full dots_no_batch none}; do
    echo "=== attention $attention, remat $remat"
    json="$out/gpu_${attention}_$remat.json"
    rm -f "$json"
    if ! python scripts/benchmark.py "${shape[@]}" --config.model.remat="$remat" \
      --config.model.attention="$attention" --steps=20 --warmup=3 --out="$json" "$@"; then
      echo "=== attention $attention, remat $remat: benchmark.py failed (above)" >&2
      failed=1
    fi
  done
done

python - "$out" << 'PY'
import glob, json, sys

best = None
print(f"\n{'attention':<11}{'remat':<15}{'step ms':>10}{'tokens/s':>12}{'TFLOP/s':>10}{'matmul TFLOP/s':>16}{'MFU':>8}")
for path in sorted(glob.glob(f"{sys.argv[1]}/gpu_*.json")):
  r = json.load(open(path))
  if "mfu" not in r:
    print(f"{r['model']['attention']:<11}{r['model']['remat']:<15} not run: {r.get('skipped')}")
    continue
  print(
    f"{r['model']['attention']:<11}{r['model']['remat']:<15}"
    f"{r['loop_step_s']['median'] * 1e3:10.1f}{r['tokens_per_second']:12,.0f}"
    f"{r['achieved_flops_per_s'] / 1e12:10.1f}{r['matmul']['best_flops_per_s'] / 1e12:16.1f}"
    f"{100 * r['mfu']:7.1f}%"
  )
  best = max(best or 0.0, r["mfu"])
if best is None:
  sys.exit("no policy ran")
verdict = "met" if best >= 0.35 else "MISSED"
print(f"best MFU {100 * best:.1f}% against the measured bf16 matmul rate: target >= 35% {verdict}")
PY
exit "$failed"
