"""``python -m jobs.cli``: the same as the ``berth`` command."""

from __future__ import annotations

import sys

from jobs.cli.main import main

sys.exit(main())
