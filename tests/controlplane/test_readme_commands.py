"""The README documents the knobs of its two commands that the Makefile has."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_variable_make_run_takes_is_in_the_readme() -> None:
    makefile = (ROOT / "Makefile").read_text()
    readme = (ROOT / "README.md").read_text()
    run = makefile[makefile.index("\nrun:") :].split("\n\n")[0]
    variables = set(re.findall(r"\$\((HOST|PORT|[A-Z_]+)\)", run)) - {"PY", "VENV", "PYTHON"}
    # Links Berth writes (approval e-mails, the CLI) point where it serves.
    assert "BERTH_PUBLIC_URL" in run and "http://$(HOST):$(PORT)" in run
    assert variables == {"HOST", "PORT"}
    for name in sorted(variables):
        assert f"make run {name}=" in readme, name
