#!/usr/bin/env bash
# Runs experiments.train on every worker of a Cloud TPU VM slice: one process per host, all
# running the same command; jax.distributed.initialize() finds the slice from the TPU
# metadata (--config.dist.initialize=true). The processes run detached (setsid nohup): a
# dropped SSH connection does not end the job. The worker side is scripts/tpu_worker.sh.
#
# scripts/launch_tpu_vm.sh --name NAME --zone ZONE [--project P] [--repo DIR] [--sync]
#     [--setup [--python=PY]] [--workdir DIR | --mount DIR] [--accelerator-type TYPE]
#     [--no-compile-check] [--untuned] [--dry-run] CONFIG [--config.k=v ...]
# scripts/launch_tpu_vm.sh --name NAME --zone ZONE [--repo DIR] [--dry-run] --stop|--status|--logs|--tail
#
#   CONFIG     e.g. configs/postnorm_96L.py:paper (checked here, then read on every worker)
#   --repo     the checkout on the workers (default ~/resnorm_jax, same path on each)
#   --sync     first copy this checkout's HEAD to --repo on every worker (a git bundle, checked
#              out there: the run's config.json records the commit); uncommitted changes stay
#              here. Without it the workers run whatever --repo holds.
#   --workdir  one folder every worker sees: gs://BUCKET/... (orbax and the loop write there
#              through etils.epath) or a folder under --mount. Anything else is refused:
#              orbax writes each host's shards there, and a per-worker folder loses the run.
#   --mount    a shared mount on every worker (NFS, Filestore, gcsfuse). Without --workdir
#              the run goes to <mount>/runs/<config>[-<arg>][-<hash of the overrides>]: the
#              same folder each launch, so launching again resumes.
#   --setup    first create <repo>/.venv with --python (default python3; JAX 0.10.2 needs
#              >= 3.11, so python3.11 on Ubuntu 22.04 images, installed with apt-get if
#              missing) and pip install -r requirements-tpu.txt on every worker
#   --accelerator-type  the slice's type (v5litepod-16, v5p-8, v4-32, v6e-16; default: asked
#              of gcloud, TPU_ACCELERATOR_TYPE): before anything reaches the workers, the run
#              is compiled for it here (python -m experiments.compile_for, deviceless, libtpu
#              from requirements-dev.txt) and a config that does not fit the chips' memory is
#              refused (exit 2) with the setting that would fit. A dry run without a type
#              skips the check (it says so on stderr).
#   --no-compile-check  skip that compile
#   --untuned  run the config's own mesh, remat and attention. Without it a `:paper` config
#              launched onto a slice of the generation and size docs/tpu_compile/tuned.csv
#              tuned it for runs the winner of `compile_for --tune` there (the keys it adds
#              are printed; a key given here is kept; the run folder's name is the same)
#   --dry-run  print the commands instead of running them
#   --stop     SIGTERM the run on every worker (it saves at one step and exits) and wait
#   --status   each worker: running or idle, and its log's last line
#   --logs     copy each worker's log to <workdir>/logs/<hostname>.log now (also done every
#              5 minutes while it runs, and when it ends)
#   --tail     follow the run's log on every worker (tail -F)
# A launch onto a slice whose workers still run a job is refused: --stop first. Each worker
# logs to <repo>/logs/<run>.<hostname>.log.
# Environment: TPU_NAME, TPU_ZONE, TPU_PROJECT as defaults; PYTHON (the run's interpreter,
# default .venv/bin/python inside the repo); GCLOUD_FLAGS (extra flags for every gcloud
# command, e.g. --internal-ip).
#
# Spot capacity (queued resources; a preempted slice is recreated and the run resumes from its
# workdir's last checkpoint):
#   gcloud compute tpus queued-resources create my-qr --node-id=my-v4-32 --zone=us-central2-b \
#     --accelerator-type=v4-32 --runtime-version=tpu-ubuntu2204-base --spot
#   gcloud compute tpus queued-resources describe my-qr --zone=us-central2-b   # until ACTIVE
#   scripts/launch_tpu_vm.sh --name my-v4-32 --zone us-central2-b --sync --setup \
#     --python=python3.11 --workdir=gs://BUCKET/runs/NAME CONFIG [--config.k=v ...]
# When it is preempted (state SUSPENDED): `gcloud compute tpus queued-resources delete my-qr
# --zone=us-central2-b --force --quiet`, create it again, and run the same launch command.
set -euo pipefail

name="${TPU_NAME:-}" zone="${TPU_ZONE:-}" project="${TPU_PROJECT:-}"
# shellcheck disable=SC2088  # expanded by the remote shell, on each worker
repo="~/resnorm_jax"
workdir="" mount="" mount_given="" dry_run=0 setup=0 sync=0 setup_python=python3 config="" mode=launch
accelerator="${TPU_ACCELERATOR_TYPE:-}" compile_check=1 tuned=1
python="${PYTHON:-.venv/bin/python}"
usage() { sed -n '2,57p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
# POSIX shell quoting (readable, and what Python's shlex.split reads back).
q() {
  if [[ "$1" =~ ^[A-Za-z0-9_./:=,@+%-]+$ ]]; then printf '%s' "$1"
  else printf "'%s'" "${1//\'/\'\\\'\'}"; fi
}
join() { local out="" a; for a in "$@"; do out+="${out:+ }$(q "$a")"; done; printf '%s' "$out"; }

while (($#)); do
  if [[ "$1" =~ ^--(name|zone|project|repo|workdir|mount|python|accelerator-type)=(.*)$ ]]; then
    set -- "--${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" "${@:2}"
  fi
  case "$1" in
    --name) name="$2"; shift 2 ;;
    --zone) zone="$2"; shift 2 ;;
    --project) project="$2"; shift 2 ;;
    --repo) repo="$2"; shift 2 ;;
    --workdir) workdir="$2"; shift 2 ;;
    --mount) mount_given="$2"; mount="${2%/}"; shift 2 ;;
    --python) setup_python="$2"; shift 2 ;;
    --accelerator-type) accelerator="$2"; shift 2 ;;
    --no-compile-check) compile_check=0; shift ;;
    --untuned) tuned=0; shift ;;
    --setup) setup=1; shift ;;
    --sync) sync=1; shift ;;
    --dry-run) dry_run=1; shift ;;
    --stop | --status | --logs | --tail) mode="${1#--}"; shift ;;
    -h | --help) usage ;;
    --config.*) break ;;
    -*) echo "error: unknown option $1" >&2; usage ;;
    *) config="$1"; shift; break ;;
  esac
done
[[ -n "$name" && -n "$zone" ]] || { echo "error: --name and --zone (or TPU_NAME, TPU_ZONE) are required" >&2; exit 2; }
cd "$(dirname "$0")/.."

gcloud_tpu() {  # VERB ARGS...: the gcloud command for this slice, every worker
  local cmd=(gcloud compute tpus tpu-vm "$@" --zone "$zone" --worker=all)
  [[ -n "$project" ]] && cmd+=(--project "$project")
  # shellcheck disable=SC2206  # GCLOUD_FLAGS is a list of flags on purpose
  [[ -n "${GCLOUD_FLAGS:-}" ]] && cmd+=(${GCLOUD_FLAGS})
  if ((dry_run)); then join "${cmd[@]}"; echo; else "${cmd[@]}"; fi
}
on_workers() { gcloud_tpu ssh "$name" --command "$1"; }  # one shell command on every worker
worker() { printf 'cd %s && bash scripts/tpu_worker.sh %s' "$repo" "$1"; }  # ~ unquoted

if [[ "$mode" != launch ]]; then  # act on the run each worker recorded
  [[ -z "$config" && $# == 0 ]] || { echo "error: --$mode takes no CONFIG" >&2; exit 2; }
  on_workers "$(worker "$mode")"
  exit
fi

[[ -n "$config" ]] || { echo "error: CONFIG is required" >&2; usage; }
[[ -f "${config%%:*}" ]] || { echo "error: no config file ${config%%:*}" >&2; exit 2; }
for arg in "$@"; do
  [[ "$arg" == --config.* ]] || { echo "error: expected --config.key=value overrides, got $arg" >&2; exit 2; }
done
if [[ -n "${mount_given:-}" && "$mount_given" =~ ^/+$ ]]; then
  echo "error: --mount=$mount_given is the root folder, not a shared mount: give the folder" \
    "every worker mounts (e.g. --mount=/mnt/shared)" >&2; exit 2
fi
if [[ -n "$mount" && "$mount" != /* ]]; then
  echo "error: --mount=$mount must be an absolute path (the same on every worker)" >&2; exit 2
fi
[[ -n "$mount" ]] && mount="$(realpath -m -s -- "$mount")"  # /mnt/./shared/ is /mnt/shared
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
if [[ "$workdir" == gs://* && ! "$workdir" =~ ^gs://[^/]+ ]]; then
  echo "error: --workdir=$workdir names no bucket: valid is gs://BUCKET/..." >&2; exit 2
fi
# A local workdir without its '..' (a folder under the mount is checked after them:
# /mnt/shared/../../etc/x is /etc/x, which no worker shares).
given_workdir="$workdir"
[[ "$workdir" == /* ]] && workdir="$(realpath -m -s -- "$workdir")"
shared=0
[[ "$workdir" == gs://* ]] && shared=1
[[ -n "$mount" && "$workdir" == "$mount"/* ]] && shared=1
if ((!shared)); then
  shown="$given_workdir"; [[ "$workdir" != "$given_workdir" ]] && shown+=" ($workdir)"
  echo "error: --workdir=$shown is not shared: valid are gs://BUCKET/... or a folder" \
    "under --mount=DIR (${mount:-none given}), which every worker sees" >&2
  exit 2
fi
run="$(basename "$workdir")"

# 0. The slice's accelerator type (asked of gcloud where not given), the tuned table's winner
# for it, then the run compiled for its chips here, deviceless; a config that does not fit is
# refused.
if ((compile_check)) && [[ -z "$accelerator" ]] && ((!dry_run)); then
  describe=(gcloud compute tpus tpu-vm describe "$name" --zone "$zone"
    --format='value(acceleratorType)')
  [[ -n "$project" ]] && describe+=(--project "$project")
  accelerator="$("${describe[@]}")" || {
    echo "error: could not ask gcloud for the accelerator type of $name: give" \
      "--accelerator-type=TYPE (or --no-compile-check)" >&2
    exit 2
  }
fi
local_python="${COMPILE_PYTHON:-$([[ -x .venv/bin/python ]] && echo .venv/bin/python || echo python3)}"
if [[ -n "$accelerator" ]]; then  # a Cloud TPU accelerator type, before any compile
  types="v5litepod-16, v5p-8, v4-32, v6e-16: a TPU generation and its TensorCore count"
  if [[ ! "$accelerator" =~ ^v[0-9a-z]+-[0-9]+$ ]]; then
    echo "error: --accelerator-type=$accelerator is not a Cloud TPU accelerator type ($types)" >&2
    exit 2
  fi
  why="$(JAX_PLATFORMS=cpu "$local_python" -c 'import sys
from resnorm_jax.hardware import tpu_target
try:
  tpu_target.topology_name(sys.argv[1])
except ValueError as e:
  print(e)' "$accelerator")" || exit 2
  if [[ -n "$why" ]]; then
    echo "error: --accelerator-type=$accelerator is not valid: $why (valid: $types)" >&2
    exit 2
  fi
fi
libtpu_args=""
if ((tuned)) && [[ -n "$accelerator" && "$config" == *:paper ]]; then  # the table's scale
  added="$(JAX_PLATFORMS=cpu "$local_python" -m resnorm_jax.hardware.tuned_table "$config" \
    "$accelerator" "$@")" || exit 2
  while IFS= read -r line; do
    case "$line" in
      LIBTPU_INIT_ARGS=*) libtpu_args="$line" ;;
      --config.*) set -- "$@" "$line" ;;
    esac
  done <<< "$added"
elif ((tuned)) && [[ "$config" == *:paper ]]; then
  echo "note: no accelerator type: the config's own settings run (not the tuned table's)" >&2
fi
if ((compile_check)); then
  if [[ -n "$accelerator" ]]; then
    echo "compile check: $config on $accelerator (deviceless)" >&2
    if ! JAX_PLATFORMS=cpu "$local_python" -m experiments.compile_for "--config=$config" \
      "--topology=$accelerator" --noeval "$@" >&2; then
      echo "error: not launched: $config does not compile within the memory of a" \
        "$accelerator (above: the setting that would)" >&2
      exit 2
    fi
  else
    echo "note: dry run without --accelerator-type: no compile check" >&2
  fi
fi

# 1. Refuse a slice that is training already (a worker without the checkout runs nothing).
check="cd $repo 2> /dev/null && [ -f scripts/tpu_worker.sh ] && bash scripts/tpu_worker.sh check"
check+=" || echo \"free: \$(hostname)\""
if ((dry_run)); then
  on_workers "$check"
else
  answers="$(on_workers "$check")" || { echo "error: could not reach every worker" >&2; exit 1; }
  echo "$answers"
  if grep -q 'busy:' <<< "$answers"; then
    echo "error: the slice is still running a job (busy above); stop it first:" \
      "$(join "$0" --stop --name "$name" --zone "$zone")" >&2
    exit 3
  fi
fi

# 2. The code: HEAD as a git bundle, fetched and checked out on every worker.
remote="mkdir -p $repo && cd $repo"
if ((sync)); then
  commit="$(git rev-parse HEAD)"
  bundle="resnorm_jax-${commit:0:12}.bundle"  # in the workers' home folders
  local_bundle="${TMPDIR:-/tmp}/$bundle"
  if [[ -n "$(git status --porcelain --untracked-files=no)" ]]; then
    echo "warning: uncommitted changes are not synced: the workers run commit ${commit:0:12}" >&2
  fi
  if ((dry_run)); then join git bundle create "$local_bundle" HEAD; echo
  else git bundle create "$local_bundle" HEAD 2> /dev/null; fi
  gcloud_tpu scp "$local_bundle" "$name:$bundle"
  ((dry_run)) || rm -f "$local_bundle"
  remote+=" && { [ -d .git ] || git init -q; } && git fetch -q ~/$bundle HEAD"
  remote+=" && git -c advice.detachedHead=false checkout -q --force FETCH_HEAD && rm -f ~/$bundle"
  remote+=" && echo \"\$(hostname): at commit \$(git rev-parse --short HEAD)\""
fi

# 3. Setup, then the run, detached, on every worker; each argument quoted for the remote shell.
((setup)) && remote+=" && bash scripts/tpu_worker.sh setup $(q "$setup_python")"
train=(${libtpu_args:+env "$libtpu_args"} "$python" -m experiments.train "--config=$config" "--workdir=$workdir"
  --config.dist.initialize=true "$@")
remote+=" && bash scripts/tpu_worker.sh start $(join "$run" "$workdir" "${train[@]}")"
on_workers "$remote"
((dry_run)) || echo "workdir $workdir; follow the logs with:" \
  "$(join "$0" --tail --name "$name" --zone "$zone")"
