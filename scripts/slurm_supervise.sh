# shellcheck shell=bash
# Sourced by the SLURM batch scripts (scripts/slurm_gpu.sbatch, and the job arrays that
# `scripts/sweep.py --submit=slurm` writes) from the repository root, inside a job:
#
#   supervise JOB SUMMARY CMD...
#
# Runs CMD (an srun) in the background and waits for it. USR1 (sbatch --signal=B:USR1@S:
# the time limit is S seconds away) and TERM (scancel, a preemption) become one SIGTERM to
# CMD, which srun forwards to every task: the training processes agree on a step, save,
# write status "interrupted" to SUMMARY and exit. After USR1, a run that says "interrupted"
# is requeued with `scontrol requeue JOB` and resumes from its checkpoint when it starts
# again; after TERM, SLURM decides (a preempted --requeue job is requeued by SLURM itself).
# Returns CMD's exit status.

_supervised_pid=""
_requeue_asked=0

_supervise_stop() {  # USR1 or TERM: the processes save at one step and exit
  echo "$(date +%T) $1: SIGTERM to the training processes"
  [[ "$1" == USR1 ]] && _requeue_asked=1
  kill -TERM "$_supervised_pid" 2> /dev/null || true
}

supervise() {
  local job="$1" summary="$2" rc
  shift 2
  _requeue_asked=0
  trap '_supervise_stop USR1' USR1
  trap '_supervise_stop TERM' TERM
  "$@" &
  _supervised_pid=$!
  while :; do  # a trapped signal ends `wait` early: wait again until CMD has exited
    rc=0
    wait "$_supervised_pid" || rc=$?
    kill -0 "$_supervised_pid" 2> /dev/null || break
  done
  if ((_requeue_asked)) && grep -q '"status": "interrupted"' "$summary" 2> /dev/null; then
    echo "$(date +%T) requeueing job $job: it resumes from $(dirname "$summary")"
    scontrol requeue "$job"
  fi
  return "$rc"
}
