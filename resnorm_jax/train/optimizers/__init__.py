"""The optimizer from the config's `opt` section, one concept per module:

  checks.py      the opt section's checks (names and ranges), before anything is built
  schedules.py   the learning-rate schedule: warmup, then constant, inverse_sqrt, cosine, linear
  masks.py       which leaves are decayed (matrices only) and which are hidden matrices
  adam_atan2.py  Adam-atan2's step
  muon.py        Muon's step on the hidden matrices, Adam on every other leaf
  scaling.py     the depth and width parametrizations' per-group eps, lr and weight decay
  group_table.py what those do to each parameter, as a table
  build.py       make_optimizer: the chain the config names

opt.name: adam, adamw (optax's), sgd, and

  muon        Muon (Jordan et al. 2024, code KellerJordan/Muon; `muon.muon_step`): the hidden
              matrices (inside the layer stack, 2-D per layer: attention's q, k, v, out and
              gate, the FFN's) step along their Nesterov momentum orthogonalized by 5
              Newton-Schulz iterations, one layer's matrix at a time; every other leaf
              (embeddings, head, norms' and residuals' vectors and scalars) takes Adam with
              opt.b1, b2, eps, as KellerJordan/Muon's MuonWithAuxAdam does.
  adam_atan2  Adam-atan2 (Everett et al. 2024, arXiv 2407.05872;
              `adam_atan2.scale_by_adam_atan2`): Adam's m_hat / (sqrt(v_hat) + eps) replaced
              by a atan2(m_hat, b sqrt(v_hat)), a = 4/pi, b = 1: no eps.

Both take their weight decay decoupled, as adamw (lr * wd * p on the matrices).
"""
