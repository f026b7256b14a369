"""Print the whole rendered Kueue bundle as multi-document YAML."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from queues.kueue.render import to_yaml_documents
from queues.reconcile import desired_objects


class Command(BaseCommand):
    help = "Print the Kueue objects (and team Namespaces) the policy renders to, as YAML."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(to_yaml_documents(desired_objects()), ending="")
