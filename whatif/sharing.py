"""What replays shared out among the Celery workers have in common, a
what-if's parts (``whatif.scaleout``) and a capacity plan's replays
(``whatif.plan_scaleout``): inputs pickled and signed with the secret key,
claims by compare-and-set on a token, and the beat that tells a silent
worker's claim from a live one."""

from __future__ import annotations

import hmac
import pickle
import socket
import uuid
import zlib
from datetime import timedelta
from typing import Any

from celery import current_task
from django.db.models import Q, QuerySet
from django.db.models.functions import Now
from django.utils.crypto import salted_hmac

# A worker beats this often while it replays; silent for STALE_AFTER, its
# claim is taken over. Beats and their checks use the database's clock, so
# workers' clocks need not agree.
BEAT_SECONDS = 1.0
STALE_AFTER = timedelta(minutes=5)
# How often the task that shared its replays out looks at them while it waits.
POLL_SECONDS = 0.25


class Unsigned(Exception):
    """Stored inputs fail their signature check."""


def seal(payload: Any, salt: str, scope: str) -> tuple[bytes, str]:
    """``payload`` pickled and compressed, and its signature for ``scope``
    (the row it is stored in: a blob copied to another row fails)."""
    blob = zlib.compress(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL), 1)
    return blob, signature(blob, salt, scope)


def signature(blob: bytes, salt: str, scope: str) -> str:
    return salted_hmac(salt, f"{scope}:".encode() + blob, algorithm="sha256").hexdigest()


def unseal(blob: bytes, signed: str, salt: str, scope: str, asked_for: str) -> Any:
    """What ``seal`` stored, once its signature checks; else Unsigned, saying
    to ask for ``asked_for`` again."""
    if not hmac.compare_digest(signature(blob, salt, scope), signed):
        raise Unsigned(
            "its stored inputs do not carry Berth's signature (changed outside Berth, or "
            f"written under another BERTH_SECRET_KEY): ask for the {asked_for} again"
        )
    return pickle.loads(zlib.decompress(blob))


def worker_name() -> str:
    """This worker's node name (in a task), else the host's."""
    hostname = getattr(current_task.request, "hostname", None) if current_task else None
    return str(hostname or socket.gethostname())


def claim(rows: QuerySet[Any], **reset: Any) -> str | None:
    """Take the row of ``rows`` (one, by primary key) if no one replays it:
    running under a new token (returned), this worker's, beating from now;
    ``reset`` starts the row's own progress over. None if it is taken."""
    token = uuid.uuid4().hex
    taken = rows.filter(unattended()).update(
        state="running",
        token=token,
        worker=worker_name(),
        claimed_at=Now(),
        heartbeat_at=Now(),
        **reset,
    )
    return token if taken else None


def unattended() -> Q:
    """Rows (with ``state`` and ``heartbeat_at``) no one replays: queued, or
    their worker silent for STALE_AFTER."""
    return Q(state="queued") | Q(state="running", heartbeat_at__lt=Now() - STALE_AFTER)
