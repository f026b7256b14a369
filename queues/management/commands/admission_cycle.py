"""Run the admission engine on a scenario's state: one Kueue scheduling cycle,
or cycles until nothing changes; optionally explain every pending workload."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from queues.engine.explain import Explanation, explain
from queues.engine.runner import display_name, report, run_cycles, scheduler_for
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
        parser.add_argument(
            "--explain",
            action="store_true",
            help="explain every pending workload: what is short, by how much, and the "
            "smallest change that would let it in",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            scenario = load(options["scenario"])
        except ScenarioError as exc:
            raise CommandError(f"the scenario cannot run:\n{exc}") from exc
        scheduler = scheduler_for(scenario)
        outcome = report(scheduler, run_cycles(scheduler, until_stable=options["until_stable"]))
        explanations: dict[str, Explanation] = {}
        if options["explain"]:
            for workload in scheduler.workloads.values():
                if workload.admission is None:
                    explanations[display_name(workload)] = explain(scheduler, workload.key)
            outcome["explanations"] = {k: e.as_dict() for k, e in explanations.items()}
        if options["json"]:
            self.stdout.write(json.dumps(outcome, indent=2, sort_keys=True))
            return
        self.stdout.write(f"{scheduler.cycles} cycle(s)")
        for name, flavors in outcome["admitted"].items():
            placed = "; ".join(
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
            if name in explanations:
                self.stdout.write(f"             {explanations[name].message}")
                for suggestion in explanations[name].suggestions:
                    self.stdout.write(f"             - {suggestion.message}")
