"""The Celery app. Configured from Django settings (``CELERY_*``); with no broker
configured it runs tasks eagerly in-process (the embedded mode)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

app = Celery("berth")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
