"""``manage.py unlock (--username NAME | --address IP)``: lift a brute-force
lockout (accounts/lockout.py) before it times out."""

from __future__ import annotations

import ipaddress
from typing import Any

from axes.utils import reset
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import LockoutRelease


class Command(BaseCommand):
    help = (
        "Unlock a username locked out of sign-in, or an address locked out of sign-in and tokens."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        who = parser.add_mutually_exclusive_group(required=True)
        who.add_argument("--username", help="a username locked out after failed sign-ins")
        who.add_argument("--address", help="an IP address locked out (sign-ins and API tokens)")

    def handle(self, *args: Any, username: str | None, address: str | None, **options: Any) -> None:
        if username is not None:
            attempts = reset(username=username)
            self.stdout.write(
                f"Unlocked {username!r}: {attempts} failed sign-in record(s) cleared."
            )
            return
        try:
            ipaddress.ip_address(address or "")
        except ValueError:
            raise CommandError(
                f"--address {address!r} is not an IP address, e.g. 10.0.0.7"
            ) from None
        assert address is not None  # one of the two is required
        attempts = reset(ip=address)
        LockoutRelease.objects.create(remote_addr=address)
        self.stdout.write(
            f"Unlocked {address}: {attempts} failed sign-in record(s) cleared; "
            "its refused API tokens before now no longer count."
        )
