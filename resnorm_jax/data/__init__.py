"""Data: corpora (stdlib, text, token files, Hugging Face), token files and their manifests,
batches, the held-out split and its no-context (unigram) baseline, data preparation.
Imports `config` only."""
