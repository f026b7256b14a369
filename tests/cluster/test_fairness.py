"""Fair shares from recorded data (``cluster.fairness``): queue snapshots
for what each team's queues held and were given, workload events for when
its work waited, the policy for who owns which queue and whether fair sharing
is on. ``Scenario`` is also the alerts' and pages' test scenario."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from cluster.fairness import evaluate, refresh, set_starved_below, waiting_gpus_now
from cluster.models import EventType, QueueSnapshot, WorkloadEvent, WorkloadRecord, WorkloadState
from queues.errors import PolicyInvalid
from queues.models import KueueConfiguration, PolicyChange, Team, TeamFairness
from tests.controlplane.test_startup import clean_env, run
from tests.factories import cluster_queue, cohort, flavor, gpu_groups, team

GPU = "nvidia.com/gpu"
STEP = timedelta(minutes=5)


@dataclass
class Scenario:
    """research and vision own a 16-GPU queue each in cohort shared; the
    clock starts an hour before ``now`` and moves in five-minute syncs."""

    now: datetime
    clock: datetime
    teams: dict[str, Team] = field(default_factory=dict)
    serial: int = 0

    def sync(self, held: dict[str, int], steps: int = 1) -> None:
        """``steps`` snapshots, five minutes apart, with the queues holding ``held``."""
        for _ in range(steps):
            for queue, usage in held.items():
                QueueSnapshot.objects.create(
                    at=self.clock,
                    cluster_queue=queue,
                    flavor="h100",
                    resource=GPU,
                    nominal=16,
                    usage=usage,
                    borrowed=max(0, usage - 16),
                )
            self.clock += STEP

    def submit(self, queue: str, gpus: int, at: datetime | None = None) -> WorkloadRecord:
        self.serial += 1
        at = at or self.clock
        record = WorkloadRecord.objects.create(
            uid=f"uid-{self.serial}",
            namespace=queue,
            name=f"job-{self.serial}",
            team=self.teams.get(queue),
            cluster_queue=queue,
            requested={GPU: gpus},
            state=WorkloadState.PENDING,
            created_at=at,
        )
        WorkloadEvent.objects.create(workload=record, type=EventType.CREATED, at=at)
        return record

    def admit(self, record: WorkloadRecord, at: datetime | None = None) -> None:
        at = at or self.clock
        for kind in (EventType.QUOTA_RESERVED, EventType.ADMITTED):
            WorkloadEvent.objects.create(workload=record, type=kind, at=at)
        WorkloadRecord.objects.filter(pk=record.pk).update(
            state=WorkloadState.ADMITTED, reserved_at=at, admitted_at=at
        )


def build_scenario(now: datetime | None = None) -> Scenario:
    now = (now or timezone.now()).replace(microsecond=0)
    flavor("h100")
    cohort("shared")
    scenario = Scenario(now=now, clock=now - timedelta(hours=1))
    for slug in ("research", "vision"):
        scenario.teams[slug] = team(slug)
        cluster_queue(slug, team=slug, cohort="shared", resource_groups=gpu_groups("h100", "16"))
    return scenario


def starve_research(scenario: Scenario) -> WorkloadRecord:
    """For the hour before ``now``: research waits for 8 GPUs and holds none,
    while vision holds all 32 (16 of them research's)."""
    record = scenario.submit("research", 8)
    scenario.sync({"research": 0, "vision": 32}, steps=12)
    return record


@pytest.fixture
def scenario(db: Any) -> Scenario:
    return build_scenario()


def test_a_team_waiting_for_its_quota_while_others_hold_it_received_nothing_of_its_share(
    scenario: Scenario,
) -> None:
    starve_research(scenario)
    figures = evaluate(scenario.now)
    hour = figures["research"]["1h"]
    # It asked 8 of its 16: owed 8 GPUs for the hour, held none.
    assert hour.waiting == 3600
    assert hour.deserved == 8 * 3600 and hour.received == 0
    assert hour.ratio(3600) == 0.0
    # vision never waited: no ratio to judge.
    assert figures["vision"]["1h"].waiting == 0 and figures["vision"]["1h"].ratio(3600) is None
    assert waiting_gpus_now() == {"research": 8}


def test_once_served_the_team_stops_waiting_and_its_ratio_recovers(scenario: Scenario) -> None:
    record = scenario.submit("research", 8)
    scenario.sync({"research": 0, "vision": 32}, steps=6)
    scenario.admit(record)
    second = scenario.submit("research", 8)  # waits again, while it holds 8 of 16
    scenario.sync({"research": 8, "vision": 24}, steps=6)
    hour = evaluate(scenario.now)["research"]["1h"]
    # Waited the whole hour: first half owed 8 (held 0), second owed 16 (held 8).
    assert hour.waiting == 3600
    assert hour.deserved == 8 * 1800 + 16 * 1800
    assert hour.received == 8 * 1800
    scenario.admit(second, scenario.now)
    assert waiting_gpus_now() == {}


def test_fair_sharing_adds_the_cohorts_unasked_quota_to_what_a_team_deserves(
    scenario: Scenario,
) -> None:
    scenario.submit("research", 32)  # asks 32 (holds 16, waits for 16 more)
    scenario.sync({"research": 16, "vision": 0}, steps=12)
    off = evaluate(scenario.now)["research"]["1h"]
    assert off.deserved == 16 * 3600 and off.ratio(3600) == 1.0
    KueueConfiguration.objects.create(pk=1, fair_sharing_enable=True)
    on = evaluate(scenario.now)["research"]["1h"]
    # vision asks none of its 16: research is owed them too, and got none.
    assert on.deserved == 32 * 3600 and on.ratio(3600) == 0.5


def test_a_workload_evicted_waits_again_until_it_is_readmitted(scenario: Scenario) -> None:
    record = scenario.submit("research", 8)
    scenario.admit(record)
    scenario.sync({"research": 8, "vision": 0}, steps=4)
    WorkloadEvent.objects.create(workload=record, type=EventType.EVICTED, at=scenario.clock)
    WorkloadRecord.objects.filter(pk=record.pk).update(state=WorkloadState.PENDING)
    scenario.sync({"research": 0, "vision": 0}, steps=8)
    hour = evaluate(scenario.now)["research"]["1h"]
    assert hour.waiting == 8 * 300 and hour.deserved == 8 * 8 * 300 and hour.received == 0


def test_refresh_keeps_the_figures_in_gpu_hours_for_every_window(scenario: Scenario) -> None:
    starve_research(scenario)
    rows = {row.team.slug: row for row in refresh(scenario.now)}
    research = rows["research"]
    assert research.figures["1h"] == {
        "received": 0.0,
        "deserved": 8.0,
        "waiting": 3600,
        "ratio": 0.0,
    }
    assert set(research.figures) == {"1h", "24h", "7d"}
    assert research.figures["7d"]["ratio"] is None  # an hour of a week
    assert research.waiting_gpus == 8 and research.evaluated_at == scenario.now
    assert rows["vision"].waiting_gpus == 0
    refresh(scenario.now)
    assert TeamFairness.objects.count() == 2  # a second pass updates, adds nothing


def test_a_teams_own_threshold_is_a_fraction_or_nothing(scenario: Scenario) -> None:
    research = scenario.teams["research"]
    assert str(set_starved_below(research, "0.25").starved_below) == "0.250"
    for bad, says in (("1.5", "out of range"), ("a lot", "not a number"), ("0.12345", "decimals")):
        with pytest.raises(PolicyInvalid) as caught:
            set_starved_below(research, bad)
        error = caught.value.errors[0]
        assert error.field == "starved_below" and error.rule == "fraction" and says in error.message
        assert str(TeamFairness.objects.get(team=research).starved_below) == "0.250"
    assert set_starved_below(research, "").starved_below is None
    # Each change, and only a change, is in the team's history.
    set_starved_below(research, "")
    changes = PolicyChange.objects.filter(kind="team", object_name=research.slug, action="updated")
    assert [(c.before, c.after) for c in changes.order_by("id")] == [
        (
            {"fair_share_starved_below": "the installation's default"},
            {"fair_share_starved_below": "0.25"},
        ),
        (
            {"fair_share_starved_below": "0.25"},
            {"fair_share_starved_below": "the installation's default"},
        ),
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "BERTH_FAIR_SHARE_STARVED_BELOW: '0' is out of range"),
        ("half", "BERTH_FAIR_SHARE_STARVED_BELOW: 'half' is not a number"),
        ("0.12345", "has more than 3 decimals: a fraction above 0 and at most 1"),
    ],
)
def test_a_bad_installation_threshold_stops_start_up_naming_the_variable(
    tmp_path: Path, value: str, message: str
) -> None:
    env = clean_env(tmp_path, BERTH_FAIR_SHARE_STARVED_BELOW=value, BERTH_SECRET_KEY="k" * 40)
    result = run(["manage.py", "check"], env)
    assert result.returncode == 2
    assert result.stderr.startswith("berth: configuration error: ")
    assert message in result.stderr and "Traceback" not in result.stderr


def test_the_installation_threshold_is_read_as_a_decimal(tmp_path: Path) -> None:
    env = clean_env(tmp_path, BERTH_FAIR_SHARE_STARVED_BELOW=" 0.30 ", BERTH_SECRET_KEY="k" * 40)
    shown = "from django.conf import settings; print(repr(settings.BERTH_FAIR_SHARE_STARVED_BELOW))"
    result = run(["manage.py", "shell", "-c", shown], env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "Decimal('0.3')"
