"""The build backend of pyproject.toml: setuptools' own, for an editable install only.

`pip install -e .` (requirements.txt) makes the checkout importable from anywhere:
resnorm_jax, the named configs (configs/) and the entry points (experiments/) by name, with
the repository's scripts/ and data/ where the code looks for them. A regular wheel would put
generic top-level packages `configs` and `experiments` into site-packages and leave scripts/
and data/ behind, so building one is refused with one line saying what to run instead. An
sdist is still built (setuptools' build_sdist).
"""

import sys

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 (every other hook: setuptools' own)

MESSAGE = (
  "error: resnorm_jax installs only as an editable checkout: run `pip install -e .` "
  "(or `pip install -r requirements.txt`) in the repository; `pip install .` is not supported"
)


def _refuse() -> None:
  print(MESSAGE, file=sys.stderr, flush=True)
  raise SystemExit(1)


def get_requires_for_build_wheel(config_settings=None):
  """Refused: a regular (non-editable) install."""
  _refuse()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
  """Refused: a regular (non-editable) install."""
  _refuse()


# the editable install's hooks, named so that a reader sees them kept
build_editable = _setuptools.build_editable
get_requires_for_build_editable = _setuptools.get_requires_for_build_editable
prepare_metadata_for_build_editable = _setuptools.prepare_metadata_for_build_editable
