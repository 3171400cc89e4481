"""The default test command's wall time, session by session, for BENCHMARKS.md.

``noxfile.py`` writes each session's wall time to ``.nox/session-times.json``
as the session ends (its latest run per session: seconds since the session
before it ended, so its virtualenv's creation counts; the session function's
own seconds; passed or failed; its posargs; whether nox reused virtualenvs).
This module reads that file and renders the sessions of the default list
(``python3 -m nox``) in their order. A session run with posargs (a targeted
run) or with ``--install-only`` (no test ran) is not the default run's and
is shown as missing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: Where ``noxfile.py`` writes the times (relative to the repository root).
TIMES = Path(".nox") / "session-times.json"


def load(root: Path) -> dict[str, Any] | None:
    """The recorded times under ``root``, or None when nox has written none."""
    path = root / TIMES
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("sessions"), dict):
        return None
    return data


def rows(data: dict[str, Any]) -> tuple[list[list[Any]], float]:
    """One row per default session, in order, and the default run's total seconds.

    A session without a default-run record (never run, or last run with
    posargs) shows a dash and adds nothing to the total.
    """
    sessions = data.get("sessions", {})
    found, total = [], 0.0
    for name in data.get("default") or sorted(sessions):
        r = sessions.get(name)
        if r is None or r.get("posargs") or r.get("install_only"):
            found.append([name, "-", "-", "not recorded (no default run)", "-"])
            continue
        total += float(r["seconds"])
        found.append(
            [
                name,
                f"{r['seconds']:.0f}",
                f"{r['body_s']:.0f}",
                r["status"] + (", virtualenv reused" if r.get("reused") else ""),
                r.get("ended", "-"),
            ]
        )
    return found, total


COLUMNS = ["session", "wall s", "installs + tests s", "status", "ended"]


def section(data: dict[str, Any] | None) -> list[str]:
    """BENCHMARKS.md's lines for the test time by session (a heading, text, a table)."""
    lines = ["## Test time by session (`python3 -m nox`)", ""]
    if data is None:
        return lines + [
            f"Not recorded: no `{TIMES}` (run `python3 -m nox` before the bench; "
            f"noxfile.py writes each session's time as it ends).",
            "",
        ]
    found, total = rows(data)
    lines += [
        f"Each session's latest wall time as `noxfile.py` recorded it in `{TIMES}` "
        f"(from the end of the session before, so making its virtualenv counts; "
        f"'installs + tests' is the session's own body). Default sessions in "
        f"order; total {total:.0f} s ({total / 60:.1f} min) over the sessions "
        f"recorded. Sessions run with reused virtualenvs skip their installs, so "
        f"only a run on a fresh clone is the fresh-clone figure.",
        "",
    ]
    body = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    body += ["| " + " | ".join(str(c) for c in row) + " |" for row in found]
    return lines + body + [""]
