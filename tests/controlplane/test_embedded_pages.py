"""Every page of the embedded mode (SQLite, the simulated cluster, no Celery
beat), as `make run` serves it, answers without a server error: the rest of
the suite runs on PostgreSQL, and a query only PostgreSQL runs (DISTINCT ON)
once broke the Teams page of every fresh demo."""

from __future__ import annotations

import json
from pathlib import Path

from tests.controlplane.test_startup import clean_env, run

PAGES = """
import json, django
django.setup()
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import NoReverseMatch, URLPattern, get_resolver, reverse

call_command("migrate", verbosity=0)
call_command("seed_demo", verbosity=0)
from controlplane.embedded import EmbeddedLoop
from queues.models import Team

EmbeddedLoop().run_once()
paths = set()
get_resolver().url_patterns  # the root first: frontend.urls alone imports in a cycle
for pattern in get_resolver("frontend.urls").url_patterns:
    if isinstance(pattern, URLPattern) and pattern.name:
        try:
            paths.add(reverse(pattern.name))
        except NoReverseMatch:  # takes arguments: the teams' pages are added below
            pass
paths |= {reverse("team", args=[slug]) for slug in Team.objects.values_list("slug", flat=True)}
answers = {}
for username in ("admin", "alice"):
    client = Client(SERVER_NAME="localhost")
    client.force_login(get_user_model().objects.get(username=username))
    for path in sorted(paths):
        answers[f"{username} GET {path}"] = client.get(path).status_code
print(json.dumps(answers))
"""


def test_every_page_of_a_fresh_embedded_demo_answers(tmp_path: Path) -> None:
    result = run(["-c", PAGES], clean_env(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    answers = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(answers) > 20, answers
    broken = {page: status for page, status in answers.items() if status >= 500}
    assert not broken, broken
    assert answers["admin GET /teams/"] == 200
