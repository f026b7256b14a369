"""The API fuzzed against its own OpenAPI schema with Schemathesis: every
operation, valid and invalid input, as a team member and as an admin, over two
teams' data on PostgreSQL. No answer may be a 500, every answer must be one the
schema declares and shaped as it says, and input the schema calls invalid must
be refused. A fixed seed and a bounded number of examples keep it to CI's time;
``BERTH_FUZZ_EXAMPLES`` runs more."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
import yaml
from django.core import signals
from django.db import close_old_connections, transaction
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.media_types import YAML_MEDIA_TYPES
from schemathesis.specs.openapi.checks import (
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from accounts.services import create_token
from jobs.services import submit
from queues import services
from queues.models import Team
from tests.approvals.approval_support import approval_request
from tests.factories import cluster_queue, cohort, flavor, gpu_groups, role_users


@schemathesis.deserializer(*YAML_MEDIA_TYPES)
def yaml_documents(ctx: Any, response: Any) -> Any:
    """The manifests are a multi-document YAML stream: its documents, as a list."""
    return list(yaml.safe_load_all(response.content))


EXAMPLES = int(os.environ.get("BERTH_FUZZ_EXAMPLES", "8"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    negative_data_rejection,
]


def job_body(name: str, team: str = "alpha") -> dict[str, Any]:
    return {
        "name": name,
        "team": team,
        "image": "registry.example.com/trainer:1",
        "queue": "training-large",
        "nodes": 1,
        "gpus_per_node": 8,
        "command": ["python", "train.py"],
        "checkpoint_uri": f"s3://bucket/{name}",
    }


def two_teams() -> dict[str, str]:
    """Teams alpha and beta with a queue each in one cohort, a shared urgent
    queue, a priority class, jobs of both teams and approval requests; bearer
    tokens of a member of alpha and an admin."""
    people = role_users()
    flavor("h100", node_labels={"gpu": "h100"})
    cohort("org")
    for name, gpus in (("alpha", "16"), ("beta", "8")):
        cluster_queue(
            name,
            team=name,
            cohort="org",
            queue_class="training-large",
            resource_groups=gpu_groups("h100", gpus),
        )
    cluster_queue(
        "urgent",
        cohort="org",
        queue_class="urgent-release",
        resource_groups=gpu_groups("h100", "4"),
    )
    services.priority_classes.create(actor=None, data={"name": "train-low", "value": 1000})
    for name in ("qwen-sft", "llama-eval"):
        submit(people["member_a"], job_body(name))
    submit(people["member_b"], job_body("beta-run", team="beta"))
    # Decided by nobody, requested by nobody Berth knows: the nulls the schema declares.
    approval_request(None, namespace="alpha", team=Team.objects.get(slug="alpha"))
    approval_request(people["member_a"], namespace="alpha", team=Team.objects.get(slug="alpha"))
    return {
        role: create_token(user=people[role], name="fuzz").secret for role in ("member_a", "admin")
    }


@pytest.fixture
def tokens(db: Any, queue_class_templates: None, settings: Any) -> dict[str, str]:
    settings.BERTH_RECONCILE_ON_CHANGE = False
    # Invalid input includes malformed tokens: they must not lock the fuzz out.
    settings.BERTH_TOKEN_FAILURE_LIMIT = 10**6
    return two_teams()


@pytest.fixture
def api_schema(tokens: dict[str, str]) -> Iterator[Any]:
    from controlplane.wsgi import application

    # As Django's test client does: the app is called in the test's own
    # transaction, which closing "old" connections after each request would end.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)
        schema.config.generation.update(
            modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
            max_examples=EXAMPLES,
            deterministic=True,
            allow_x00=True,
        )
        yield schema
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def fuzz(schema: Any, token: str) -> list[str]:
    """Every operation of ``schema`` in both generation modes; each failing
    operation's first failure, as text (the run goes on past it)."""
    headers = {"Authorization": f"Bearer {token}"}
    failures = []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @FUZZ
            @given(case=operation.as_strategy(generation_mode=mode))
            def run(case: Any) -> None:
                case.call_and_validate(headers=headers, checks=CHECKS)

            try:
                run()
            except (Exception, BaseExceptionGroup) as exc:  # collected, then all reported
                lines = str(exc).splitlines()
                failures.append(f"{operation.label} [{mode.value}]: " + "\n".join(lines[:30]))
    return failures


def test_every_operation_answers_a_team_member_as_its_schema_says(
    api_schema: Any, tokens: dict[str, str]
) -> None:
    failures = fuzz(api_schema, tokens["member_a"])
    assert not failures, "\n\n".join(failures)


def test_every_operation_answers_an_admin_as_its_schema_says(
    api_schema: Any, tokens: dict[str, str]
) -> None:
    failures = fuzz(api_schema, tokens["admin"])
    assert not failures, "\n\n".join(failures)


def test_sequences_of_calls_hold_to_the_schema(api_schema: Any, tokens: dict[str, str]) -> None:
    """The stateful phase: Schemathesis links operations (a created object's
    name fed to its GET, PUT and DELETE) and runs short sequences of them."""
    headers = {"Authorization": f"Bearer {tokens['admin']}"}
    called: list[str] = []
    failures: list[str] = []

    class Sequences(api_schema.as_state_machine()):  # type: ignore[misc]
        # Each sequence starts from the same data: Hypothesis expects the same
        # choices to behave the same, which a database the last sequence
        # changed would break (FlakyStrategyDefinition).
        def setup(self) -> None:
            self.savepoint = transaction.savepoint()
            super().setup()

        def teardown(self) -> None:
            super().teardown()
            transaction.savepoint_rollback(self.savepoint)

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            called.append(case.operation.label)
            return {"headers": headers}

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            # Collected, not raised: a raise makes Hypothesis replay the
            # sequence, and the database it changed would answer differently.
            try:
                case.validate_response(response, checks=CHECKS)
            except (Exception, BaseExceptionGroup) as exc:
                failures.append(f"{case.operation.label}: " + "\n".join(str(exc).splitlines()[:30]))

    Sequences.run(
        settings=settings(
            max_examples=EXAMPLES * 4,
            stateful_step_count=6,
            # No shrinking: the sequences change the database, so a replay
            # would not see the state the failing run saw.
            phases=[Phase.generate],
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
    )
    # The links Schemathesis infers reach creates, reads, updates, deletes
    # and decisions: a phase that ran only lists would prove little.
    assert len(set(called)) >= 20, sorted(set(called))
    methods = {label.split()[0] for label in called}
    # Which writes a derandomized walk reaches moves with the schema (a new
    # operation shifts it): creates and reads always, and updates or deletes.
    assert methods >= {"GET", "POST"} and methods & {"PUT", "PATCH", "DELETE"}, methods
    assert not failures, "\n\n".join(failures)
