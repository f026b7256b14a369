from __future__ import annotations

from django.apps import AppConfig


class FrontendConfig(AppConfig):
    name = "frontend"
    verbose_name = "Dashboard"
