"""The Celery app. Configured from Django settings (``CELERY_*``); with no broker
configured it runs tasks eagerly in-process (the embedded mode)."""

from __future__ import annotations

import os

from celery import Celery

from controlplane import heartbeat
from controlplane.env import exit_on_config_error

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

app = Celery("berth")
with exit_on_config_error():
    # Loading the settings here (not lazily in the worker) makes a bad variable
    # stop `celery worker`/`beat` with the same one-line message as manage.py.
    import controlplane.settings  # noqa: F401
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# `worker --heartbeat-file` for the liveness probe of a worker pod (deploy/).
heartbeat.install(app)
