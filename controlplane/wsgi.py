from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

from controlplane.env import exit_on_config_error

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
# Run gunicorn with --preload (as the Dockerfile does): a bad setting then stops
# the master with this one line, instead of workers failing over and over.
with exit_on_config_error():
    application = get_wsgi_application()
