"""What a run prints as it goes: the ETA's rate over a window of steps, the end-of-run eval's
token count as the eval scores it."""

import pytest

from resnorm_jax.train import run_log


def test_the_eta_takes_the_rate_of_the_last_hundred_steps_not_the_last_interval():
  # ten steps a second for 200 steps, then one slow interval of 10 steps (another process)
  recent = [(1.0, 10)] * 20 + [(4.0, 10)]
  eta = run_log.eta_seconds(recent, remaining=1000)
  # the newest 100 steps: 9 intervals of 1 s and the slow one of 4 s -> 13 s per 100 steps
  assert eta == pytest.approx(1000 * 13.0 / 100)
  assert run_log.eta_seconds([(4.0, 10)], remaining=1000) == pytest.approx(400.0)  # the last alone
  assert eta < 0.5 * run_log.eta_seconds([(4.0, 10)], remaining=1000)


def test_the_eta_uses_every_interval_when_fewer_than_the_window_and_none_is_zero():
  assert run_log.eta_seconds([(2.0, 10), (4.0, 30)], remaining=20) == pytest.approx(20 * 6.0 / 40)
  assert run_log.eta_seconds([], remaining=50) == 0.0
  assert run_log.eta_seconds([(3.0, 100), (1.0, 100)], remaining=100) == pytest.approx(1.0)


def test_the_end_of_run_eval_counts_whole_batches_of_the_config():
  """nanogpt_char (batch 12 x 64): 16,384 tokens asked, 22 batches scored, 16,896 tokens: the
  held-out warning quotes the 16,896."""
  from configs import nanogpt_char
  from resnorm_jax.train import eval_budget

  t = nanogpt_char.get_config().train
  assert eval_budget.final_eval_batches(t) == 22
  assert eval_budget.eval_tokens(t)["final"] == 16_896
