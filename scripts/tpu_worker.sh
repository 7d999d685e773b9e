#!/usr/bin/env bash
# The worker side of scripts/launch_tpu_vm.sh: it runs on every worker of a TPU VM slice, in
# the checkout (gcloud ... ssh --worker=all --command "cd <repo> && bash scripts/tpu_worker.sh
# ..."). A slice trains one run at a time (each worker's process holds its TPU chips), so each
# worker records its run in logs/active (process group id, run name, workdir): the guard
# against a second launch, and what stop, status, logs and tail act on.
#
#   setup PYTHON          make .venv with PYTHON (>= 3.11) and install requirements-tpu.txt
#   check                 print "busy: ..." when a run is alive here, else "free: ..."
#   start RUN WORKDIR CMD...  refuse when busy, else run CMD detached (setsid nohup: a dropped
#                         SSH connection does not end it), output to logs/RUN.<hostname>.log
#   stop [SECONDS]        SIGTERM the run (it saves at one step and exits), wait up to SECONDS
#   status                busy or idle, and the log's last line
#   logs                  copy this worker's log to WORKDIR/logs/<hostname>.log now
#   tail                  follow the log
# While a run lives its log is copied to WORKDIR/logs/ every LOG_SYNC_SECONDS (default 300)
# and when it ends: gs:// through `gcloud storage cp`, a shared folder with cp.
set -euo pipefail

ACTIVE=logs/active
host="$(hostname)"
pid="" run="" workdir=""

read_active() {
  [[ -f "$ACTIVE" ]] || return 0
  { read -r pid && read -r run && read -r workdir; } < "$ACTIVE" || true
}

# The recorded run is alive: its leader (this script's detached `_run`) still exists. The
# command line check keeps a stale record from matching a reused process id.
alive() {
  [[ -n "$pid" ]] && kill -0 "$pid" 2> /dev/null \
    && grep -qa tpu_worker "/proc/$pid/cmdline" 2> /dev/null
}

log_of() { echo "logs/$1.$host.log"; }

copy_log() {  # RUN WORKDIR: this worker's log into the shared workdir (never fails the run)
  local src dst
  src="$(log_of "$1")" dst="$2/logs/$host.log"
  [[ -f "$src" ]] || return 0
  if [[ "$2" == gs://* ]]; then
    gcloud storage cp --quiet "$src" "$dst" > /dev/null 2>&1 || echo "warning: could not copy $src to $dst"
  else
    { mkdir -p "$2/logs" && cp "$src" "$dst"; } || echo "warning: could not copy $src to $dst"
  fi
}

cmd_setup() {
  local py="$1" version
  if ! command -v "$py" > /dev/null && [[ "$py" =~ ^python3\.[0-9]+$ ]] && command -v apt-get > /dev/null; then
    echo "$host: installing $py (apt-get)"
    sudo apt-get install -y -q "$py" "$py-venv" > /dev/null
  fi
  command -v "$py" > /dev/null || { echo "error: $host: no $py here" >&2; return 2; }
  version="$("$py" -c 'import platform; print(platform.python_version())')"
  "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
    echo "error: $host: $py is Python $version; JAX 0.10.2 needs >= 3.11: give" \
      "--python=python3.11 (TPU Ubuntu 22.04 images ship 3.10)" >&2
    return 2
  }
  # A .venv made earlier with an older Python cannot take the requirements: make it again.
  if [[ -x .venv/bin/python ]] && ! .venv/bin/python -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    rm -rf .venv
  fi
  "$py" -m venv .venv
  .venv/bin/pip install -q -r requirements-tpu.txt
  echo "$host: .venv with Python $version and requirements-tpu.txt"
}

cmd_check() {
  read_active
  if alive; then echo "busy: $host runs $run (pid $pid)"; else echo "free: $host"; fi
}

cmd_start() {
  local new_run="$1" new_workdir="$2" log
  shift 2
  read_active
  if alive; then
    echo "busy: $host runs $run (pid $pid): not started; stop it first (--stop)" >&2
    return 3
  fi
  mkdir -p logs
  log="$(log_of "$new_run")"
  {
    echo "== $(date -u +%FT%TZ) $host: $new_run, commit $(git rev-parse HEAD 2> /dev/null || echo unknown)"
    echo "== $(printf '%q ' "$@")"
  } >> "$log"
  setsid nohup bash scripts/tpu_worker.sh _run "$new_run" "$new_workdir" "$@" >> "$log" 2>&1 < /dev/null &
  printf '%s\n%s\n%s\n' "$!" "$new_run" "$new_workdir" > "$ACTIVE"
  echo "$host: started $new_run, log $PWD/$log"
}

# Detached (the leader of its own session and process group): runs CMD, copies the log.
cmd_run() {
  local rc=0 child t=0 every="${LOG_SYNC_SECONDS:-300}"
  run="$1" workdir="$2"
  shift 2
  printf '%s\n%s\n%s\n' "$$" "$run" "$workdir" > "$ACTIVE"  # this process, whatever setsid did
  # stop signals the whole group: the run saves on its own; this script waits for it.
  trap 'echo "$(date +%T) $host: SIGTERM: the run saves at one step and stops"' TERM
  "$@" &
  child=$!
  while kill -0 "$child" 2> /dev/null; do
    sleep 1 || true
    ((++t % every)) || copy_log "$run" "$workdir"
  done
  wait "$child" || rc=$?
  echo "== $(date -u +%FT%TZ) $host: $run exited with status $rc"
  copy_log "$run" "$workdir"
  exit "$rc"
}

cmd_stop() {
  local timeout="${1:-300}" i
  read_active
  alive || { echo "$host: nothing running"; return 0; }
  kill -TERM -- "-$pid"
  echo "$host: SIGTERM to $run (pid $pid): it saves at one step and stops"
  for ((i = 0; i < timeout; i++)); do
    alive || { echo "$host: $run stopped"; return 0; }
    sleep 1
  done
  echo "$host: $run still running after ${timeout}s; to end it without saving:" \
    "kill -KILL -- -$pid" >&2
  return 1
}

cmd_status() {
  read_active
  [[ -n "$run" ]] || { echo "$host: idle, no run launched here"; return 0; }
  local last
  last="$(tail -n 1 "$(log_of "$run")" 2> /dev/null || true)"
  if alive; then echo "$host: running $run (pid $pid) into $workdir | $last"
  else echo "$host: idle; last run $run | $last"; fi
}

cmd_logs() {
  read_active
  [[ -n "$run" ]] || { echo "error: $host: no run launched here" >&2; return 2; }
  copy_log "$run" "$workdir"
  echo "$host: $(log_of "$run") -> $workdir/logs/$host.log"
}

cmd_tail() {
  read_active
  [[ -n "$run" ]] || { echo "error: $host: no run launched here" >&2; return 2; }
  tail -n 50 -F "$(log_of "$run")"
}

mode="${1:-}"
shift || true
case "$mode" in
  setup) cmd_setup "${1:-python3}" ;;
  check) cmd_check ;;
  start) (($# >= 3)) || { echo "error: start RUN WORKDIR CMD..." >&2; exit 2; }; cmd_start "$@" ;;
  _run) cmd_run "$@" ;;
  stop) cmd_stop "$@" ;;
  status) cmd_status ;;
  logs) cmd_logs ;;
  tail) cmd_tail ;;
  *) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
