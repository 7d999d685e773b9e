#!/usr/bin/env bash
# Runs experiments.train on every worker of a Cloud TPU VM slice: one process per host, all
# running the same command; jax.distributed.initialize() finds the slice from the TPU
# metadata (--config.dist.initialize=true). The processes run detached (setsid nohup): a
# dropped SSH connection does not end the job. Each worker logs to
# <repo>/logs/<run>.<hostname>.log; --tail shows them.
#
# scripts/launch_tpu_vm.sh --name NAME --zone ZONE [--project P] [--repo DIR] [--setup] \
#     [--workdir DIR | --mount DIR] [--dry-run | --tail] CONFIG [--config.key=value ...]
#
#   CONFIG     e.g. configs/postnorm_96L.py:paper (checked here, then read on every worker)
#   --repo     the checkout on the workers (default ~/resnorm_jax, same path on each)
#   --workdir  one folder every worker sees: gs://BUCKET/... (orbax and the loop write there
#              through etils.epath) or a folder under --mount. Anything else is refused:
#              orbax writes each host's shards there, and a per-worker folder loses the run.
#   --mount    a shared mount on every worker (NFS, Filestore, gcsfuse). Without --workdir
#              the run goes to <mount>/runs/<config>[-<arg>][-<hash of the overrides>]: the
#              same folder each launch, so launching again resumes.
#   --setup    first create <repo>/.venv and pip install -r requirements-tpu.txt (jax[tpu] at
#              the pinned JAX version) on every worker
#   --dry-run  print the gcloud command instead of running it
#   --tail     follow the run's logs on every worker (tail -F) instead of launching
# Environment: TPU_NAME, TPU_ZONE, TPU_PROJECT as defaults; PYTHON (default .venv/bin/python
# inside the repo); GCLOUD_FLAGS (extra flags for gcloud, e.g. --internal-ip).
set -euo pipefail

name="${TPU_NAME:-}" zone="${TPU_ZONE:-}" project="${TPU_PROJECT:-}"
repo="~/resnorm_jax" workdir="" mount="" dry_run=0 tail_logs=0 setup=0 config=""
python="${PYTHON:-.venv/bin/python}"
usage() { sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
# POSIX shell quoting (readable, and what Python's shlex.split reads back).
q() {
  if [[ "$1" =~ ^[A-Za-z0-9_./:=,@+%-]+$ ]]; then printf '%s' "$1"
  else printf "'%s'" "${1//\'/\'\\\'\'}"; fi
}
join() { local out="" a; for a in "$@"; do out+="${out:+ }$(q "$a")"; done; printf '%s' "$out"; }

while (($#)); do
  if [[ "$1" =~ ^--(name|zone|project|repo|workdir|mount)=(.*)$ ]]; then  # --opt=value form
    set -- "--${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" "${@:2}"
  fi
  case "$1" in
    --name) name="$2"; shift 2 ;;
    --zone) zone="$2"; shift 2 ;;
    --project) project="$2"; shift 2 ;;
    --repo) repo="$2"; shift 2 ;;
    --workdir) workdir="$2"; shift 2 ;;
    --mount) mount="${2%/}"; shift 2 ;;
    --setup) setup=1; shift ;;
    --dry-run) dry_run=1; shift ;;
    --tail) tail_logs=1; shift ;;
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
if [[ -n "$mount" && "$mount" != /* ]]; then
  echo "error: --mount=$mount must be an absolute path (the same on every worker)" >&2; exit 2
fi
base="$(basename "${config%%:*}" .py)"
[[ "$config" == *:* ]] && base="$base-${config#*:}"
(($#)) && base="$base-$(printf '%s\0' "$@" | sha256sum | cut -c1-8)"
if [[ -z "$workdir" ]]; then
  [[ -n "$mount" ]] || {
    echo "error: give --workdir=gs://BUCKET/... or --mount=DIR (a folder every worker" \
      "sees); a per-worker local folder would lose the run" >&2
    exit 2
  }
  workdir="$mount/runs/$base"
fi
shared=0
[[ "$workdir" == gs://* ]] && shared=1
[[ -n "$mount" && "$workdir" == "$mount"/* ]] && shared=1
if ((!shared)); then
  echo "error: --workdir=$workdir is not shared: valid are gs://BUCKET/... or a folder" \
    "under --mount=DIR (${mount:-none given}), which every worker sees" >&2
  exit 2
fi
run="$(basename "$workdir")"
log="logs/$run.\$(hostname).log"  # expanded on each worker

# The command each worker runs, every argument quoted for the remote shell. ~ stays unquoted.
train=("$python" -m experiments.train "--config=$config" "--workdir=$workdir"
  --config.dist.initialize=true "$@")
if ((tail_logs)); then
  remote="cd $repo && tail -n 50 -F logs/$(q "$run").*.log"
else
  remote="cd $repo && mkdir -p logs"
  ((setup)) && remote+=" && python3 -m venv .venv && .venv/bin/pip install -r requirements-tpu.txt"
  remote+=" && (setsid nohup $(join "${train[@]}") >> $log 2>&1 < /dev/null &)"
  remote+=" && echo \"\$(hostname): started, log \$PWD/$log\""
fi
cmd=(gcloud compute tpus tpu-vm ssh "$name" --zone "$zone" --worker=all --command "$remote")
[[ -n "$project" ]] && cmd+=(--project "$project")
# shellcheck disable=SC2206  # GCLOUD_FLAGS is a list of flags on purpose
[[ -n "${GCLOUD_FLAGS:-}" ]] && cmd+=(${GCLOUD_FLAGS})

if ((dry_run)); then
  join "${cmd[@]}"; echo
else
  "${cmd[@]}"
  ((tail_logs)) || echo "workdir $workdir; follow the logs with:" \
    "$(join "$0" --tail --name "$name" --zone "$zone" "--workdir=$workdir" "$config" "$@")"
fi
