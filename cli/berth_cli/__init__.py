"""``berth``: submit and follow training jobs from a laptop.

The CLI talks only to Berth's REST API (``/api/v1/``) with a personal token,
so it needs nothing but the standard library: no Django, no cluster
credentials, not even PyYAML (``yaml_text`` writes YAML). It is its own
distribution (``cli/pyproject.toml``: ``pip install ./cli``); the server ships
it too and uses its ``durations`` and ``text``, so ``2h`` and ``4m30s`` read
the same on a laptop, on the pages and in the API.

Where the API and the token come from, first match wins:

- the ``BERTH_URL`` and ``BERTH_TOKEN`` environment variables;
- the file ``berth login`` writes: ``$BERTH_CONFIG``, else
  ``~/.config/berth/config.json`` (mode 0600).

Exit codes: 0 done, 1 the request failed (network, token, not found,
conflict, server error), 2 bad input (flags, or a 400 from the API),
130 interrupted, 141 the reader of its output went away (``berth list | head``;
quietly, as ``cat`` or ``git`` would). Every failure is reported on stderr as
``berth: ...``.
"""

from __future__ import annotations

from berth_cli.main import main

__all__ = ["main"]
