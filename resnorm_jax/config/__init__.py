"""Configs: the command line's config file and overrides (cli), and whether two configs are the
same experiment (same_experiment). Imports no subpackage but files/ (the floor below)."""
