"""TensorBoard as a user meets it: the pinned server over two tiny runs (2 and 12 layers),
read through its HTTP data API; and the pieces that name runs and fill HParams."""

import io
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

from resnorm_jax.config import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AXES = ("norm", "norm_position", "residual", "block", "init", "num_layers", "d_model", "lr")
AXES += ("warmup_steps", "schedule", "seed", "final_norm", "outcome")
METRICS = {"eval/loss", "eval/min_loss", "eval/no_context_loss", "train/loss"}
# The HParams table's first five metric columns (hparams.COMPARE), escape_step once it exists.
COMPARE = ["compare/best_periodic_eval_loss", "compare/escape_step", "compare/final_eval_loss"]
COMPARE += ["compare/no_context_loss", "compare/tokens_per_second"]
NAME = r"postnorm_96L-smoke-L{}-steps6-\d{{8}}-\d{{6}}"


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _get(base: str, path: str, body: dict | None = None):
  data = None if body is None else json.dumps(body).encode()
  headers = {"Content-Type": "application/json"} if body is not None else {}
  req = urllib.request.Request(base + path, data=data, headers=headers)
  with urllib.request.urlopen(req, timeout=10) as r:
    raw = r.read()
  return raw if r.headers.get_content_type().startswith("image/") else json.loads(raw)


@pytest.fixture(scope="module")
def board(tmp_path_factory):
  """(base URL, logdir, {layers: run name}): two runs made with default workdir names in
  <tmp>/runs, and the pinned TensorBoard serving <tmp>/runs; stopped on any outcome."""
  tmp = tmp_path_factory.mktemp("tb")
  env = dict(
    os.environ,
    JAX_PLATFORMS="cpu",
    XLA_FLAGS="--xla_backend_optimization_level=0",  # a third of the compile time
    PYTHONPATH=ROOT,
  )
  config = os.path.join(ROOT, "configs", "postnorm_96L.py") + ":smoke"
  for layers in (12, 2):
    proc = subprocess.run(
      [sys.executable, "-m", "experiments.train", f"--config={config}"]
      + [f"--config.model.num_layers={layers}", "--config.train.steps=6"],
      cwd=tmp,  # no --workdir: runs/<name>-<overrides>-<time> under tmp
      env=env,
      capture_output=True,
      text=True,
      timeout=600,  # a 12-layer compile on a loaded 2-core machine
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
  logdir = str(tmp / "runs")
  names = {int(re.search(r"-L(\d+)-", n).group(1)): n for n in os.listdir(logdir)}
  for attempt in range(3):  # a free port can be taken before the server binds it (xdist)
    port = _free_port()
    server = subprocess.Popen(
      [sys.executable, "-m", "tensorboard.main", f"--logdir={logdir}", "--host=127.0.0.1"]
      + [f"--port={port}", "--reload_interval=1"],
      stdout=subprocess.DEVNULL,
      stderr=subprocess.PIPE,
      start_new_session=True,  # its data server child goes with the group
    )
    base = f"http://127.0.0.1:{port}"
    up, deadline = False, time.time() + 45
    while not up and server.poll() is None:
      try:
        _get(base, "/data/plugin/images/tags")
        up = True
      except OSError:
        assert time.time() < deadline, "TensorBoard did not answer in 45 s"
        time.sleep(0.5)
    if up and server.poll() is None:  # this server answered, not another on the port
      break
    err = server.stderr.read().decode()
    assert "already in use" in err and attempt < 2, err[-2000:]
  try:
    deadline = time.time() + 45
    while True:  # both runs' hparams and images loaded
      try:
        groups = _get(base, "/data/plugin/hparams/session_groups", _groups_request())
        images = _get(base, "/data/plugin/images/tags")
        if len(groups["sessionGroups"]) == 2 and len(images) == 2:
          break
      except OSError:
        pass
      assert server.poll() is None, server.stderr.read().decode()[-2000:]
      assert time.time() < deadline, "TensorBoard did not serve both runs in 45 s"
      time.sleep(0.5)
    yield base, logdir, names
  finally:
    try:
      os.killpg(server.pid, signal.SIGTERM)
      server.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
      os.killpg(server.pid, signal.SIGKILL)
      server.wait()


def _groups_request(*col_params) -> dict:
  return {
    "experimentName": "",
    "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"],
    "colParams": list(col_params),
    "startIndex": 0,
    "sliceSize": 100,
  }


@pytest.mark.slow  # board: two training runs and a TensorBoard server
@pytest.mark.long  # the board fixture: runs and a TensorBoard server
def test_runs_are_listed_by_readable_names(board):
  base, _, names = board
  runs = _get(base, "/data/runs")
  assert sorted(runs) == sorted(names.values())  # no `/tb`, no sub-run per run
  assert re.fullmatch(NAME.format(12), names[12]) and re.fullmatch(NAME.format(2), names[2])


@pytest.mark.slow  # the board fixture's runs and server
@pytest.mark.long  # the board fixture: runs and a TensorBoard server
def test_loss_scalars_first_and_tags_bounded_in_depth(board):
  base, _, names = board
  tags = _get(base, "/data/plugin/scalars/tags")
  deep, shallow = set(tags[names[12]]), set(tags[names[2]])
  assert METRICS | {"train/lr", "train/tokens", "train/tokens_per_second"} <= deep
  # the failure-kind diagnostics every run logs, per_layer or not (train_step.py)
  assert {"train/attn_logit_max", "train/output_logit_rms"} <= deep
  stats = {t.split("/")[1] for t in deep if t.startswith("train_layers/")}
  assert {"stream_rms", "attn_branch_rms", "grad_norm_layer", "ffn_out_grad_norm"} <= stats
  stream = sorted(t for t in deep if t.startswith("train_layers/stream_rms/"))
  assert stream == [f"train_layers/stream_rms/layer_{i:03d}" for i in (0, 3, 6, 11)]
  # 2 -> 12 layers adds only a quarter and a middle layer to each statistic: at most 4 per
  # statistic at any depth, the rest fixed.
  assert len(deep) - len(shallow) == 2 * len(stats)
  assert len(deep) <= 14 + len(COMPARE) + 4 * len(stats)
  # The five numbers runs are compared by, then the loss groups: eval/, then train/.
  assert sorted({t.split("/")[0] for t in deep})[:3] == ["compare", "eval", "train"]
  # Each eval card says which eval it is (its info icon).
  info = _get(base, "/data/plugin/scalars/tags")[names[12]]
  assert "Periodic eval" in info["eval/loss"]["description"]
  assert "End-of-run eval" in info["eval/final_loss"]["description"]
  q = urllib.parse.urlencode({"run": names[12], "tag": "train/loss"})
  points = _get(base, f"/data/plugin/scalars/scalars?{q}")  # [[wall time, step, value]]
  assert [p[1] for p in points][-1] == 6 and all(math.isfinite(p[2]) for p in points)


@pytest.mark.slow  # the board fixture's runs and server
@pytest.mark.long  # the board fixture: runs and a TensorBoard server
def test_per_layer_statistics_are_images(board):
  base, _, names = board
  tags = _get(base, "/data/plugin/images/tags")[names[12]]
  assert {"train_depth/stream_rms", "train_depth/grad_norm_layer"} <= set(tags)
  q = urllib.parse.urlencode({"run": names[12], "tag": "train_depth/stream_rms", "sample": 0})
  entries = _get(base, f"/data/plugin/images/images?{q}")
  assert entries[-1]["step"] == 6
  png = _get(base, f"/data/plugin/images/individualImage?{entries[-1]['query']}")
  from PIL import Image

  image = Image.open(io.BytesIO(png))
  assert image.format == "PNG" and image.width > 400 and image.height > 200


@pytest.mark.slow  # the board fixture's runs and server
@pytest.mark.long  # the board fixture: runs and a TensorBoard server
def test_hparams_filter_and_sort_by_final_loss(board):
  base, logdir, names = board
  experiment = _get(base, "/data/plugin/hparams/experiment", {"experimentName": ""})
  infos = {h["name"]: h for h in experiment["hparamInfos"]}
  assert set(AXES) <= set(infos)
  # The axis that differs comes first (the dashboard shows the first five columns).
  assert experiment["hparamInfos"][0]["name"] == "num_layers" and infos["num_layers"]["differs"]
  assert infos["norm_position"]["domainDiscrete"] == ["post"]  # the values seen
  metric_tags = [m["name"]["tag"] for m in experiment["metricInfos"]]
  # The dashboard shows the first five metrics: the compare/ group (no escape step in six
  # steps), then the eval group (eval/final_loss is the end-of-run eval).
  with open(os.path.join(logdir, names[12], "summary.json")) as f:
    escaped = json.load(f)["escape_step"] is not None
  compare = [t for t in COMPARE if escaped or t != "compare/escape_step"]
  assert metric_tags[: len(compare)] == compare
  assert metric_tags[len(compare)] == "eval/final_loss"
  # "norm_position=post, num_layers=12", sorted by final eval loss: the deep run alone.
  groups = _get(
    base,
    "/data/plugin/hparams/session_groups",
    _groups_request(
      {"hparam": "norm_position", "filterDiscrete": ["post"]},
      {"hparam": "num_layers", "filterInterval": {"minValue": 12, "maxValue": 12}},
      {"metric": {"tag": "eval/loss"}, "order": "ORDER_ASC"},
    ),
  )["sessionGroups"]
  assert [g["name"] for g in groups] == [names[12]]
  (group,) = groups
  with open(os.path.join(logdir, names[12], "summary.json")) as f:
    summary = json.load(f)
  assert group["hparams"]["num_layers"] == 12 and group["hparams"]["norm"] == "layernorm"
  assert group["hparams"]["outcome"] == summary["outcome"]
  assert group["sessions"][0]["status"] == "STATUS_SUCCESS"
  metrics = {m["name"]["tag"]: m["value"] for m in group["metricValues"]}
  # of every scalar tag, the end metrics: the end-of-run eval (final_eval_tokens) is
  # eval/final_loss; eval/loss is the last periodic eval, drawn beside its own eval set's
  # no-context loss; compare/ holds the summary's numbers
  metrics = {tag: metrics[tag] for tag in METRICS | {"eval/final_loss"} | set(compare)}
  baseline = summary["heldout_unigram_entropy"]
  rows = [json.loads(line) for line in open(os.path.join(logdir, names[12], "metrics.jsonl"))]
  assert metrics == pytest.approx(
    {
      "eval/final_loss": summary["final_eval_loss"],
      "eval/loss": [r for r in rows if "eval/loss" in r][-1]["eval/loss"],
      "eval/min_loss": summary["best_eval_loss"],
      "eval/no_context_loss": summary["periodic_eval_no_context_loss"],
      "train/loss": summary["final_train_loss"],
      "compare/best_periodic_eval_loss": summary["best_eval_loss"],
      "compare/final_eval_loss": summary["final_eval_loss"],
      "compare/no_context_loss": baseline,
      "compare/tokens_per_second": summary["tokens_per_second"],
    },
    rel=1e-6,  # TensorBoard keeps float32
  )


@pytest.mark.slow  # the board fixture's runs and server
@pytest.mark.long  # the board fixture: runs and a TensorBoard server
def test_custom_scalars_put_the_baseline_on_the_loss_chart(board):
  """The Custom Scalars tab: one layout however many runs wrote it, the loss category
  first, its first chart the periodic eval loss and its no-context baseline, both curves
  there for every run."""
  base, _, names = board
  layout = _get(base, "/data/plugin/custom_scalars/layout")
  assert [c["title"] for c in layout["category"]][0] == "loss"
  assert len({c["title"] for c in layout["category"]}) == len(layout["category"])
  chart = layout["category"][0]["chart"][0]
  regexes = chart["multiline"]["tag"]
  assert regexes == [r"^eval/loss$", r"^eval/no_context_loss$"]
  for run in names.values():
    for regex in regexes:
      q = urllib.parse.urlencode({"run": run, "tag": regex})
      got = _get(base, f"/data/plugin/custom_scalars/scalars?{q}")
      assert got["regex_valid"] and len(got["tag_to_events"]) == 1, (run, regex)
      (points,) = got["tag_to_events"].values()
      assert points[-1][1] == 6


# --- the pieces ----------------------------------------------------------------------------


def test_override_label():
  assert cli.override_label({"model.num_layers": 12, "opt.warmup_steps": 200}) == "L12-warmup200"
  label = cli.override_label(
    {"model.norm_position": "pre", "opt.lr": 2e-4, "mesh.data": 2, "data.path": "/a/b.txt"}
  )
  assert label == "norm_position_pre-lr0.0002-path_b.txt"  # no mesh: where, not what
  assert cli.override_label({}) == ""
  many = cli.override_label({f"model.k{i}": "x" * 20 for i in range(5)})
  assert len(many) <= 70 and many.endswith("-3more")


def test_resume_command_replaces_the_workdir():
  args = ["--config=configs/a.py:smoke", "--workdir", "old", "--config.model.norm=rms norm"]
  assert cli.resume_command(args, "runs/x y") == (
    "python -m experiments.train --config=configs/a.py:smoke "
    "'--config.model.norm=rms norm' '--workdir=runs/x y'"
  )
  assert cli.resume_command(["--workdir=old"], "new").endswith(" --workdir=new")


def test_run_hparams_are_the_config_axes():
  from configs import base
  from resnorm_jax.train import hparams

  config = base.get_config()
  config.model.norm_position = "pre"
  h = hparams.run_hparams(config, {"status": "completed", "outcome": "trained"})
  assert h["norm_position"] == "pre" and h["final_norm"] is True  # auto: on for pre
  assert h["num_layers"] == 6 and h["lr"] == 1e-3 and h["outcome"] == "trained"
  assert hparams.run_hparams(config, {"status": "interrupted"})["outcome"] == "interrupted"
  assert len(hparams.summaries(h, "completed")) == 2  # session start and end


def test_end_line_names_each_eval_beside_its_own_best_and_baseline():
  """'best' is on the periodic eval set, next to the last periodic eval, not next to the
  end-of-run eval (a larger set: its loss can be above the periodic best)."""
  from resnorm_jax.runs import end_line

  summary = {
    "status": "completed",
    "outcome": "trained",
    "steps": 1000,
    "final_train_loss": 2.1264,
    "final_eval_loss": 1.7606,
    "final_eval_tokens": 16384,
    "periodic_eval_loss": 1.7060,
    "periodic_eval_tokens": 8192,
    "best_eval_loss": 1.7060,
    "heldout_unigram_entropy": 3.4619,
    "tokens_per_second": 3533.0,
    "wall_seconds": 598.0,
  }
  line = end_line.end_message(summary, "runs/x", None).splitlines()[0]
  assert "final eval 1.7606 on 16,384 tokens (no-context 3.462)" in line
  assert "periodic eval 1.7060 on 8,192 tokens (best 1.7060)" in line
  old = {k: v for k, v in summary.items() if not k.startswith("periodic_")}
  line = end_line.end_message(old, "runs/x", None).splitlines()[0]  # a summary from before
  assert "final eval 1.7606 on 16,384 tokens" in line and "best periodic eval 1.7060" in line
