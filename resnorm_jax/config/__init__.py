"""Configs: the command line's config file and overrides (cli), and whether two configs are the
same experiment (same_experiment); Python source read as syntax trees (pysource) for the checks
that read code. Imports no other subpackage at module level."""
