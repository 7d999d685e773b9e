"""Every word a run's record uses for where a run stands, in one place: its status (how it
ended, summary.json's `status`) and its outcome (the verdict on its loss, `outcome`). Code
that names one imports it from here. No JAX."""

from __future__ import annotations

# status: how the run ended
COMPLETED = "completed"  # it reached train.steps
INTERRUPTED = "interrupted"  # a signal stopped it; its last checkpoint resumes it
FAILED = "failed"  # an error stopped it (a full disk, a fault); its last checkpoint resumes it
DIVERGED = "diverged"  # its loss blew up (a non-finite or far-risen loss): a status and an outcome
STOPPED_EARLY = "stopped_early"  # a stop rule (train.stop_when) stopped it at its k
STATUSES = (COMPLETED, INTERRUPTED, FAILED, DIVERGED, STOPPED_EARLY)
RESUMABLE = (INTERRUPTED, FAILED)  # the same command goes on from the last checkpoint

# outcome: the verdict on its loss at its last step (runs/outcome.py's rule)
TRAINED = "trained"
STUCK = "stuck"
OUTCOMES = (TRAINED, STUCK, DIVERGED)
