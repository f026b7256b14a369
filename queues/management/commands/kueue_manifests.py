"""Print the whole rendered Kueue bundle as multi-document YAML."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from queues.kueue.render import to_yaml_documents
from queues.reconcile import manifest_objects


class Command(BaseCommand):
    help = (
        "Print the Kueue objects (and team Namespaces) the policy renders to, as YAML; "
        "what is a manual step on this cluster is printed as comments."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(to_yaml_documents(manifest_objects()), ending="")
