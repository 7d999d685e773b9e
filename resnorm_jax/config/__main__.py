"""python -m resnorm_jax.config [PREFIX] (or resnorm-config [PREFIX]): every config key with
its default and description (resnorm_jax/config/schema.py), or only the keys that start with
PREFIX (e.g. model.)."""

import sys

from resnorm_jax.config import schema


def main(argv: list[str]) -> int:
  if len(argv) > 1 and argv[1] in ("-h", "--help", "-?", "--helpfull", "--helpshort"):
    print(__doc__.strip())
    return 0
  prefix = argv[1] if len(argv) > 1 else ""
  rows = [r for r in schema.describe() if r[0].startswith(prefix)]
  if not rows:
    print(f"no config key starts with {prefix!r}", file=sys.stderr)
    return 2
  width = max(len(k) for k, _, _ in rows)
  for key, default, text in rows:
    print(f"{key:<{width}}  {default!r:<14}  {text}")
  return 0


def cli_main() -> None:
  """The console command resnorm-config (pyproject.toml)."""
  sys.exit(main(sys.argv))


if __name__ == "__main__":
  cli_main()
