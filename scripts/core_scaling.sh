#!/usr/bin/env bash
# How much the second core buys at nanoGPT's CPU shape: the train step on 1 core, on 2 cores,
# and the ceiling of perfect data parallelism (half the batch on each core, two processes).
#
#   bash scripts/core_scaling.sh [CONFIG] [STEPS]     (default configs/nanogpt_char.py, 100)
#
# Needs 2+ cores and taskset (util-linux). Run on a quiet machine: the runs are sequential
# except the last pair, which is meant to share the machine. Prints each run's median step.
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${1:-configs/nanogpt_char.py}
STEPS=${2:-100}
BATCH=$(python -c "
import sys; sys.path.insert(0, '.')
from resnorm_jax.config import cli
print(cli.load_config_file('$CONFIG').train.batch_size)")
HALF=$((BATCH / 2))
ONE_THREAD=--xla_cpu_multi_thread_eigen=false  # Eigen ops single-threaded (no waiting sibling)
# bench CPUS XLA_FLAGS [overrides...]: median step of benchmark.py pinned to CPUS.
bench() {
  local cpus=$1 xla_flags=$2
  shift 2
  XLA_FLAGS=$xla_flags taskset -c "$cpus" python scripts/benchmark.py --config="$CONFIG" \
    --steps="$STEPS" --nosync "$@" 2>&1 | grep -E "^step \(" | sed 's/^step (loop-style) *//'
}

echo "config $CONFIG, batch $BATCH, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
echo "2 cores, XLA defaults, batch $BATCH:            $(bench 0,1 "")"
echo "1 core,  XLA defaults, batch $BATCH:            $(bench 0 "")"
echo "1 core,  one thread,   batch $BATCH:            $(bench 0 $ONE_THREAD)"
echo "1 core,  one thread,   batch $HALF (alone):      $(bench 0 $ONE_THREAD --config.train.batch_size=$HALF)"
tmp=$(mktemp)
bench 1 $ONE_THREAD --config.train.batch_size=$HALF >"$tmp" &
pair=$(bench 0 $ONE_THREAD --config.train.batch_size=$HALF)
wait
echo "both cores at once, batch $HALF each: core 0 $pair"
echo "                                     core 1 $(cat "$tmp")"
rm -f "$tmp"
