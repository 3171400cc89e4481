"""``python -m iron.lm``: the ``iron-lm`` command line."""

from iron.lm.cli import main

raise SystemExit(main())
