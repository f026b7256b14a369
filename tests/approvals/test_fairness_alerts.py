"""The acceptance of fair-share alerts: a team starved in a recorded
scenario raises the metric, the notice (e-mail and the approval webhook, once
per episode) and the Prometheus alert, and all of them clear when it is
served. Prometheus' view is the shipped rules evaluated over the /metrics
pages Berth served at each minute."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core import mail
from django.test import Client

from accounts.roles import PLATFORM_ADMINS_GROUP
from approvals.fairness_alerts import evaluate_fair_shares
from approvals.tasks import evaluate_fair_shares as evaluate_task
from cluster.fairness import set_starved_below
from queues import services
from queues.models import ClusterQueue, TeamFairness
from tests.approvals.test_approval_notify import Hook
from tests.celery_broker import redis_worker, wait_until
from tests.cluster.metrics_support import one, scrape, values
from tests.cluster.test_fairness import Scenario, build_scenario, starve_research
from tests.deploy.test_prometheus_rules import RULES_FILE
from tests.deploy.test_prometheus_rules_promql import (
    Scrapes,
    evaluate_rules,
    firing,
    load_rules,
)
from tests.factories import user


@pytest.fixture
def hook() -> Iterator[Hook]:
    server = Hook(200)
    yield server
    server.close()


def told(scenario: Scenario) -> None:
    research = scenario.teams["research"]
    for name, address, role in (
        ("carol", "carol@example.com", "approver"),
        ("bob", "bob@example.com", "member"),
        ("dan", "", "approver"),
    ):
        person = user(name)
        person.email = address
        person.save()
        services.set_membership(actor=None, team=research, username=name, role=role, present=True)
    root = user("root", superuser=True)
    root.email = "root@example.com"
    root.save()
    ann = user("ann")
    ann.email = "ann@example.com"
    ann.save()
    ann.groups.add(Group.objects.get_or_create(name=PLATFORM_ADMINS_GROUP)[0])


def minutes(scenario: Scenario, count: float) -> datetime:
    return scenario.now + timedelta(minutes=count)


def page(client: Client, at: datetime) -> dict:
    """/metrics as Prometheus would have stored it at ``at``."""
    families = scrape(client)
    found: dict = {}
    for name in (
        "berth_team_fair_share_ratio",
        "berth_team_fair_share_starved_below",
        "berth_team_waiting_gpus",
        "berth_fair_share_evaluated_timestamp_seconds",
    ):
        for key, value in values(families, name).items():
            found[frozenset({("__name__", name), *key})] = value
    return found


@pytest.mark.django_db
def test_a_starved_team_is_announced_exported_and_alerted_once_and_cleared_when_served(
    settings: Any, hook: Hook
) -> None:
    settings.BERTH_APPROVAL_WEBHOOK_URL = hook.url
    settings.BERTH_PUBLIC_URL = "https://berth.example.com"
    scenario = build_scenario()
    told(scenario)
    record = starve_research(scenario)
    client = Client()
    recorded = Scrapes()

    # Ten minutes of passes: one episode, announced once.
    for minute in range(0, 11):
        counts = evaluate_fair_shares(minutes(scenario, minute))
        assert counts["starved"] == 1
        recorded.add(minutes(scenario, minute).timestamp(), page(client, minutes(scenario, minute)))
    row = TeamFairness.objects.get(team__slug="research")
    assert row.starved_since == scenario.now and row.episodes == 1
    assert row.last_notice == "starved" and "carol" in row.last_notice_result

    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert sorted(message.to) == ["ann@example.com", "carol@example.com", "root@example.com"]
    assert message.subject == "[Berth] Team research is starved of its fair share (0 % of it)"
    assert "received 0.0 GPU-hours of the 8.0 it deserved" in message.body
    assert "below 50 %" in message.body and "8 GPUs of its work wait now" in message.body
    assert "https://berth.example.com/teams/research/" in message.body
    (posted,) = hook.received
    berth = posted["body"]["berth"]
    assert berth["fair_share"] == "starved" and berth["team"] == "research"
    assert berth["ratio"] == 0.0 and berth["starved_below"] == 0.5 and berth["waiting_gpus"] == 8
    assert "Team research is starved" in posted["body"]["text"]

    metrics = scrape(client)
    assert one(metrics, "berth_team_fair_share_ratio", team="research", window="1h") == 0.0
    assert one(metrics, "berth_team_fair_share_starved", team="research") == 1.0
    assert one(metrics, "berth_team_fair_share_starved", team="vision") == 0.0
    assert (
        one(metrics, "berth_team_fair_share_deserved_gpu_hours", team="research", window="1h") > 0
    )
    assert (("team", "vision"), ("window", "1h")) not in values(
        metrics, "berth_team_fair_share_ratio"
    )

    # Served at minute 11: admitted, holding 8; nothing of it waits.
    scenario.clock = minutes(scenario, 11)
    scenario.admit(record)
    scenario.sync({"research": 8, "vision": 24}, steps=1)
    for minute in range(12, 16):
        counts = evaluate_fair_shares(minutes(scenario, minute))
        recorded.add(minutes(scenario, minute).timestamp(), page(client, minutes(scenario, minute)))
    assert counts["starved"] == 0
    row.refresh_from_db()
    assert row.starved_since is None and row.episodes == 1 and row.last_notice == "cleared"
    assert len(mail.outbox) == 2 and len(hook.received) == 2
    assert mail.outbox[1].subject == "[Berth] Team research is no longer starved"
    assert "nothing of it waits now" in mail.outbox[1].body
    assert hook.received[1]["body"]["berth"]["fair_share"] == "cleared"
    metrics = scrape(client)
    assert one(metrics, "berth_team_fair_share_starved", team="research") == 0.0
    assert one(metrics, "berth_team_waiting_gpus", team="research") == 0.0

    # Prometheus, over the pages Berth served: pending, firing at 10 minutes, resolved.
    rules = load_rules(RULES_FILE.read_text())
    timeline = evaluate_rules(
        rules, recorded, [minutes(scenario, m).timestamp() for m in range(16)]
    )
    states = [
        firing(timeline[minutes(scenario, m).timestamp()], "BerthTeamStarved").get("research")
        for m in range(16)
    ]
    assert states[:10] == ["pending"] * 10
    assert states[10] == "firing"
    assert states[12:] == [None] * 4
    assert not any(firing(alerts, "BerthFairShareStale") for alerts in timeline.values())


@pytest.mark.django_db
def test_a_teams_own_threshold_keeps_it_from_being_starved(settings: Any, hook: Hook) -> None:
    settings.BERTH_APPROVAL_WEBHOOK_URL = hook.url
    scenario = build_scenario()
    record = scenario.submit("research", 8)
    scenario.sync({"research": 0, "vision": 32}, steps=6)
    scenario.admit(record)
    scenario.submit("research", 8)
    scenario.sync({"research": 8, "vision": 24}, steps=6)
    # 8 held of 24 owed over the hour: a third of its share (34 % a minute on).
    assert evaluate_fair_shares(scenario.now)["starved"] == 1
    set_starved_below(scenario.teams["research"], "0.3")
    counts = evaluate_fair_shares(minutes(scenario, 1))
    assert counts == {"teams": 2, "starved": 0, "began": 0, "cleared": 1}
    assert [h["body"]["berth"]["fair_share"] for h in hook.received] == ["starved", "cleared"]
    assert "received 34 % of its share" in hook.received[1]["body"]["text"]
    metrics = scrape(Client())
    assert one(metrics, "berth_team_fair_share_starved_below", team="research", window="1h") == 0.3
    assert one(metrics, "berth_team_fair_share_starved_below", team="vision", window="1h") == 0.5


@pytest.mark.django_db
def test_a_webhook_that_fails_is_recorded_and_the_episode_is_not_announced_again(
    settings: Any,
) -> None:
    failing = Hook(500)
    try:
        settings.BERTH_APPROVAL_WEBHOOK_URL = failing.url
        scenario = build_scenario()
        starve_research(scenario)
        evaluate_fair_shares(scenario.now)
        evaluate_fair_shares(minutes(scenario, 1))
        row = TeamFairness.objects.get(team__slug="research")
        assert row.episodes == 1 and len(failing.received) == 1
        assert "failed: starved webhook: HTTP Error 500" in row.last_notice_result
    finally:
        failing.close()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_beat_task_runs_on_a_real_worker() -> None:
    scenario = build_scenario()
    starve_research(scenario)
    with redis_worker():
        evaluate_task.delay()
        wait_until(
            lambda: TeamFairness.objects.filter(
                team__slug="research", starved_since__isnull=False
            ).exists(),
            "the worker to evaluate the fair shares",
        )
    row = TeamFairness.objects.get(team__slug="research")
    assert row.figures["1h"]["ratio"] == 0.0 and row.waiting_gpus == 8


@pytest.mark.django_db
def test_a_team_that_no_longer_owns_a_queue_is_cleared(settings: Any, hook: Hook) -> None:
    settings.BERTH_APPROVAL_WEBHOOK_URL = hook.url
    scenario = build_scenario()
    starve_research(scenario)
    evaluate_fair_shares(scenario.now)
    ClusterQueue.objects.filter(name="research").update(team=None)
    assert evaluate_fair_shares(minutes(scenario, 1))["cleared"] == 1
    row = TeamFairness.objects.get(team__slug="research")
    assert row.figures == {} and row.waiting_gpus == 0 and row.starved_since is None
    assert [h["body"]["berth"]["fair_share"] for h in hook.received] == ["starved", "cleared"]
