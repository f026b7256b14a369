"""What each overlay under deploy/ builds to: the four Deployments and the
migrations Job with the right commands, one image, Berth's identity as
deploy/base/rbac.yaml ships it, secrets only by reference, settings the code
reads, and every container probed, sized and locked down."""

from __future__ import annotations

import base64
import re
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.deploy.manifests import (
    IDENTITY_KINDS,
    IMAGE,
    NAMESPACE,
    OVERLAYS,
    ROOT,
    SECRET_KEYS,
    SERVICE_ACCOUNT,
    WEB_SECRET_KEYS,
    Built,
    argv,
    build,
    containers,
    labels,
    main_container,
    pod_spec,
    rbac_documents,
)

DEPLOYMENTS = {"web", "worker", "beat", "watch"}


@pytest.fixture(params=OVERLAYS)
def built(request: pytest.FixtureRequest) -> Built:
    return build(request.param)


def settings_variables() -> set[str]:
    """Every environment variable controlplane/settings.py reads."""
    source = (ROOT / "controlplane" / "settings.py").read_text()
    return set(re.findall(r'env\.\w+\(\s*"([A-Z][A-Z0-9_]*)"', source))


def effective(container: dict[str, Any], pod: dict[str, Any], field: str) -> Any:
    """A security field as the kubelet applies it: the container's, else the pod's."""
    own = container.get("securityContext", {})
    return own[field] if field in own else pod.get("securityContext", {}).get(field)


def test_the_four_deployments_run_berths_processes(built: Built) -> None:
    components = {
        labels(d)["app.kubernetes.io/component"]
        for d in built.of_kind("Deployment")
        if labels(d)["app.kubernetes.io/name"] == "berth"
    }
    assert components == DEPLOYMENTS

    web = main_container(built.component("web"))
    assert argv(web)[:2] == ["gunicorn", "controlplane.wsgi:application"]
    assert "--bind=0.0.0.0:8000" in argv(web)
    assert web["ports"] == [{"name": "http", "containerPort": 8000}]
    assert argv(main_container(built.component("worker")))[:4] == [
        "celery",
        "-A",
        "controlplane",
        "worker",
    ]
    assert argv(main_container(built.component("beat")))[:4] == [
        "celery",
        "-A",
        "controlplane",
        "beat",
    ]
    watch = argv(main_container(built.component("watch")))
    assert watch[:3] == ["python", "manage.py", "sync_watch"]
    assert any(arg.startswith("--heartbeat-file=") for arg in watch)
    service = built.get("Service", "berth-web")
    assert service["spec"]["ports"][0]["port"] == 8000
    assert (
        service["spec"]["selector"].items()
        <= labels(built.component("web")["spec"]["template"]).items()
    )


def test_a_job_runs_the_migrations(built: Built) -> None:
    job = built.component("migrate")
    assert job["kind"] == "Job"
    assert argv(main_container(job)) == ["python", "manage.py", "migrate", "--noinput"]
    assert pod_spec(job)["restartPolicy"] in ("Never", "OnFailure")
    # Every Deployment waits for the schema its code expects.
    for component in DEPLOYMENTS:
        (init,) = pod_spec(built.component(component))["initContainers"]
        assert "manage.py migrate --check" in " ".join(argv(init))


def test_beat_and_the_watch_never_run_twice(built: Built) -> None:
    for component in ("beat", "watch"):
        deployment = built.component(component)
        assert deployment["spec"]["replicas"] == 1
        assert deployment["spec"]["strategy"] == {"type": "Recreate"}


def test_every_berth_pod_runs_as_berths_service_account_with_one_image(built: Built) -> None:
    images = set()
    for workload in built.berth_workloads():
        spec = pod_spec(workload)
        assert spec["serviceAccountName"] == SERVICE_ACCOUNT
        assert workload["metadata"]["namespace"] == NAMESPACE
        images |= {c["image"] for c in containers(workload)}
    (image,) = images
    name, _, tag = image.partition(":")
    assert name == IMAGE
    assert tag and tag != "latest"


def test_only_the_processes_that_call_the_cluster_hold_a_token(built: Built) -> None:
    """Web, beat and migrations reach PostgreSQL and Redis only; the worker and
    the watch call the API server. The dev database and Redis are not Berth."""
    for workload in built.workloads():
        component = labels(workload).get("app.kubernetes.io/component")
        mounts_token = pod_spec(workload).get("automountServiceAccountToken", True)
        assert mounts_token == (component in ("worker", "watch")), workload["metadata"]["name"]
        if workload not in built.berth_workloads():
            assert "serviceAccountName" not in pod_spec(workload)


def test_berths_identity_is_rbac_yaml_unchanged(built: Built) -> None:
    shipped = {(d["kind"], d["metadata"]["name"]): d for d in rbac_documents()}
    found = {
        (o["kind"], o["metadata"]["name"]): o for o in built.objects if o["kind"] in IDENTITY_KINDS
    }
    assert found == shipped
    namespaces = {o["metadata"].get("namespace") for o in built.objects} - {None}
    assert namespaces == {NAMESPACE}
    assert [o["metadata"]["name"] for o in built.of_kind("Namespace")] == [NAMESPACE]


def test_secrets_come_only_from_the_secret_by_reference(built: Built) -> None:
    for workload in built.berth_workloads():
        for container in containers(workload):
            wanted = WEB_SECRET_KEYS if container["name"] == "web" else SECRET_KEYS
            references = {}
            for variable in container["env"]:
                assert "value" not in variable, f"{variable['name']} has a literal value"
                reference = variable["valueFrom"]["secretKeyRef"]
                assert reference["key"] == variable["name"]
                references[variable["name"]] = reference
            assert set(references) == set(wanted), container["name"]
            assert {r["name"] for r in references.values()} == {_secret_name(built)}
            for name, reference in references.items():
                assert reference.get("optional", False) == (name == "BERTH_METRICS_TOKEN")
    config = built.config()
    assert not set(config) & set(WEB_SECRET_KEYS)


def _secret_name(built: Built) -> str:
    if built.overlay == "production":
        return "berth"
    (secret,) = built.of_kind("Secret")
    return str(secret["metadata"]["name"])


def test_production_ships_no_secret_and_dev_only_obvious_dev_values(built: Built) -> None:
    secrets = built.of_kind("Secret")
    if built.overlay == "production":
        assert secrets == []
        assert "dev-only" not in built.text
        return
    (secret,) = secrets
    assert secret["metadata"]["name"].startswith("berth-")
    values = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert set(WEB_SECRET_KEYS) <= set(values)
    # Credentials say what they are; the URLs reach the overlay's own services.
    for name, value in values.items():
        if name != "CELERY_BROKER_URL":
            assert "dev-only" in value, name
    services = {s["metadata"]["name"] for s in built.of_kind("Service")}
    for name in ("DATABASE_URL", "CELERY_BROKER_URL"):
        host = urlsplit(values[name]).hostname
        assert host in services, (name, host)


def test_the_config_holds_only_settings_berth_reads(built: Built) -> None:
    config = built.config()
    assert config["BERTH_CLUSTER"] == "kubernetes"
    assert set(config) <= settings_variables(), set(config) - settings_variables()
    for workload in built.berth_workloads():
        for container in containers(workload):
            (source,) = container["envFrom"]
            assert source["configMapRef"]["name"].startswith("berth-config-")


def test_every_container_is_sized(built: Built) -> None:
    for workload, container in built.all_containers():
        resources = container["resources"]
        for kind in ("requests", "limits"):
            assert set(resources[kind]) == {"cpu", "memory"}, (workload["metadata"]["name"], kind)


def test_every_pod_and_container_is_locked_down(built: Built) -> None:
    for workload in built.workloads():
        pod = pod_spec(workload)
        context = pod["securityContext"]
        assert context["runAsNonRoot"] is True
        assert isinstance(context["runAsUser"], int) and context["runAsUser"] > 0
        assert isinstance(context["runAsGroup"], int) and context["runAsGroup"] > 0
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in containers(workload):
            where = f"{workload['metadata']['name']}/{container['name']}"
            own = container["securityContext"]
            assert own["allowPrivilegeEscalation"] is False, where
            assert own["readOnlyRootFilesystem"] is True, where
            assert own["capabilities"] == {"drop": ["ALL"]}, where
            assert effective(container, pod, "runAsNonRoot") is True, where
            assert effective(container, pod, "runAsUser") > 0, where
            assert effective(container, pod, "seccompProfile") == {"type": "RuntimeDefault"}
        if workload in built.berth_workloads():
            assert (context["runAsUser"], context["runAsGroup"]) == (10001, 10001)


def test_what_processes_write_is_on_an_emptydir(built: Built) -> None:
    """The root is read-only: /tmp, and beat's schedule and the heartbeats, are
    emptyDirs; the data dir (static files collected into the image) is not."""
    for workload in built.berth_workloads():
        pod = pod_spec(workload)
        empty = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
        for container in containers(workload):
            mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
            assert mounts.get("/tmp") in empty, container["name"]
            assert "/var/lib/berth" not in mounts
            for word in argv(container):
                for option in ("--schedule=", "--heartbeat-file="):
                    if word.startswith(option):
                        folder = word.removeprefix(option).rsplit("/", 1)[0]
                        assert mounts.get(folder) in empty, word


def test_every_long_running_container_is_probed(built: Built) -> None:
    for deployment in built.of_kind("Deployment"):
        for container in pod_spec(deployment)["containers"]:
            assert "readinessProbe" in container, container["name"]
            assert "livenessProbe" in container, container["name"]
    web = main_container(built.component("web"))
    ready = web["readinessProbe"]["httpGet"]
    assert ready["path"] == "/healthz"
    # The kubelet would send the pod's IP as Host, which ALLOWED_HOSTS refuses.
    assert {"name": "Host", "value": "localhost"} in ready["httpHeaders"]
    # Heartbeat probes (file, age limit): the worker beats every 10 s, beat at
    # least every --max-interval, the watch at least every --timeout.
    beat = argv(main_container(built.component("beat")))
    watch = argv(main_container(built.component("watch")))
    bound = max(_option(beat, "--max-interval"), _option(watch, "--timeout"), 10)
    heartbeats = {
        "worker": _option_text(argv(main_container(built.component("worker"))), "--heartbeat-file"),
        "beat": _option_text(beat, "--schedule").rsplit("/", 1)[0] + "/heartbeat",
        "watch": _option_text(watch, "--heartbeat-file"),
    }
    for component, heartbeat in heartbeats.items():
        container = main_container(built.component(component))
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            command = container[kind]["exec"]["command"]
            assert command[:2] == ["python", "-c"] and "st_mtime" in command[2]
            assert command[3] == heartbeat, (component, kind)
            assert float(command[4]) > bound, (component, kind)


def _option_text(words: list[str], name: str) -> str:
    (value,) = [w.split("=", 1)[1] for w in words if w.startswith(name + "=")]
    return value


def _option(words: list[str], name: str) -> float:
    return float(_option_text(words, name))


def test_web_has_a_disruption_budget_and_production_several_replicas(built: Built) -> None:
    web = built.component("web")
    (budget,) = built.of_kind("PodDisruptionBudget")
    selector = budget["spec"]["selector"]["matchLabels"]
    matched = [
        w["metadata"]["name"]
        for w in built.workloads()
        if selector.items() <= labels(w["spec"]["template"]).items()
    ]
    assert matched == [web["metadata"]["name"]]
    # With maxUnavailable a drain proceeds one pod at a time whatever the count.
    assert budget["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": selector}}
    if built.overlay == "production":
        assert web["spec"]["replicas"] >= 2


def test_the_overlays_differ_where_they_should() -> None:
    dev, production = build("dev"), build("production")
    assert dev.config()["BERTH_LOG_LEVEL"] != production.config()["BERTH_LOG_LEVEL"]
    image = {b.overlay: main_container(b.component("web"))["image"] for b in (dev, production)}
    assert image["dev"] != image["production"]
    for component in ("web", "worker"):
        assert (
            dev.component(component)["spec"]["replicas"]
            < production.component(component)["spec"]["replicas"]
        )
    # Selectors cannot change on a live Deployment: the overlays share them.
    for component in DEPLOYMENTS:
        assert (
            dev.component(component)["spec"]["selector"]
            == production.component(component)["spec"]["selector"]
        )
