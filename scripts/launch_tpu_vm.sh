#!/usr/bin/env bash
# Runs experiments.train on every worker of a Cloud TPU VM slice: one process per host, all
# running the same command; jax.distributed.initialize() finds the slice from the TPU
# metadata (--config.dist.initialize=true).
#
# scripts/launch_tpu_vm.sh --name NAME --zone ZONE [--project P] [--repo DIR] \
#     [--workdir DIR] [--dry-run] CONFIG [--config.key=value ...]
#
#   CONFIG     e.g. configs/postnorm_96L.py:paper (checked here, then read on every worker)
#   --repo     the checkout on the workers (default ~/resnorm_jax, same path on each)
#   --workdir  must be one folder every worker sees (NFS/Filestore/gcsfuse mount): orbax
#              writes each host's shards there. Default runs/<config>-<timestamp>, fixed here
#              so that all workers agree (each picking its own timestamp would not).
#   --dry-run  print the gcloud command instead of running it
# Environment: TPU_NAME, TPU_ZONE, TPU_PROJECT as defaults; PYTHON (default .venv/bin/python
# inside the repo); GCLOUD_FLAGS (extra flags for gcloud, e.g. --internal-ip).
set -euo pipefail

name="${TPU_NAME:-}" zone="${TPU_ZONE:-}" project="${TPU_PROJECT:-}"
repo="~/resnorm_jax" workdir="" dry_run=0 config=""
python="${PYTHON:-.venv/bin/python}"
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
# POSIX shell quoting (readable, and what Python's shlex.split reads back).
q() {
  if [[ "$1" =~ ^[A-Za-z0-9_./:=,@+%-]+$ ]]; then printf '%s' "$1"
  else printf "'%s'" "${1//\'/\'\\\'\'}"; fi
}
join() { local out="" a; for a in "$@"; do out+="${out:+ }$(q "$a")"; done; printf '%s' "$out"; }

while (($#)); do
  if [[ "$1" =~ ^--(name|zone|project|repo|workdir)=(.*)$ ]]; then  # --opt=value form
    set -- "--${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" "${@:2}"
  fi
  case "$1" in
    --name) name="$2"; shift 2 ;;
    --zone) zone="$2"; shift 2 ;;
    --project) project="$2"; shift 2 ;;
    --repo) repo="$2"; shift 2 ;;
    --workdir) workdir="$2"; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage ;;
    --config.*) break ;;
    -*) echo "error: unknown option $1" >&2; usage ;;
    *) config="$1"; shift; break ;;
  esac
done
[[ -n "$config" ]] || { echo "error: CONFIG is required" >&2; usage; }
[[ -n "$name" && -n "$zone" ]] || { echo "error: --name and --zone (or TPU_NAME, TPU_ZONE) are required" >&2; exit 2; }
cd "$(dirname "$0")/.."
[[ -f "${config%%:*}" ]] || { echo "error: no config file ${config%%:*}" >&2; exit 2; }
for arg in "$@"; do
  [[ "$arg" == --config.* ]] || { echo "error: expected --config.key=value overrides, got $arg" >&2; exit 2; }
done
if [[ -z "$workdir" ]]; then
  base="$(basename "${config%%:*}" .py)"
  suffix="${config#*:}"; [[ "$config" == *:* ]] && base="$base-$suffix"
  workdir="runs/$base-$(date +%Y%m%d-%H%M%S)"
fi

# The command each worker runs, every argument quoted for the remote shell. ~ stays unquoted.
train=("$python" -m experiments.train "--config=$config" "--workdir=$workdir"
  --config.dist.initialize=true "$@")
remote="cd $repo && $(join "${train[@]}")"
cmd=(gcloud compute tpus tpu-vm ssh "$name" --zone "$zone" --worker=all --command "$remote")
[[ -n "$project" ]] && cmd+=(--project "$project")
# shellcheck disable=SC2206  # GCLOUD_FLAGS is a list of flags on purpose
[[ -n "${GCLOUD_FLAGS:-}" ]] && cmd+=(${GCLOUD_FLAGS})

if ((dry_run)); then
  join "${cmd[@]}"; echo
else
  exec "${cmd[@]}"
fi
