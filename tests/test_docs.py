"""Every number the docs quote to three decimals is in a data file the same section cites.

docs/results.md and the README quote losses as 3.249; each section (a `## ` heading to the
next) names the files its numbers come from (`docs/deepnet_panel/runs/results.csv`, a run
folder, a glob such as `docs/runs/*_96L/`). Each such number must be the rounding of a value
in a committed (git ls-files) csv, json, jsonl or txt file under one of the paths its section
cites: a typo, a misrounding (3.2455 quoted as 3.246), a number from a run that was never
committed, or a section that cites nothing fails here. A curve (metrics.jsonl) counts only
where its own run folder is cited: a sweep folder's hundreds of curve values would match
almost any loss. It cannot tell that a number is quoted for the right run of a cited file.
A docs page may cite relative to its own folder (docs/stabilizers/README.md's `cells.csv`,
`runs/<name>/`, a Markdown link). Generated text is not read: a section between
`<!-- NAME: written by ... -->` and `<!-- end of NAME -->` and a `<!-- fact:... -->` span are
checked against their data by scripts/claims.py, and generated pages (docs/*/results.md,
boundary.md) are written from their csv by code. Every other docs/ page is checked here.
"""

import fnmatch
import json
import math
import os
import re
import subprocess

import pytest

from resnorm_jax.analysis.doc_sections import FACT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_SUFFIXES = (".csv", ".json", ".jsonl", ".txt")
DOCS = ("README.md", "docs/results.md")
NUMBER = re.compile(r"-?\d+\.\d+(?:[eE][-+]?\d+)?|-?\d+[eE][-+]?\d+")
# 3.249 and -0.779 (a sign is part of the number); not 1e-3, 2.5e-4, 3.125e-5 or 0.0625, nor
# the lr in a run's name (postnorm-L12-lr0.001-s0)
QUOTED = re.compile(r"(?<![\w.])-?\d+\.\d{3}(?!\d|[eE][-+]?\d)")
CITED = re.compile(r"docs/[\w./*{},-]+")
BACKTICKED = re.compile(r"`([\w./*{},-]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
# A generated section (its body: group 2) between the markers resnorm_jax/analysis/claims
# modules write; a fact's text is doc_sections.FACT's group 2.
GENERATED = re.compile(r"<!-- ([^:>]+): written by [^>]*-->(.*?)<!-- end of \1 -->", re.S)


def data_values(texts) -> set[float]:
  """Every finite number in the texts (a file's contents each), rounded to 3 decimals."""
  numbers = (float(t) for text in texts for t in NUMBER.findall(text))
  return {round(x, 3) for x in numbers if math.isfinite(x)}


def unbacked(text: str, values: set[float]) -> list[tuple[int, str]]:
  """(line, number) of each 3-decimal number in `text` that no data value rounds to."""
  return [
    (text.count("\n", 0, m.start()) + 1, m.group())
    for m in QUOTED.finditer(text)
    if round(float(m.group()), 3) not in values
  ]


def _braces(pattern: str) -> list[str]:
  """Shell brace expansion: docs/{a,b}/x -> docs/a/x, docs/b/x."""
  m = re.search(r"\{([^{}]*)\}", pattern)
  if not m:
    return [pattern]
  head, tail = pattern[: m.start()], pattern[m.end() :]
  return [p for alt in m.group(1).split(",") for p in _braces(head + alt + tail)]


def _relative(text: str, folder: str) -> list[str]:
  """The paths `text` cites relative to its doc's folder: a backticked `runs.csv`,
  `runs/<name>/` or `../perf/x.json` (one with a / or a data file's suffix) and a Markdown
  link's target, each joined to `folder` (docs/<axis>)."""
  ticked = [t for t in BACKTICKED.findall(text) if "/" in t or t.endswith(DATA_SUFFIXES)]
  linked = [t.partition("#")[0] for t in LINK.findall(text) if not re.match(r"[a-z]+:|#", t)]
  out = []
  for t in ticked + linked:
    if t and not t.startswith(("docs/", "/")):
      path = os.path.normpath(os.path.join(folder, t))
      out.append(path + "/" if t.endswith("/") else path)
  return out


def cited_files(text: str, files: list[str], folder: str = "") -> list[str]:
  """The files (repository-relative) under the docs/ paths, folders or globs `text` cites,
  and under those it cites relative to `folder`, its doc's own folder."""
  cites = CITED.findall(text) + (_relative(text, folder) if folder else [])
  patterns = {p.rstrip(".,/") for c in cites for p in _braces(c)}
  return [f for f in files if any(_covers(p, f) for p in patterns)]


def _covers(pattern: str, f: str) -> bool:
  """A cited file, glob or folder covers `f`; a curve (*.jsonl, hundreds of values) only when
  the folder of its own run is cited, not a sweep folder above it."""
  if f == pattern or fnmatch.fnmatch(f, pattern):
    return True
  if f.endswith(".jsonl"):
    return fnmatch.fnmatch(os.path.dirname(f), pattern)
  return f.startswith(pattern + "/") or fnmatch.fnmatch(f, pattern + "*")


def sections(text: str) -> list[tuple[int, str]]:
  """(first line, text) of each part from one `## ` heading to the next (and the head)."""
  out, line = [], 1
  for part in re.split(r"\n(?=## )", text):
    out.append((line, part))
    line += part.count("\n") + 1
  return out


def hand_written(text: str) -> str:
  """`text` without its generated parts, each line kept (blank) so that line numbers hold: the
  body of a section between `<!-- NAME: written by ... -->` and `<!-- end of NAME -->` and a
  fact's text, `<!-- fact:NAME -->...<!-- /fact -->`. scripts/claims.py checks both against
  the data they are written from (resnorm_jax/analysis/doc_sections.py)."""
  for pattern in (GENERATED, FACT):
    text = pattern.sub(_blank_body, text)
  return text


def _blank_body(m: re.Match) -> str:
  """The match with its group 2 (a section's body, a fact's text) reduced to its newlines."""
  start, end = m.start(2) - m.start(), m.end(2) - m.start()
  whole = m.group()
  return whole[:start] + "\n" * whole.count("\n", start, end) + whole[end:]


def unbacked_in_doc(
  text: str, files: list[str], read, doc: str = "README.md"
) -> list[tuple[int, str]]:
  """(line, number) of each hand-written quoted number (not in a generated section or fact)
  not in the data files its own section cites, by path or (`runs.csv`) relative to `doc`."""
  out = []
  folder = os.path.dirname(doc)
  for first, part in sections(hand_written(text)):
    data = [f for f in cited_files(part, files, folder) if f.endswith(DATA_SUFFIXES)]
    values = data_values(read(f) for f in data)
    out += [(first + line - 1, n) for line, n in unbacked(part, values)]
  return out


def test_the_check_finds_a_number_its_section_does_not_back():
  files = ["docs/a/run1/summary.json", "docs/b/results.csv", "docs/b/curve.png"]
  contents = {files[0]: '{"final_eval_loss": 3.24912, "lr": 1e-3}', files[1]: "x\n2.5081\nnan"}
  doc = (
    "# head\nno numbers\n\n## One\nstuck 3.249 (`docs/a/run1/`)\n\n"
    "## Two\n2.508 and 3.249 (`docs/{b,c}/results.csv`)\n\n## Three\n2.508, cites nothing\n"
  )
  got = unbacked_in_doc(doc, files, contents.__getitem__)
  assert got == [(8, "3.249"), (11, "2.508")]  # 3.249 is in a file Two does not cite
  assert cited_files("(`docs/a/*/summary.json`).", files) == [files[0]]
  curve = "docs/sweep/run1/metrics.jsonl"
  assert cited_files("`docs/sweep/run1`", [curve]) == [curve]
  assert cited_files("`docs/sweep/*`", [curve]) == [curve]
  assert cited_files("`docs/sweep/`", [curve]) == []  # a sweep folder: not its curves
  # the sign is part of a number; a 3-decimal mantissa of an lr is no loss
  values = data_values(["-0.7791, 0.6982, 3.125e-05"])
  assert unbacked("slopes -0.779 and -0.698 at lr 3.125e-5", values) == [(1, "-0.698")]
  assert unbacked("`postnorm-L12-lr0.001-s0`", values) == []  # an lr in a run's name


def test_the_check_reads_citations_relative_to_the_doc_and_skips_generated_text():
  files = ["docs/ax/runs.csv", "docs/ax/runs/r1/summary.json", "docs/perf/t.json", "docs/runs.csv"]
  contents = dict(
    zip(files, ["1.2341", '{"final_eval_loss": 2.5081}', "0.125", "4.4441"], strict=True)
  )
  doc = (
    "# Axis\n1.234 (`runs.csv`), 2.508 (`runs/r1/`), 0.125 ([t](../perf/t.json)).\n\n"
    "## Bare\n1.234 from runs.csv, unticked; 4.444 in `docs/runs.csv`.\n\n"
    "## Made\n<!-- table: written by scripts/claims.py from runs.csv -->\n| 9.876 |\n"
    "<!-- end of table -->\nloss <!-- fact:loss:docs/ax/runs/r1 -->9.875<!-- /fact --> "
    "and 9.874 by hand\n<!-- other: written by x -->\n9.873\n<!-- end of table -->\n"
  )
  got = unbacked_in_doc(doc, files, contents.__getitem__, "docs/ax/README.md")
  # 9.873: its markers do not pair (the end of another section), so it is read as hand-written
  assert got == [(5, "1.234"), (11, "9.874"), (13, "9.873")]
  # the same text in the top README: a name relative to the root is no docs/ data file
  top = unbacked_in_doc(doc, files, contents.__getitem__)
  assert [(2, "1.234"), (2, "2.508"), (2, "0.125")] == top[:3]
  blanked = hand_written(doc)
  assert blanked.count("\n") == doc.count("\n") and "9.876" not in blanked


def _committed_files() -> list[str]:
  try:
    out = subprocess.run(
      ["git", "ls-files", "docs"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
  except (OSError, subprocess.CalledProcessError) as e:
    pytest.fail(f"git ls-files docs failed in {ROOT}: {e}")
  return out.split()


def _read(path: str) -> str:
  with open(os.path.join(ROOT, path), encoding="utf-8") as f:
    return f.read()


@pytest.mark.parametrize("doc", DOCS)
def test_every_quoted_number_is_in_a_data_file_its_section_cites(doc):
  files = _committed_files()
  assert len(files) > 100, f"only {len(files)} committed files under docs/"
  text = _read(doc)
  # the README's numbers are all in its generated sections now (checked by scripts/claims.py);
  # docs/results.md still has prose numbers of its own: the check must read some there
  if doc != "README.md":
    assert QUOTED.search(hand_written(text)), f"{doc} writes no 3-decimal number: nothing read"
  missing = unbacked_in_doc(text, files, _read, doc)
  assert not missing, (
    f"{doc}: (line, number) in no committed data file that its section cites: {missing}"
  )


# The reference pages the README links to: their numbers are checked the same way (they may
# quote none), and every page's relative links must resolve.
PAGES = (
  "CONTRIBUTING.md",
  "docs/usage.md",
  "docs/data.md",
  "docs/clusters.md",
  "docs/tensorboard.md",
)


@pytest.mark.parametrize("doc", PAGES)
def test_every_quoted_number_in_a_reference_page_is_in_a_data_file(doc):
  missing = unbacked_in_doc(_read(doc), _committed_files(), _read, doc)
  assert not missing, (
    f"{doc}: (line, number) in no committed data file its section cites: {missing}"
  )


# Pages a script writes from its data (rewriting them is their check): each sweep's results.md
# beside its results.csv (resnorm_jax/runs/sweep_results.py), boundary.md beside boundary.csv
# (resnorm_jax/analysis/boundary.py), and these two.
DERIVED = (
  "docs/early_warning/README.md",  # scripts/early_warning.py
  "docs/early_warning/init_or_data.md",  # scripts/init_or_data.py
)


def hand_written_pages(files: list[str]) -> list[str]:
  """Every docs/ Markdown page (of the committed `files`) written by hand: none inside a run
  folder (one that holds a summary.json), none a script writes (DERIVED)."""
  have = set(files)
  runs = {os.path.dirname(f) for f in files if os.path.basename(f) == "summary.json"}

  def derived(f: str) -> bool:
    stem, name = os.path.split(f)
    beside = {"results.md": "results.csv", "boundary.md": "boundary.csv"}.get(name)
    return f in DERIVED or (beside is not None and f"{stem}/{beside}" in have)

  return [
    f
    for f in files
    if f.endswith(".md") and not any(f == r or f.startswith(r + "/") for r in runs)
    if not derived(f)
  ]


def _listed() -> list[str]:
  """The committed docs/ files at collection time; none where git cannot list them (the test
  of the pages then fails, below)."""
  try:
    out = subprocess.run(["git", "ls-files", "docs"], cwd=ROOT, capture_output=True, text=True)
  except OSError:
    return []
  return out.stdout.split() if out.returncode == 0 else []


HAND_WRITTEN = hand_written_pages(_listed())


def test_the_hand_written_pages_are_found():
  files = [
    "docs/a/README.md",
    "docs/a/notes.md",
    "docs/a/runs/results.md",
    "docs/a/runs/results.csv",
    "docs/a/runs/r1/summary.json",
    "docs/a/runs/r1/notes.md",
    "docs/a/boundary.md",
    "docs/a/boundary.csv",
    "docs/a/results.md",
    "docs/width/README.md",
    "docs/early_warning/README.md",
  ]
  assert hand_written_pages(files) == [
    "docs/a/README.md",
    "docs/a/notes.md",
    "docs/a/results.md",
    "docs/width/README.md",
  ]
  assert {
    "docs/stabilizers/README.md",
    "docs/variants.md",
    "docs/results.md",
    "docs/width/README.md",
    "docs/depth_transfer/README.md",
  } <= set(HAND_WRITTEN)
  assert "docs/early_warning/README.md" not in HAND_WRITTEN  # written by scripts/early_warning.py


@pytest.mark.parametrize("doc", [p for p in HAND_WRITTEN if p not in DOCS + PAGES])
def test_every_quoted_number_in_a_docs_page_is_in_a_data_file_its_section_cites(doc):
  missing = unbacked_in_doc(_read(doc), _committed_files(), _read, doc)
  assert not missing, (
    f"{doc}: (line, number) in no committed data file its section cites (a docs/ path or one "
    f"relative to its folder, outside generated sections and facts): {missing}"
  )


def slug(heading: str) -> str:
  """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to -."""
  text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
  return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
  """A page's link targets: its headings' slugs and its explicit `<a id="...">` anchors (the
  generated table of claims in docs/results.md)."""
  body = re.sub(r"```.*?```", "", text, flags=re.S)  # a `# comment` in a code block is no heading
  headings = {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", body, flags=re.M)}
  return headings | set(re.findall(r'<a id="([^"]+)"></a>', body))


def broken_links(doc: str, text: str, exists, read) -> list[str]:
  """Each relative link of `doc` whose file does not exist or whose #anchor is no heading
  of its target."""
  out = []
  for target in LINK.findall(re.sub(r"```.*?```", "", text, flags=re.S)):
    if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
      continue
    path, _, anchor = target.partition("#")
    full = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
    if not exists(full):
      out.append(target)
    elif anchor and full.endswith(".md") and anchor not in anchors(read(full)):
      out.append(target)
  return out


def test_the_link_check_finds_a_missing_file_and_anchor():
  pages = {
    "README.md": "# T\n## Quick start\n",
    "docs/a.md": '# A\n```\n# not a heading\n```\n| <a id="row-1"></a>one |\n',
  }
  text = (
    "[q](#quick-start) [a](docs/a.md#a) [x](docs/x.md) [n](docs/a.md#not-a-heading) "
    "[r](docs/a.md#row-1) [s](docs/a.md#row-2)"
  )
  got = broken_links("README.md", text, pages.__contains__, pages.__getitem__)
  assert got == ["docs/x.md", "docs/a.md#not-a-heading", "docs/a.md#row-2"]
  assert (
    broken_links("docs/a.md", "[r](../README.md#t)", pages.__contains__, pages.__getitem__) == []
  )


@pytest.mark.parametrize("doc", ("README.md", "CHANGELOG.md", *PAGES, "docs/results.md"))
def test_every_relative_link_resolves(doc):
  exists = lambda p: os.path.exists(os.path.join(ROOT, p))  # noqa: E731
  assert not broken_links(doc, _read(doc), exists, _read), doc


def _section(text: str, heading: str) -> str:
  return next(part for _, part in sections(text) if part.startswith(f"## {heading}\n"))


def _commands(section: str) -> list[str]:
  blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
  return [line for b in blocks for line in b.strip().splitlines()]


def test_the_quickstart_claims_hold():
  """Each claim of the README's Quickstart against the code: one .venv, a fixed workdir that
  the same command resumes and the sample command reads, the progress and end lines in the
  loop's formats, the error from another folder."""
  from configs import postnorm_96L
  from resnorm_jax.analysis.claims import main_job
  from resnorm_jax.config import cli
  from resnorm_jax.runs import expected

  quick = _section(_read("README.md"), "Quickstart")
  flat = " ".join(quick.split())  # prose, whatever its line breaks
  commands = _commands(quick)
  assert sum("-m venv" in c for c in commands) == 1  # the tests reuse the main job's .venv
  train = next(c for c in commands if "experiments.train" in c)
  workdir = re.search(r"--workdir=(\S+)", train).group(1)
  sample = next(c for c in commands if "experiments.sample" in c)
  assert f"--workdir={workdir}" in sample
  assert f"writes `{workdir}/`" in flat
  loop_src = _read("resnorm_jax/train/loop.py")
  assert "already completed at step {done['steps']}: nothing to do" in loop_src
  assert "already completed at step 200: nothing to do" in flat
  c = postnorm_96L.get_config()
  assert (c.train.steps, c.train.log_every, c.train.eval_every) == (200, 10, 50)
  assert (c.opt.lr, c.opt.warmup_steps, c.model.num_layers) == (1e-3, 0, 96)
  assert "progress line every 10 steps, an eval every 50" in flat
  progress = re.search(r"^step .*$", quick, flags=re.M).group()
  assert re.fullmatch(
    r"step +\d+/200 \| loss \d\.\d{4} \| lr 1\.00e-03 \| [\d,]+ tok/s \| ETA \d+m\d\ds", progress
  )
  # The sample is the committed run of this very command, printed by the run's own lines
  # (claims/main_job.py; scripts/claims.py checks it is what the run's records give).
  assert main_job.render() in quick
  run = json.loads(_read(os.path.join(main_job.RUN, "config.json")))
  assert run["name"] == c.name and run["model"]["num_layers"] == c.model.num_layers
  assert (run["opt"]["lr"], run["train"]["steps"]) == (c.opt.lr, c.train.steps)
  assert main_job.WORKDIR == workdir
  summary = json.loads(_read(os.path.join(main_job.RUN, "summary.json")))
  declared, _ = expected.for_config_file(os.path.join(ROOT, "configs", "postnorm_96L.py"))
  assert summary["expected"] == expected.record(declared, summary["outcome"])
  with pytest.raises(ValueError) as e:
    cli._refuse_missing_config_file(["--config=configs/nope_96L.py"])
  assert f"`error: {str(e.value).replace('nope_96L', 'postnorm_96L')}`" in flat
