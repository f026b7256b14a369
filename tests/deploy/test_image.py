"""The image the manifests run (Dockerfile; there is no Docker engine here, so
its steps are checked one by one): the user the pods run as, every package,
static files collected at build time without baking a secret key into the
image, settings that start on a read-only data dir, and docker-compose.yml,
built from the same Dockerfile, still valid."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from django.conf import settings

from queues.engine import compiled
from tests.deploy.manifests import OVERLAYS, ROOT, build, pod_spec
from tests.deploy.runtime import (
    DOCKERFILE,
    SECRET_KEY,
    base_environment,
    build_time_collectstatic,
    can_mount_read_only,
    copied_from_context,
    dockerfile_stages,
    files,
    image_data_dir,
    read_only,
    run,
)

SHOW_STARTUP = "import django; django.setup(); print('started')"


def test_the_image_runs_as_the_numeric_user_the_pods_name() -> None:
    text = DOCKERFILE.read_text()
    # Numeric, so the kubelet can check runAsNonRoot against the image alone.
    (user,) = re.findall(r"^USER (\S+)$", text, re.MULTILINE)
    uid, gid = (int(part) for part in user.split(":"))
    assert uid != 0 and gid != 0
    assert f"--uid {uid} --gid {gid}" in text
    for overlay in OVERLAYS:
        for workload in build(overlay).berth_workloads():
            context = pod_spec(workload)["securityContext"]
            assert (context["runAsUser"], context["runAsGroup"]) == (uid, gid)


def test_the_image_holds_every_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    find = project["tool"]["setuptools"]["packages"]["find"]
    copied = set(re.findall(r"^COPY (\S+) \1$", DOCKERFILE.read_text(), re.MULTILINE))
    for package in (p.rstrip("*") for p in find["include"]):
        # The folder the image must copy: the package's own, or the one it is
        # found under (the CLI's berth_cli is under cli/).
        [where] = [w for w in find["where"] if (ROOT / w / package).is_dir()]
        assert (package if where == "." else where) in copied, package
    assert "COPY manage.py" in DOCKERFILE.read_text()


def test_every_app_of_the_project_is_packaged_and_in_the_image() -> None:
    """An app in INSTALLED_APPS that the wheel or the image leaves out stops
    every process at start-up (``grants`` once was)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    included = project["tool"]["setuptools"]["packages"]["find"]["include"]
    copied = set(re.findall(r"^COPY (\S+) \1$", DOCKERFILE.read_text(), re.MULTILINE))
    ours = [
        app.split(".")[0]
        for app in settings.INSTALLED_APPS
        if (ROOT / app.split(".")[0] / "__init__.py").is_file()
    ]
    assert "grants" in ours and "queues" in ours
    for package in ours:
        assert any(fnmatch.fnmatch(package, pattern) for pattern in included), (
            f"{package}: not in pyproject.toml's [tool.setuptools.packages.find] include"
        )
        assert package in copied, f"{package}: the Dockerfile does not COPY it"


# What .dockerignore keeps out of the build context below queues/: a
# checkout's own engine build, and caches.
NOT_IN_THE_CONTEXT = shutil.ignore_patterns("__pycache__", f"*{compiled.SUFFIX}", "native.json")
ENGINE_FROM_ITS_STAGE = (
    "COPY --from=engine /app/queues/engine/*.so /app/queues/engine/native.json queues/engine/"
)


def test_the_image_runs_the_engine_compiled_in_a_stage_of_its_own(tmp_path: Path) -> None:
    """The engine stage builds from the sources the image holds, and the
    image takes its build: laid out as the image's COPY lines lay it out,
    with this checkout's build standing in for the stage's, the engine a
    process imports is the compiled one."""
    stages = dockerfile_stages()
    engine, image = stages["engine"], stages["image"]
    assert "python scripts/build_engine.py --require" in engine
    assert ENGINE_FROM_ITS_STAGE in image.splitlines()
    # What the build's manifest hashes, in both stages: the engine's sources
    # (queues/) and what it depends on.
    inputs = {"queues", *(name for name, _ in compiled.DEPENDS)}
    for stage in (engine, image):
        copied = copied_from_context(stage)
        for name in inputs:
            assert any(name == c or name.startswith(c + "/") for c in copied), name
    if not compiled.choose(environ={}).compiled:
        pytest.skip("this checkout's engine is not compiled (make install compiles it)")
    app = tmp_path / "app"
    for source in copied_from_context(image):
        target = app / source
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / source).is_dir():
            shutil.copytree(ROOT / source, target, ignore=NOT_IN_THE_CONTEXT)
        else:
            shutil.copy2(ROOT / source, target)
    built = [p for p in compiled.HERE.iterdir() if p.name.endswith(compiled.SUFFIX)]
    for path in [*built, compiled.MANIFEST]:
        shutil.copy2(path, app / "queues" / "engine" / path.name)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("BERTH_PURE_ENGINE")}
    shown = run(
        [
            sys.executable,
            "-c",
            "from queues.engine import ENGINE, assign; print(ENGINE.why); print(assign.__file__)",
        ],
        environment,
        cwd=app,
    )
    assert shown.returncode == 0, shown.stderr
    why, where = shown.stdout.splitlines()
    assert why == f"compiled with mypyc ({len(compiled.MODULES)} modules)"
    assert Path(where) == app / "queues" / "engine" / f"assign{compiled.SUFFIX}"
    # Any source the stage did not build from: the image runs the pure engine.
    (app / "queues" / "engine" / "assign.py").write_text(
        (app / "queues" / "engine" / "assign.py").read_text() + "\n"
    )
    again = run(
        [sys.executable, "-c", "from queues.engine import ENGINE; print(ENGINE.why)"],
        environment,
        cwd=app,
    )
    assert again.stdout.startswith("pure Python: assign.py changed"), again.stdout + again.stderr


def test_an_engine_build_that_would_not_be_used_stops_the_image_build(tmp_path: Path) -> None:
    """The engine stage's files only, and a compiler that fails: make install
    goes on with the pure engine, the image build (``--require``) stops."""
    app = tmp_path / "app"
    (app / "scripts").mkdir(parents=True)
    shutil.copytree(ROOT / "queues", app / "queues", ignore=NOT_IN_THE_CONTEXT)
    shutil.copy2(ROOT / "scripts" / "build_engine.py", app / "scripts" / "build_engine.py")
    environment = {**os.environ, "CC": "false"}
    environment.pop("DJANGO_SETTINGS_MODULE", None)
    for flags, code in (([], 0), (["--require"], 1)):
        # The failed build still type-checks and generates C first.
        done = run(
            [sys.executable, "scripts/build_engine.py", *flags], environment, cwd=app, timeout=600
        )
        assert done.returncode == code, done.stdout + done.stderr
    assert "error: the compiled engine would not be used" in done.stderr


def test_static_files_are_collected_at_build_time_without_a_key(tmp_path: Path) -> None:
    environment, command = build_time_collectstatic()
    assert command[:3] == ["python", "manage.py", "collectstatic"]
    # A placeholder for that one command, long enough for settings.
    assert len(environment["BERTH_SECRET_KEY"]) >= 32
    assert "BERTH_SECRET_KEY" not in DOCKERFILE.read_text().split("\nENV ", 1)[1].split("\n")[0]
    data = image_data_dir(tmp_path)
    collected = files(data)
    assert "static/admin/css/base.css" in collected
    assert any(name.startswith("static/frontend/") for name in collected)
    # No generated key and no embedded database in the image.
    assert not [name for name in collected if not name.startswith("static")]


def test_settings_start_on_a_read_only_data_dir_given_the_key(tmp_path: Path) -> None:
    if not can_mount_read_only():
        pytest.skip("needs root and unshare to mount the data dir read-only")
    data = image_data_dir(tmp_path)
    env = {
        **base_environment(data),
        "DATABASE_URL": "postgresql://berth@db.invalid:5432/berth",
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
    }
    command = read_only([sys.executable, "-c", SHOW_STARTUP], data, ROOT)
    started = subprocess.run(
        command, cwd=ROOT, env={**env, "BERTH_SECRET_KEY": SECRET_KEY}, capture_output=True
    )
    assert started.returncode == 0, started.stderr.decode()
    assert started.stdout.decode().strip() == "started"
    # Without the key, settings would write one into the data dir: a clear stop.
    refused = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert refused.returncode == 2
    assert "berth: configuration error: BERTH_DATA_DIR=" in refused.stderr
    assert "set BERTH_SECRET_KEY" in refused.stderr


def test_docker_compose_is_still_valid() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/compose_config.py", "docker-compose.yml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
