"""``python -m berth_cli``: the same as the ``berth`` command."""

from __future__ import annotations

import sys

from berth_cli.main import main

sys.exit(main())
