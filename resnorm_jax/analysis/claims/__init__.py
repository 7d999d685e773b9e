"""The README's Results section, docs/results.md's full row of each claim and its facts, written
from the committed data: every number in them is computed from a file under docs/, so a number
and its sentence cannot disagree.

Each axis's rows live in a module of this package named for its axis (width.py beside
resnorm_jax/analysis/width.py, ...), which declares them: `README_ROWS` ({place in the table:
row function returning a docs_data.Claim, the claim in full and in a few words}) and, for
numbers in docs/results.md's prose, `FACTS`. readme.py finds every module here, so a new axis
publishes by adding its module and its data. No JAX.
"""
