# One image for web, worker and beat (see docker-compose.yml).
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 BERTH_DATA_DIR=/var/lib/berth
WORKDIR /app
COPY pyproject.toml constraints.txt README.md ./
COPY controlplane controlplane
COPY accounts accounts
COPY queues queues
COPY jobs jobs
COPY frontend frontend
COPY manage.py ./
RUN pip install --no-cache-dir -c constraints.txt . \
    && mkdir -p /var/lib/berth \
    && useradd --system --home /var/lib/berth berth \
    && chown berth /var/lib/berth
USER berth
EXPOSE 8000
# --preload: the app loads in the master, so a bad setting stops start-up at once.
CMD ["gunicorn", "controlplane.wsgi:application", "--preload", "--bind", "0.0.0.0:8000", "--workers", "3"]
