#!/usr/bin/env bash
# Checks a config on this host, then submits scripts/slurm_gpu.sbatch with it: a misspelt key,
# a wrong type or a missing data folder is refused here, not after the job waited in the queue.
#
# scripts/submit_slurm.sh [--dry-run] [sbatch options] CONFIG [--config.key=value ...]
#
#   sbatch options  anything before CONFIG, in the --option=value form, passed to sbatch
#                   (--nodes=4, --time=24:00:00, --partition=gpu, --dependency=afterany:ID)
#   --dry-run       check, then print the sbatch command and the job's own dry run
# The check is `python -m experiments.validate --platform=gpu` (no devices are used): the
# checks a run makes before compiling, with VALIDATE_PYTHON (default: PYTHON, or
# .venv/bin/python when CONTAINER_IMAGE is set or PYTHON is not), so the repository's
# requirements must be installed here; SKIP_VALIDATE=1 skips it (a host without them). The
# environment (TASKS, WORKDIR, CONTAINER_IMAGE, XLA_GPU_PERF, NCCL_*, ...) reaches the job:
# see scripts/slurm_gpu.sbatch.
set -euo pipefail

dry_run=0 sbatch_args=()
while (($#)) && [[ "$1" == -* && "$1" != --config.* ]]; do
  case "$1" in
    --dry-run) dry_run=1 ;;
    -h | --help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    *) sbatch_args+=("$1") ;;
  esac
  shift
done
config="${1:-}"
[[ -n "$config" ]] || {
  echo "error: usage: scripts/submit_slurm.sh [--dry-run] [sbatch options] CONFIG" \
    "[--config.key=value ...]" >&2
  exit 2
}
shift
cd "$(dirname "$0")/.."
# The job's own dry run first: its argument checks, and what it would run.
job_plan="$(bash scripts/slurm_gpu.sbatch --dry-run "$config" "$@")"
python="${PYTHON:-.venv/bin/python}"
[[ -n "${CONTAINER_IMAGE:-}" ]] && python=.venv/bin/python  # PYTHON is the image's then
python="${VALIDATE_PYTHON:-$python}"
if [[ "${SKIP_VALIDATE:-0}" != 1 ]]; then
  "$python" -m experiments.validate --platform=gpu "--config=$config" "$@" || {
    echo "error: not submitted: $config does not pass the checks above" >&2
    exit 2
  }
fi
cmd=(sbatch "${sbatch_args[@]}" scripts/slurm_gpu.sbatch "$config" "$@")
if ((dry_run)); then
  printf '%q ' "${cmd[@]}"; echo
  echo "$job_plan"
  exit 0
fi
"${cmd[@]}"
