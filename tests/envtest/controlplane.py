"""A real Kubernetes control plane for the suite: etcd and kube-apiserver from
``KUBEBUILDER_ASSETS`` (controller-runtime's envtest convention) on free
loopback ports, with RBAC on, an audit log, and the CRDs Berth writes for.

No controllers run: nothing creates or admits Workloads, no garbage collector,
no namespace controller. Tests play Kueue by writing Workloads and their status
with their own field manager. Schema validation, CEL, defaulting, server-side
apply, RBAC, resourceVersion conflicts, watch, bookmarks and 410 Gone are the
real ones.

Used by the pytest fixtures in ``tests/conftest.py`` and by ``bench/reconcile.py``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
BINARIES = ("etcd", "kube-apiserver", "kubectl")
ADMIN_TOKEN_USER = "envtest-admin"
# Where Berth runs and what it runs as: deploy/base/rbac.yaml.
BERTH_NAMESPACE = "berth"
BERTH_SERVICE_ACCOUNT = "berth"
BERTH_USER = f"system:serviceaccount:{BERTH_NAMESPACE}:{BERTH_SERVICE_ACCOUNT}"
RBAC_FILE = ROOT / "deploy" / "base" / "rbac.yaml"
# The namespaces a bare API server makes for itself, plus Berth's own.
SYSTEM_NAMESPACES = frozenset(
    {"default", "kube-system", "kube-public", "kube-node-lease", BERTH_NAMESPACE}
)
CRD_FILES = (
    "kueue-v0.19.2/kueue.x-k8s.io_resourceflavors.yaml",
    "kueue-v0.19.2/kueue.x-k8s.io_cohorts.yaml",
    "kueue-v0.19.2/kueue.x-k8s.io_clusterqueues.yaml",
    "kueue-v0.19.2/kueue.x-k8s.io_localqueues.yaml",
    "kueue-v0.19.2/kueue.x-k8s.io_workloadpriorityclasses.yaml",
    "kueue-v0.19.2/kueue.x-k8s.io_admissionchecks.yaml",
    "kueue-v0.19.2/kueue.x-k8s.io_workloads.yaml",
    "kueue-v0.19.2/kueue.x-k8s.io_topologies.yaml",
    "jobset-v0.12.0/jobset.x-k8s.io_jobsets.yaml",
    "training-operator-v1.9.4/kubeflow.org_pytorchjobs.yaml",
    "trainer-v2.3.0/trainer.kubeflow.org_trainjobs.yaml",
)
# Every request at Metadata level: who did what to which resource, never bodies.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "rules": [{"level": "Metadata"}],
}


class Unavailable(Exception):
    """What the machine lacks to run a control plane, and what to set."""


def _exists(path: Path) -> bool:
    return all((path / name).is_file() and os.access(path / name, os.X_OK) for name in BINARIES)


def find_assets() -> Path:
    """The folder with etcd, kube-apiserver and kubectl. ``KUBEBUILDER_ASSETS``
    when set; else ``.envtest/`` (unpacked there from ``../shared/envtest`` when
    that exists). ``Unavailable`` says what to set when there is none."""
    named = os.environ.get("KUBEBUILDER_ASSETS", "")
    if named:
        path = Path(named)
        if not _exists(path):
            raise Unavailable(
                f"KUBEBUILDER_ASSETS={named} does not hold executable {', '.join(BINARIES)}"
            )
        return path
    local = ROOT / ".envtest"
    if _exists(local):
        return local
    unpack = SHARED / "envtest" / "unpack"
    if unpack.is_file():
        subprocess.run([str(unpack), str(local)], check=True, capture_output=True)
        return local
    raise Unavailable(
        "no Kubernetes control plane: set KUBEBUILDER_ASSETS to a folder with etcd, "
        "kube-apiserver and kubectl (e.g. from setup-envtest)"
    )


def find_crds() -> Path:
    """``BERTH_CRDS_DIR`` (default ``../shared/crds``): the published CRDs of
    Kueue, JobSet, Kubeflow Trainer and the training operator."""
    named = os.environ.get("BERTH_CRDS_DIR", "")
    path = Path(named) if named else SHARED / "crds"
    missing = [f for f in CRD_FILES if not (path / f).is_file()]
    if missing:
        where = f"BERTH_CRDS_DIR={named}" if named else f"{path} (the default)"
        raise Unavailable(
            f"no CRDs at {where}: set BERTH_CRDS_DIR to a folder holding {missing[0]} "
            f"and the other CRD files Berth writes for"
        )
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class AuditLog:
    """The API server's audit log: what each identity asked for, in order.
    Events are read at stage RequestReceived, which the server writes before it
    handles the request, so a request whose answer came back is already here."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def offset(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def _read(self, since: int, user: str | None) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with self.path.open("rb") as log:
            log.seek(since)
            lines = log.read().splitlines()
        found = []
        for line in lines:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if user is None or event.get("user", {}).get("username") == user:
                    found.append(event)
        return found

    def requests(self, since: int = 0, user: str | None = None) -> list[dict[str, Any]]:
        """Requests as they arrived (stage RequestReceived)."""
        return [e for e in self._read(since, user) if e.get("stage") == "RequestReceived"]

    def events(
        self, since: int = 0, user: str | None = None, seconds: float = 10
    ) -> list[dict[str, Any]]:
        """Requests with their answers (stage ResponseComplete, with
        ``responseStatus``), in arrival order. The server logs an answer just after
        sending it, so this waits until every request but a watch has its answer."""
        deadline = time.monotonic() + seconds
        while True:
            events = self._read(since, user)
            answered = {e["auditID"]: e for e in events if e.get("stage") == "ResponseComplete"}
            arrived = [e for e in events if e.get("stage") == "RequestReceived"]
            waiting = [
                e for e in arrived if e["auditID"] not in answered and e.get("verb") != "watch"
            ]
            if not waiting or time.monotonic() > deadline:
                return [answered[e["auditID"]] for e in arrived if e["auditID"] in answered]
            time.sleep(0.05)


def is_write(event: dict[str, Any]) -> bool:
    """A request that changes stored state (a server-side dry run does not)."""
    verb = event.get("verb")
    if verb not in ("create", "update", "patch", "delete", "deletecollection"):
        return False
    return "dryRun=All" not in event.get("requestURI", "")


class ControlPlane:
    """etcd + kube-apiserver in a scratch folder; ``start()`` returns when the
    server is ready, the CRDs are Established and Berth's ServiceAccount exists."""

    def __init__(self, assets: Path, crds: Path, workdir: Path | None = None) -> None:
        self.assets, self.crds = assets, crds
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="berth-envtest-"))
        self.admin_token = base64.urlsafe_b64encode(os.urandom(24)).decode().rstrip("=")
        self.audit = AuditLog(self.workdir / "audit.log")
        self._processes: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.url = ""
        self.etcd_url = ""
        self.berth_token = ""
        self.uncached_url = ""
        # Written by start(): the cluster admin's, and Berth's ServiceAccount's.
        self.admin_kubeconfig = self.workdir / "admin.kubeconfig"
        self.berth_kubeconfig = self.workdir / "berth.kubeconfig"

    # ------------------------------------------------------------ lifecycle

    def start(self) -> ControlPlane:
        started = time.monotonic()
        self._start_etcd()
        self._start_apiserver()
        self._wait_ready(started)
        self.install_crds()
        self.berth_token = self.install_berth_identity()
        self.admin_kubeconfig = self.kubeconfig(self.workdir / "admin.kubeconfig")
        self.berth_kubeconfig = self.kubeconfig(
            self.workdir / "berth.kubeconfig", self.berth_token, user=BERTH_SERVICE_ACCOUNT
        )
        return self

    def stop(self) -> None:
        # Killed, not stopped: everything here is scratch, and an API server's
        # graceful shutdown takes seconds.
        for _, process in reversed(self._processes):
            if process.poll() is None:
                process.kill()
            process.wait()
        self._processes.clear()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = (self.workdir / f"{name}.log").open("ab")
        process = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
            preexec_fn=_die_with_parent,
        )
        self._processes.append((name, process))

    def log_tail(self, name: str, lines: int = 40) -> str:
        path = self.workdir / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def _start_etcd(self) -> None:
        client_port, peer_port = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client_port}"
        self._spawn(
            "etcd",
            [
                str(self.assets / "etcd"),
                "--data-dir",
                str(self.workdir / "etcd"),
                "--listen-client-urls",
                self.etcd_url,
                "--advertise-client-urls",
                self.etcd_url,
                "--listen-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-cluster",
                f"default=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync",
                # Progress notifications move the API server's view of the revision
                # forward between writes, so watches get their bookmarks.
                "--experimental-watch-progress-notify-interval=1s",
            ],
        )

    def _start_apiserver(self) -> None:
        (self.workdir / "certs").mkdir(exist_ok=True)
        key = self.workdir / "sa.key"
        if shutil.which("openssl") is None:
            raise Unavailable("openssl is needed to make the control plane's signing key")
        subprocess.run(
            ["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True
        )
        tokens = self.workdir / "tokens.csv"
        tokens.write_text(f'{self.admin_token},{ADMIN_TOKEN_USER},1,"system:masters"\n')
        (self.workdir / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))
        self.url = self._apiserver("kube-apiserver", self.audit.path, [])

    def _apiserver(self, name: str, audit: Path, extra: list[str]) -> str:
        port = free_port()
        self._spawn(
            name,
            [
                str(self.assets / "kube-apiserver"),
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.workdir / 'certs'}",
                f"--token-auth-file={self.workdir / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={self.workdir / 'sa.key'}",
                f"--service-account-signing-key-file={self.workdir / 'sa.key'}",
                "--service-cluster-ip-range=10.0.0.0/24",
                f"--audit-policy-file={self.workdir / 'audit-policy.yaml'}",
                f"--audit-log-path={audit}",
                "--audit-log-mode=blocking",
                # Tests compact etcd themselves when they want a 410 Gone.
                "--etcd-compaction-interval=0",
                *extra,
            ],
        )
        return f"https://127.0.0.1:{port}"

    def etcd_watch_server(self) -> str:
        """A second API server on the same etcd, without a watch cache: its watches
        come straight from etcd, so once etcd is compacted (``compact_etcd``) a
        watch from an older resourceVersion is answered 410 Gone. (The first
        server's watch cache keeps a window of history of its own, which no
        request can shorten; it is the one that sends bookmarks.) Started on first
        use; returns its URL."""
        if not self.uncached_url:
            self.uncached_url = self._apiserver(
                "kube-apiserver-uncached",
                self.workdir / "audit-uncached.log",
                ["--watch-cache=false"],
            )
            self._wait_ready(time.monotonic(), url=self.uncached_url)
        return self.uncached_url

    def _wait_ready(self, started: float, seconds: float = 60, url: str = "") -> None:
        deadline = started + seconds
        last = ""
        while time.monotonic() < deadline:
            for name, process in self._processes:
                if process.poll() is not None:
                    raise RuntimeError(
                        f"{name} exited with {process.returncode}:\n{self.log_tail(name)}"
                    )
            try:
                if self.raw("GET", "/readyz", url=url) == b"ok":
                    return
            except (OSError, urllib.error.URLError) as exc:
                last = str(exc)
            time.sleep(0.2)
        raise RuntimeError(
            f"kube-apiserver not ready after {seconds:.0f} s ({last}):\n"
            f"{self.log_tail('kube-apiserver')}"
        )

    # --------------------------------------------------------------- access

    @property
    def ca_file(self) -> Path:
        return self.workdir / "certs" / "apiserver.crt"

    def raw(
        self, method: str, path: str, body: Any = None, token: str | None = None, url: str = ""
    ) -> bytes:
        """One HTTP request with the admin's (or ``token``'s) credentials."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request((url or self.url) + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {token or self.admin_token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:
            return bytes(answer.read())

    def api_client(self, token: str | None = None, url: str = "") -> client.ApiClient:
        """The official client as the admin, or as whoever ``token`` is."""
        configuration = client.Configuration()
        configuration.host = url or self.url
        configuration.ssl_ca_cert = str(self.ca_file)
        configuration.api_key = {"authorization": token or self.admin_token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        return client.ApiClient(configuration)

    def berth_client(self, url: str = "") -> client.ApiClient:
        """The official client as Berth's ServiceAccount."""
        return self.api_client(self.berth_token, url)

    def kubeconfig(self, path: Path, token: str | None = None, user: str = "admin") -> Path:
        """A kubeconfig file for the admin, or for whoever ``token`` is."""
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "envtest",
                            "cluster": {
                                "server": self.url,
                                "certificate-authority": str(self.ca_file),
                            },
                        }
                    ],
                    "users": [{"name": user, "user": {"token": token or self.admin_token}}],
                    "contexts": [{"name": user, "context": {"cluster": "envtest", "user": user}}],
                    "current-context": user,
                }
            )
        )
        return path

    def kubectl(self, *args: str, token: str | None = None, stdin: str | None = None) -> str:
        """kubectl against this server; raises with its stderr when it fails."""
        config = self.workdir / ("kubeconfig-" + ("admin" if token is None else "token"))
        self.kubeconfig(config, token)
        done = subprocess.run(
            [str(self.assets / "kubectl"), f"--kubeconfig={config}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise subprocess.CalledProcessError(
                done.returncode, ["kubectl", *args], done.stdout, done.stderr
            )
        return done.stdout

    # ----------------------------------------------------------- installing

    def install_crds(self, seconds: float = 60) -> None:
        """Server-side apply every CRD, then wait until each is Established."""
        crds = [load_yaml(self.crds / relative) for relative in CRD_FILES]
        with self.api_client() as api:
            extensions = client.ApiextensionsV1Api(api)

            def apply(crd: dict[str, Any]) -> None:
                extensions.patch_custom_resource_definition(
                    crd["metadata"]["name"],
                    crd,
                    field_manager="envtest",
                    force=True,
                    _content_type="application/apply-patch+yaml",
                )

            # The server builds each CRD's schema and CEL programs as it takes it;
            # a few at once use both cores.
            with ThreadPoolExecutor(max_workers=4) as pool:
                list(pool.map(apply, crds))
            deadline = time.monotonic() + seconds
            for crd in crds:
                name = crd["metadata"]["name"]
                while not _established(extensions.read_custom_resource_definition(name)):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"CRD {name} not Established after {seconds:.0f} s")
                    time.sleep(0.05)
        # Discovery lags behind Established by a moment; Berth reads discovery first.
        deadline = time.monotonic() + seconds
        while not self._serves_every_group():
            if time.monotonic() > deadline:
                raise RuntimeError("the CRDs' API groups are not in discovery")
            time.sleep(0.05)

    def _serves_every_group(self) -> bool:
        groups = json.loads(self.raw("GET", "/apis"))
        served = {g["name"] for g in groups.get("groups", [])}
        return {
            "kueue.x-k8s.io",
            "jobset.x-k8s.io",
            "kubeflow.org",
            "trainer.kubeflow.org",
        } <= served

    def apply_manifests(self, documents: list[dict[str, Any]], manager: str = "envtest") -> None:
        """Server-side apply as the admin, through kubectl (any kind)."""
        self.kubectl(
            "apply",
            "--server-side",
            f"--field-manager={manager}",
            "--force-conflicts",
            "-f",
            "-",
            stdin=yaml.safe_dump_all(documents),
        )

    def install_berth_identity(self) -> str:
        """Berth's ServiceAccount, ClusterRole and binding, exactly as
        ``deploy/base/rbac.yaml`` ships them; returns a token for it."""
        documents = [d for d in yaml.safe_load_all(RBAC_FILE.read_text()) if d]
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": BERTH_NAMESPACE}}
        self.apply_manifests([namespace, *documents])
        return self.service_account_token(BERTH_NAMESPACE, BERTH_SERVICE_ACCOUNT)

    def service_account_token(self, namespace: str, name: str, seconds: int = 86400) -> str:
        with self.api_client() as api:
            answer = client.CoreV1Api(api).create_namespaced_service_account_token(
                name,
                namespace,
                client.AuthenticationV1TokenRequest(
                    spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=seconds)
                ),
            )
        return str(answer.status.token)

    # ------------------------------------------------------------- history

    def compact_etcd(self) -> int:
        """Compact etcd's history up to now (what the API server does every five
        minutes by default); returns the revision compacted to."""
        status = self._etcd("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})
        revision = int(status["header"]["revision"])
        self._etcd("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    def _etcd(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self.etcd_url + path, data=json.dumps(body).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return dict(json.loads(answer.read()))


def _die_with_parent() -> None:
    """A killed test run leaves no etcd or API server behind (Linux: the child
    gets SIGKILL when the process that started it dies)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def load_yaml(path: Path) -> dict[str, Any]:
    """One YAML document, with libyaml when PyYAML has it (the CRDs are ~70,000
    lines: ten times faster than the pure-Python loader)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return dict(yaml.load(path.read_text(), Loader=loader))


def _established(crd: Any) -> bool:
    conditions = (crd.status and crd.status.conditions) or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


@contextlib.contextmanager
def running(assets: Path, crds: Path) -> Iterator[ControlPlane]:
    with ControlPlane(assets, crds) as plane:
        yield plane
