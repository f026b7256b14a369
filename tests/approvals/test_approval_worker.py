"""A decision whose apply task is stuck with a dead worker: the controller
pass writes it to the Workload; when the task is finally delivered to a real
Celery worker (Redis), it finds the decision applied and writes nothing."""

from __future__ import annotations

import time

import pytest
from celery.contrib.testing.worker import start_worker

from approvals.controller import drive_approvals
from approvals.decide import decide
from approvals.models import ApprovalAction, ApprovalRequest
from controlplane.celery import app
from queues.models import SimulatedEvent
from tests.approvals.approval_support import approval_request, approvers
from tests.approvals.test_approvals_flow import raise_request, workload_check
from tests.celery_broker import redis_queue, wait_until
from tests.jobs.conftest import Org
from tests.jobs.simulated_cluster import Cluster

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_decision_waiting_on_a_dead_worker_is_written_once(org: Org) -> None:
    people = approvers()
    cluster = Cluster()
    job_id, request = raise_request(cluster, org, time.time())
    with redis_queue() as (_, queue):
        # Committed; its apply task sits in Redis and no worker is alive to take it.
        decide(people["carol"], request.pk, approve=True, comment="go")
        check = workload_check(cluster, job_id)
        assert check is not None and check["state"] == "Pending"

        assert drive_approvals(cluster.backend)["applied"] == 1
        written = workload_check(cluster, job_id)
        assert written is not None and written["state"] == "Ready"
        writes = SimulatedEvent.objects.filter(kind="Workload").count()

        # A worker comes back and takes the old message, then a later one.
        marker = approval_request(people["erin"], workload_uid="uid-marker")
        with start_worker(
            app, pool="solo", loglevel="WARNING", perform_ping_check=False, queues=[queue]
        ):
            decide(people["carol"], marker.pk, approve=True)
            wait_until(
                lambda: ApprovalRequest.objects.get(pk=marker.pk).applied_at is not None,
                "the worker to drain the queue",
            )
    assert SimulatedEvent.objects.filter(kind="Workload").count() == writes
    assert workload_check(cluster, job_id) == written
    assert request.events.filter(action=ApprovalAction.APPLIED).count() == 1
