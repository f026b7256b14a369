# One image for every Berth process: web, worker, beat, the workload watch and
# migrations (docker-compose.yml, deploy/). It runs as uid 10001 and works on a
# read-only root filesystem: with BERTH_SECRET_KEY and DATABASE_URL set, nothing
# is written below /app or the data dir at run time.

# The engine's replay path compiled with mypyc (scripts/build_engine.py: the
# same answers, replays 1.25 to 1.9 times as fast), in a stage of its own so that the
# compiler and mypy stay out of the image. The image takes the extension modules
# and their manifest; the manifest holds the hashes of what they were built
# from, so the image copies the same sources and build script (the engine runs
# as pure Python wherever they differ). --require: a build that fails stops
# the image build instead of shipping the pure engine unsaid.
FROM python:3.11-slim AS engine
WORKDIR /app
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
COPY constraints.txt ./
RUN pip install --no-cache-dir -c constraints.txt mypy mypy-extensions setuptools
COPY queues queues
COPY scripts/build_engine.py scripts/build_engine.py
RUN python scripts/build_engine.py --require

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 BERTH_DATA_DIR=/var/lib/berth
WORKDIR /app
COPY pyproject.toml constraints.txt README.md ./
COPY controlplane controlplane
COPY accounts accounts
COPY queues queues
COPY cluster cluster
COPY jobs jobs
COPY approvals approvals
COPY whatif whatif
COPY grants grants
COPY cli cli
COPY frontend frontend
COPY manage.py ./
COPY scripts/build_engine.py scripts/build_engine.py
COPY --from=engine /app/queues/engine/*.so /app/queues/engine/native.json queues/engine/
# - Bytecode is compiled now: at run time the filesystem is read-only, so every
#   start would compile the sources again.
# - Static files are collected now into $BERTH_DATA_DIR/static (STATIC_ROOT),
#   owned by root, which WhiteNoise serves and nothing at run time can change.
#   The key is a placeholder for this one command: without a key, settings would
#   generate one into the image.
# - The data dir itself belongs to the user, so a run with a writable filesystem
#   (compose keeps beat's schedule there) can still write next to the static files.
RUN pip install --no-cache-dir -c constraints.txt . \
    && python -m compileall -q /app \
    && BERTH_SECRET_KEY=build-time-placeholder-not-used-at-run-time \
       python manage.py collectstatic --noinput --verbosity 0 \
    && groupadd --system --gid 10001 berth \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/berth \
       --no-create-home --shell /usr/sbin/nologin berth \
    && chown 10001:10001 /var/lib/berth
# Numeric, so Kubernetes can check runAsNonRoot against the image itself.
USER 10001:10001
EXPOSE 8000
# --preload: the app loads in the master, so a bad setting stops start-up at once.
# Worker heartbeats go to /dev/shm (a tmpfs, writable even on a read-only root);
# no control socket, which would be made in $HOME.
CMD ["gunicorn", "controlplane.wsgi:application", "--preload", "--bind", "0.0.0.0:8000", "--workers", "3", "--worker-tmp-dir", "/dev/shm", "--no-control-socket"]
