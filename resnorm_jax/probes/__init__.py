"""Probes of the model: coordinate checks, reproductions of the papers' measurements, sampling
from a trained run, the golden losses."""
