#!/usr/bin/env python
"""Berth's command-line entry point for Django management commands."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    from controlplane.env import exit_on_config_error

    with exit_on_config_error():
        # Load settings now, so a bad environment variable stops here with one
        # clear line instead of a traceback from deep inside Django.
        import controlplane.settings  # noqa: F401

    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
