"""Build the demo organisation (see queues/demo_org.py). Safe to run again: it
creates what is missing, leaves existing policy as it is, and resets the demo
users' passwords so the printed logins work."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from accounts.roles import APPROVERS_GROUP, PLATFORM_ADMINS_GROUP
from queues import demo_org, services
from queues.models import (
    ClusterQueue,
    Cohort,
    QueueClass,
    ResourceFlavor,
    Team,
    WorkloadPriorityClass,
)


class Command(BaseCommand):
    help = "Create the demo organisation: 64 H100 GPUs, three teams, a shared urgent queue."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--quiet-logins", action="store_true", help="Do not print the demo logins"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        created = 0
        for name in (PLATFORM_ADMINS_GROUP, APPROVERS_GROUP):
            Group.objects.get_or_create(name=name)
        steps: list[tuple[str, Any, Any, str, list[dict[str, Any]]]] = [
            (
                "resource flavor",
                ResourceFlavor,
                services.resource_flavors,
                "name",
                demo_org.FLAVORS,
            ),
            (
                "priority class",
                WorkloadPriorityClass,
                services.priority_classes,
                "name",
                demo_org.PRIORITY_CLASSES,
            ),
            ("cohort", Cohort, services.cohorts, "name", demo_org.COHORTS),
            ("team", Team, services.teams, "slug", demo_org.TEAMS),
        ]
        for label, model, service, key, items in steps:
            for item in items:
                created += self._ensure(label, model, service, key, item)
        for class_name, priority in demo_org.QUEUE_CLASS_PRIORITIES.items():
            queue_class = QueueClass.objects.filter(name=class_name).first()
            if queue_class is not None and queue_class.default_priority_class is None:
                services.queue_classes.update(
                    actor=None, obj=queue_class, data={"default_priority_class": priority}
                )
                self.stdout.write(f"  set default priority of queue class {class_name}: {priority}")
        for item in demo_org.CLUSTER_QUEUES:
            created += self._ensure(
                "cluster queue", ClusterQueue, services.cluster_queues, "name", item
            )
        self._users()
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo organisation ready ({created} object(s) created, the rest already there)."
            )
        )
        if not options["quiet_logins"]:
            self.stdout.write("\nDemo logins (for a local demo only):")
            for user in demo_org.USERS:
                self.stdout.write(
                    f"  {user['username']:<9} password {user['password']:<14} {user['role']}"
                )

    def _ensure(self, label: str, model: Any, service: Any, key: str, item: dict[str, Any]) -> int:
        if model.objects.filter(**{key: item[key]}).exists():
            self.stdout.write(f"  {label} {item[key]}: exists, left as is")
            return 0
        service.create(actor=None, data=item)
        self.stdout.write(f"  {label} {item[key]}: created")
        return 1

    def _users(self) -> None:
        User = get_user_model()
        for spec in demo_org.USERS:
            user, _ = User.objects.get_or_create(username=spec["username"])
            user.is_superuser = user.is_staff = spec["superuser"]
            user.set_password(spec["password"])
            user.save()
            for group in spec["groups"]:
                user.groups.add(Group.objects.get(name=group))
            for team_slug, role in spec["teams"]:
                services.set_membership(
                    actor=None,
                    team=Team.objects.get(slug=team_slug),
                    username=user.username,
                    role=role,
                    present=True,
                )
