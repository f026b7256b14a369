"""Prepares the throwaway PostgreSQL of the outage test, run as
``python -m tests.chaos.outage_seed`` with its DATABASE_URL: Berth's
migrations (``migrate``, in the same process to save a start-up), then one
team and queue, a member with an API token and a signed-in session, and
``JOBS`` stored jobs. Prints what the test needs as JSON."""

from __future__ import annotations

import json
import sys

import django

JOBS = 5


def seed() -> dict[str, object]:
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    from accounts.services import create_token
    from jobs.services import submit
    from queues import services
    from tests.factories import cluster_queue, cohort, flavor, gpu_groups, team, user
    from tests.jobs.conftest import job

    flavor("h100")
    cohort("org")
    research = team("research", ["research"])
    services.priority_classes.create(actor=None, data={"name": "train-low", "value": 1000})
    cluster_queue(
        "research",
        team="research",
        cohort="org",
        queue_class="training-large",
        resource_groups=gpu_groups("h100", "16"),
    )
    alice = user("alice")
    services.set_membership(
        actor=None, team=research, username="alice", role="member", present=True
    )
    jobs = {submit(alice, job(name=f"seeded-{i}")).pk: f"seeded-{i}" for i in range(JOBS)}
    session = SessionStore()
    session[SESSION_KEY] = str(alice.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = alice.get_session_auth_hash()
    session.create()
    return {
        "token": create_token(user=alice, name="outage").secret,
        "session": session.session_key,
        "jobs": jobs,
    }


if __name__ == "__main__":
    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    json.dump(seed(), sys.stdout)
