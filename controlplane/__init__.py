"""Berth's Django project: settings, URLs, the Celery app."""

from controlplane.celery import app as celery_app

__all__ = ["celery_app"]
