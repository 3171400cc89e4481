"""``python -m iron.lm``: the ``iron-lm`` command line."""

import sys

try:
    from iron.lm.cli import main
except KeyboardInterrupt:  # Ctrl-C while Python imports: no traceback
    print("iron-lm: error: interrupted", file=sys.stderr)
    raise SystemExit(130) from None

raise SystemExit(main())
