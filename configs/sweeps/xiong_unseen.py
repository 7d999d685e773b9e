"""configs/xiong_rescue.py on corpora nobody tuned it for: does the config as it is train, and
the same config without warmup stay on the plateau, on text it was never run on?

Byte-level text that a Debian machine has but this repository does not ship (install the
packages to rerun: `apt-get install vim-runtime nodejs perl-modules-5.36`; the versions run
here are fingerprinted in docs/xiong_rescue/unseen/corpora.csv):

- vim: Vim 9.0's help files, English technical prose (/usr/share/vim/vim90/doc/*.txt, 9.5 MB);
- nodejs: Node.js's API reference, Markdown prose and JavaScript (/usr/share/doc/nodejs/api/*.md,
  3.5 MB);
- perl: Perl 5.36's pod documentation, English prose (/usr/share/perl/5.36.0/**/*.pod).

Each at the config's own setting (12-layer Post-LN, constant lr 1e-3, 1,500 steps), with its
1,000 warmup steps and with none; seed 0. The held-out split is the tail of the bytes
(data.val_fraction), so each corpus's no-context baseline is its own.

  python scripts/sweep.py --grid=configs/sweeps/xiong_unseen.py --jobs=auto \
      --sweep_dir=docs/xiong_rescue/unseen

Cost: ~6 min per point on one pinned core; 6 points.
"""

CORPORA = {
  "vim": "/usr/share/vim/vim90/doc/*.txt",
  "nodejs": "/usr/share/doc/nodejs/api/*.md",
  "perl": "/usr/share/perl/5.36.0/**/*.pod",
}

GRID = [
  {
    "name": f"{corpus}-L12-constant-lr0.001-w{warmup}-s0",
    "config": "configs/xiong_rescue.py",
    "overrides": {"data.source": "text", "data.path": path, "opt.warmup_steps": warmup},
  }
  for corpus, path in CORPORA.items()
  for warmup in (1000, 0)
]
