"""Build the demo organisation (see queues/demo_org.py). Safe to run again: it
only creates what is missing. Objects, users, passwords and memberships that
already exist are left exactly as they are, so an admin's later changes stick."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand
from django.db import transaction

from accounts.roles import APPROVERS_GROUP, PLATFORM_ADMINS_GROUP
from queues import demo_org, services
from queues.models import (
    ClusterQueue,
    Cohort,
    QueueClass,
    ResourceFlavor,
    Team,
    Topology,
    WorkloadPriorityClass,
)


class Command(BaseCommand):
    help = "Create the demo organisation: 64 H100 GPUs, three teams, a shared urgent queue."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--quiet-logins", action="store_true", help="Do not print the demo logins"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        # One transaction: the organisation appears whole, and is reconciled once.
        with transaction.atomic():
            self._build(options)

    def _build(self, options: dict[str, Any]) -> None:
        created: set[tuple[str, str]] = set()
        for name in (PLATFORM_ADMINS_GROUP, APPROVERS_GROUP):
            Group.objects.get_or_create(name=name)
        steps: list[tuple[str, Any, Any, str, list[dict[str, Any]]]] = [
            # Before the flavors, which may name it.
            ("topology", Topology, services.topologies, "name", demo_org.TOPOLOGIES),
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
                if self._ensure(label, model, service, key, item):
                    created.add((label, item[key]))
        for class_name, priority in demo_org.QUEUE_CLASS_PRIORITIES.items():
            # Only alongside a priority class made just now: a default an admin
            # chose (or cleared) since the first run is theirs.
            queue_class = QueueClass.objects.filter(name=class_name).first()
            if queue_class is not None and ("priority class", priority) in created:
                services.queue_classes.update(
                    actor=None, obj=queue_class, data={"default_priority_class": priority}
                )
                self.stdout.write(f"  queue class {class_name}: default priority {priority}")
        for item in demo_org.CLUSTER_QUEUES:
            if self._ensure("cluster queue", ClusterQueue, services.cluster_queues, "name", item):
                created.add(("cluster queue", item["name"]))
        new_users = self._users()
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo organisation ready ({len(created)} object(s) and {len(new_users)} user(s) "
                "created, the rest already there and left as it is)."
            )
        )
        if not options["quiet_logins"]:
            self.stdout.write("\nDemo logins (for a local demo only):")
            for user in demo_org.USERS:
                password = user["password"] if user["username"] in new_users else ("(unchanged)")
                self.stdout.write(f"  {user['username']:<9} password {password:<14} {user['role']}")

    def _ensure(self, label: str, model: Any, service: Any, key: str, item: dict[str, Any]) -> bool:
        if model.objects.filter(**{key: item[key]}).exists():
            self.stdout.write(f"  {label} {item[key]}: exists, left as is")
            return False
        service.create(actor=None, data=item)
        self.stdout.write(f"  {label} {item[key]}: created")
        return True

    def _users(self) -> set[str]:
        """Create the demo users that do not exist yet, with their groups and team
        roles; returns their usernames. Existing users are not touched."""
        User = get_user_model()
        created: set[str] = set()
        for spec in demo_org.USERS:
            if User.objects.filter(username=spec["username"]).exists():
                continue
            user = User.objects.create_user(
                username=spec["username"],
                password=spec["password"],
                is_superuser=spec["superuser"],
                is_staff=spec["superuser"],
            )
            created.add(user.username)
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
        return created
