"""``python -m iron.lm.tune``: run :func:`iron.lm.tune.cli.main` and exit with its code."""

from iron.lm.tune.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
