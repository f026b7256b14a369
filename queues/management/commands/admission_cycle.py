"""Run the admission engine on a scenario's state: one Kueue scheduling cycle,
or cycles until nothing changes."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from queues.engine.runner import report, run_cycles, scheduler_for
from queues.engine.scenario import ScenarioError, load


class Command(BaseCommand):
    help = "Run one Kueue scheduling cycle (or cycles until stable) on a scenario file."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("scenario", help="scenario YAML (policy and workloads)")
        parser.add_argument("--json", action="store_true", help="print the result as JSON")
        parser.add_argument(
            "--until-stable",
            action="store_true",
            help="repeat cycles, with no time passing, until nothing changes",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            scenario = load(options["scenario"])
        except ScenarioError as exc:
            raise CommandError(f"the scenario cannot run:\n{exc}") from exc
        scheduler = scheduler_for(scenario)
        outcome = report(scheduler, run_cycles(scheduler, until_stable=options["until_stable"]))
        if options["json"]:
            self.stdout.write(json.dumps(outcome, indent=2, sort_keys=True))
            return
        self.stdout.write(f"{scheduler.cycles} cycle(s)")
        for name, flavors in outcome["admitted"].items():
            placed = ", ".join(
                f"{ps}: " + ", ".join(f"{r}→{f}" for r, f in res.items())
                for ps, res in flavors.items()
            )
            self.stdout.write(self.style.SUCCESS(f"  admitted   {name}  ({placed})"))
        for name in outcome.get("quotaReserved", {}):
            self.stdout.write(f"  reserved   {name}  (waiting for admission checks)")
        for name in outcome["preempted"]:
            self.stdout.write(self.style.WARNING(f"  preempted  {name}"))
        for name, why in outcome["pending"].items():
            self.stdout.write(f"  pending    {name}  [{why['reason']}] {why['message']}")
