"""``ControlPlane``: etcd + kube-apiserver (+ kube-controller-manager, kube-scheduler) v1.37.2
on free loopback ports, with every workload-aware-scheduling feature gate on.

Every component runs in its own process group with its log in ``<run_dir>/logs``. The plane
is stopped by :meth:`ControlPlane.stop`, by the context managers, at interpreter exit
(``atexit``) and, for children started from the main thread, by the kernel when this process
dies (``PR_SET_PDEATHSIG``), so an interrupted test run leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import http.client
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, TypeVar

import attrs
import yaml

from workloadbuilder.testing._binaries import ControlPlaneError, find_binaries
from workloadbuilder.testing._pki import CertPair, Pki
from workloadbuilder.testing._rest import RestClient

__all__ = [
    "ADMIN_USER",
    "DEFAULT_CONTROLLERS",
    "DISABLED_ADMISSION_PLUGINS",
    "RUNTIME_CONFIG",
    "WAS_FEATURE_GATES",
    "ControlPlane",
]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

#: Feature gates switched on in every component (all exist in v1.37.2 ``--help``).
WAS_FEATURE_GATES: tuple[str, ...] = (
    "GenericWorkload",
    "TopologyAwareWorkloadScheduling",
    "CompositePodGroup",
    "PodGroupPreemptionPolicy",
    "DRAWorkloadResourceClaims",
    "WorkloadWithJob",
)
#: API versions served in addition to the defaults.
RUNTIME_CONFIG: tuple[str, ...] = (
    "scheduling.k8s.io/v1beta1=true",
    "scheduling.k8s.io/v1alpha3=true",
)
#: kube-controller-manager controllers run when it is enabled (names from v1.37.2 ``--help``).
DEFAULT_CONTROLLERS: tuple[str, ...] = (
    "job-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "podgroup-protection-controller",
    "resourceclaim-controller",
)
#: The admin identity; ``system:masters`` bypasses RBAC.
ADMIN_USER = "workloadbuilder-admin"
_ADMIN_GROUPS = ("system:masters",)
#: Admission plugins disabled by default: there is no ServiceAccount controller and no
#: kubelet to clear the not-ready taint of fake Nodes.
DISABLED_ADMISSION_PLUGINS: tuple[str, ...] = ("ServiceAccount", "TaintNodesByCondition")
_PORT_ATTEMPTS = 3

_LIVE: set[ControlPlane] = set()
_LIVE_LOCK = threading.Lock()


def _stop_all_at_exit() -> None:
    with _LIVE_LOCK:
        planes = list(_LIVE)
    for plane in planes:
        try:
            plane.stop()
        except Exception:  # best effort at interpreter exit
            _log.exception("stopping the control plane at exit failed")


atexit.register(_stop_all_at_exit)

_PR_SET_PDEATHSIG = 1
try:
    _prctl: Any = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _prctl = None


def _die_with_parent() -> None:  # runs in the forked child before exec
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


@attrs.define(kw_only=True)
class _Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes]


@attrs.frozen(kw_only=True)
class _Wait:
    """A start step: wait until ``probe()`` is true while ``proc`` is alive."""

    proc: _Proc
    probe: Callable[[], bool]


class ControlPlane:
    """A local v1.37.2 control plane for tests and development.

    ``run_dir`` holds the PKI, kubeconfigs, component configs and logs (``logs/*.log``); a
    temporary directory is used (and removed on a clean stop) when it is ``None``. The etcd
    data directory is always fresh and removed on stop.

    Use it synchronously (``start()``/``stop()`` or ``with``) or asynchronously
    (``async with``). ``kubeconfig`` is an admin kubeconfig (``system:masters``);
    :meth:`mint_kubeconfig` makes one for any user and groups, for RBAC tests.
    """

    def __init__(
        self,
        run_dir: Path | str | None = None,
        *,
        with_controller_manager: bool = False,
        defer_controller_manager: bool = False,
        with_scheduler: bool = False,
        controllers: Sequence[str] = DEFAULT_CONTROLLERS,
        bin_dir: Path | str | None = None,
        feature_gates: Mapping[str, bool] | None = None,
        disable_admission_plugins: Sequence[str] = DISABLED_ADMISSION_PLUGINS,
        extra_apiserver_args: Sequence[str] = (),
        startup_timeout: float = 180.0,
        keep_run_dir: bool | None = None,
    ) -> None:
        self.with_controller_manager = with_controller_manager
        #: with ``with_controller_manager``: start it only in :meth:`start_controller_manager`
        self.defer_controller_manager = defer_controller_manager
        self.with_scheduler = with_scheduler
        self.controllers = tuple(controllers)
        gates = dict.fromkeys(WAS_FEATURE_GATES, True)
        gates.update(feature_gates or {})
        self.feature_gates: dict[str, bool] = gates
        self.disable_admission_plugins = tuple(disable_admission_plugins)
        self.extra_apiserver_args = tuple(extra_apiserver_args)
        self.startup_timeout = startup_timeout
        components = ["etcd", "kube-apiserver"]
        if with_controller_manager:
            components.append("kube-controller-manager")
        if with_scheduler:
            components.append("kube-scheduler")
        self._binaries = find_binaries(bin_dir, components)
        self.bin_dir: Path = self._binaries["etcd"].parent
        self._own_run_dir = run_dir is None
        self._requested_run_dir = Path(run_dir).absolute() if run_dir is not None else None
        self._keep_run_dir = keep_run_dir
        self._run_dir: Path | None = None
        self._procs: list[_Proc] = []
        self._pki: Pki | None = None
        self._admin: CertPair | None = None
        self._kubeconfig: Path | None = None
        self._server: str | None = None
        self._started = False
        self._stop_lock = threading.Lock()
        self._apiserver_args: list[str] = []
        self._apiserver_probe: Callable[[], bool] | None = None

    # ----------------------------------------------------------------- public properties
    @property
    def run_dir(self) -> Path:
        """The run directory (PKI, kubeconfigs, logs)."""
        return self._need(self._run_dir, "run_dir")

    @property
    def log_dir(self) -> Path:
        """``<run_dir>/logs``: one ``<component>.log`` per process."""
        return self.run_dir / "logs"

    @property
    def kubeconfig(self) -> Path:
        """Absolute path of the admin kubeconfig (user in ``system:masters``)."""
        return self._need(self._kubeconfig, "kubeconfig")

    @property
    def server(self) -> str:
        """The API server URL, ``https://127.0.0.1:<port>``."""
        return self._need(self._server, "server")

    @property
    def ca_file(self) -> Path:
        """The CA certificate that signed the serving and client certificates."""
        return self._need(self._pki, "ca_file").ca_cert

    @property
    def running(self) -> bool:
        """True between a successful start and stop."""
        return self._started

    def _need(self, value: _T | None, what: str) -> _T:
        if value is None:
            raise ControlPlaneError(f"the control plane is not started ({what} unavailable)")
        return value

    # ------------------------------------------------------------------- life cycle
    def start(self) -> ControlPlane:
        """Start every component and wait until each is ready. Returns ``self``."""
        self._refuse_restart()
        steps = self._start_steps()
        try:
            result: bool | None = None
            while True:
                try:
                    wait = steps.send(result)
                except StopIteration:
                    break
                result = self._wait_sync(wait)
        except BaseException:
            self._stop(failed=True)
            raise
        return self

    async def astart(self) -> ControlPlane:
        """Async :meth:`start`: processes are spawned in the event-loop thread and readiness
        is polled without blocking the loop."""
        self._refuse_restart()
        steps = self._start_steps()
        try:
            result: bool | None = None
            while True:
                try:
                    wait = steps.send(result)
                except StopIteration:
                    break
                result = await self._wait_async(wait)
        except BaseException:
            await asyncio.to_thread(self._stop, failed=True)
            raise
        return self

    def _refuse_restart(self) -> None:
        if self._started or self._procs:
            raise ControlPlaneError("the control plane is already started")

    def stop(self) -> None:
        """Stop every component (SIGTERM, then SIGKILL) and clean up. Idempotent."""
        self._stop(failed=False)

    async def astop(self) -> None:
        """Async :meth:`stop`."""
        await asyncio.to_thread(self.stop)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> ControlPlane:
        return await self.astart()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.astop()

    def check(self) -> None:
        """Raise :class:`ControlPlaneError` if a component exited since it started."""
        for proc in self._procs:
            code = proc.popen.poll()
            if code is not None:
                raise ControlPlaneError(
                    f"{proc.name} exited with code {code}; last log lines "
                    f"({proc.log_path}):\n{_tail(proc.log_path)}"
                )

    def restart_apiserver(self, *, kill: bool = True, down_seconds: float = 0.0) -> float:
        """Stop kube-apiserver (SIGKILL, or SIGTERM with ``kill=False``), wait
        ``down_seconds``, start it again with the same flags on the same port (etcd and its
        data stay) and wait until it is ready. Every open connection and watch is cut. Returns
        the seconds from the stop to ready again. For fault tests."""
        if not self._started or self._apiserver_probe is None:
            raise ControlPlaneError("the control plane is not started")
        (old,) = [p for p in self._procs if p.name == "kube-apiserver"]
        t0 = time.monotonic()
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(old.popen.pid, signal.SIGKILL)
            old.popen.wait(30)
            old.log_file.close()
        else:
            self._terminate(old)
        index = self._procs.index(old)
        self._procs.remove(old)
        if down_seconds > 0:
            time.sleep(down_seconds)
        for _attempt in range(20):  # the port may be busy for a moment after the kill
            proc = self._spawn("kube-apiserver", list(self._apiserver_args))
            self._procs.remove(proc)
            self._procs.insert(index, proc)
            if self._wait_sync(_Wait(proc=proc, probe=self._apiserver_probe)):
                return time.monotonic() - t0
            self._terminate(proc)
            self._procs.remove(proc)
            if "address already in use" not in _tail(proc.log_path):
                break
            time.sleep(0.5)
        raise ControlPlaneError(
            f"kube-apiserver did not come back; last log lines:\n{_tail(proc.log_path)}"
        )

    async def arestart_apiserver(self, *, kill: bool = True, down_seconds: float = 0.0) -> float:
        """Async :meth:`restart_apiserver` (runs in a worker thread)."""
        return await asyncio.to_thread(self.restart_apiserver, kill=kill, down_seconds=down_seconds)

    # ----------------------------------------------------------------- identities
    def mint_kubeconfig(self, user: str, groups: Sequence[str] = ()) -> Path:
        """Write a kubeconfig whose client certificate authenticates as ``user`` in
        ``groups`` (no RBAC bindings are created) and return its absolute path."""
        pair = self._client_pair(user, tuple(groups))
        safe = pair.cert.stem.removeprefix("client-")
        path = self.run_dir / "kubeconfigs" / f"{safe}.kubeconfig"
        return self._write_kubeconfig(path, pair, user)

    def client(self, user: str | None = None, groups: Sequence[str] = ()) -> RestClient:
        """A :class:`RestClient` as the admin (default) or as ``user`` in ``groups``."""
        pair = (
            self._need(self._admin, "admin")
            if user is None
            else self._client_pair(user, tuple(groups))
        )
        return RestClient(self.server, ca_file=self.ca_file, cert_file=pair.cert, key_file=pair.key)

    def create_namespace(self, prefix: str = "test-") -> str:
        """Create a namespace with a unique name starting with ``prefix`` and return it."""
        name = f"{prefix}{secrets.token_hex(4)}"
        with self.client() as client:
            resp = client.create(
                "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            )
        if not resp.ok:
            raise ControlPlaneError(f"creating namespace {name}: {resp.status} {resp.message}")
        return name

    def _client_pair(self, user: str, groups: tuple[str, ...]) -> CertPair:
        if not user:
            raise ValueError("user must not be empty")
        pki: Pki = self._need(self._pki, "pki")
        suffix = "-".join(groups)
        stem = f"client-{user}" + (f"--{suffix}" if suffix else "")
        stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)
        return pki.client(user, groups, stem=stem)

    def _write_kubeconfig(self, path: Path, pair: CertPair, user: str) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "workloadbuilder",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority": str(self.ca_file),
                    },
                }
            ],
            "users": [
                {
                    "name": user,
                    "user": {"client-certificate": str(pair.cert), "client-key": str(pair.key)},
                }
            ],
            "contexts": [
                {"name": "workloadbuilder", "context": {"cluster": "workloadbuilder", "user": user}}
            ],
            "current-context": "workloadbuilder",
        }
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        path.chmod(0o600)
        return path.absolute()

    def _controller_manager_steps(self) -> Generator[_Wait, bool | None, None]:
        run_dir = self.run_dir
        pki: Pki = self._need(self._pki, "pki")
        kubeconfig = str(self._need(self._kubeconfig, "kubeconfig"))
        gates = ",".join(f"{k}={'true' if v else 'false'}" for k, v in self.feature_gates.items())
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        for attempt in range(_PORT_ATTEMPTS):
            port = _free_port()
            proc = self._spawn(
                "kube-controller-manager",
                [
                    f"--kubeconfig={kubeconfig}",
                    f"--authentication-kubeconfig={kubeconfig}",
                    f"--authorization-kubeconfig={kubeconfig}",
                    "--leader-elect=false",
                    "--use-service-account-credentials=false",
                    f"--controllers={','.join(self.controllers)}",
                    f"--feature-gates={gates}",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={port}",
                    f"--cert-dir={run_dir / 'kcm-certs'}",
                    f"--root-ca-file={pki.ca_cert}",
                    f"--service-account-private-key-file={pki.sa_key}",
                    "--kube-api-qps=500",
                    "--kube-api-burst=1000",
                    "--v=2",
                ],
            )
            if (yield _Wait(proc=proc, probe=_https_probe(port, "/healthz", insecure))):
                break
            self._retry_or_raise(proc, attempt)

    def start_controller_manager(self) -> None:
        """Start kube-controller-manager now, on a plane made with
        ``with_controller_manager=True, defer_controller_manager=True`` (so that a test can
        create objects before the controllers first see them), and wait until it is
        healthy."""
        if not self._started:
            raise ControlPlaneError("the control plane is not started")
        if not (self.with_controller_manager and self.defer_controller_manager):
            raise ControlPlaneError(
                "start_controller_manager needs with_controller_manager=True and "
                "defer_controller_manager=True"
            )
        if any(p.name == "kube-controller-manager" for p in self._procs):
            raise ControlPlaneError("kube-controller-manager is already running")
        steps = self._controller_manager_steps()
        result: bool | None = None
        while True:
            try:
                wait = steps.send(result)
            except StopIteration:
                return
            result = self._wait_sync(wait)

    # ------------------------------------------------------------------ start steps
    def _start_steps(self) -> Generator[_Wait, bool | None, None]:
        if self._requested_run_dir is not None:
            run_dir = self._requested_run_dir
            run_dir.mkdir(parents=True, exist_ok=True)
        else:
            run_dir = Path(tempfile.mkdtemp(prefix="workloadbuilder-controlplane-"))
        self._run_dir = run_dir
        (run_dir / "logs").mkdir(exist_ok=True)
        with _LIVE_LOCK:
            _LIVE.add(self)
        pki = self._pki = Pki(run_dir / "pki")
        serving = pki.serving("apiserver")
        self._admin = pki.client(ADMIN_USER, _ADMIN_GROUPS, stem="admin")

        # etcd: fresh data directory; retry with new ports when a port was taken meanwhile.
        etcd_url = ""
        for attempt in range(_PORT_ATTEMPTS):
            data = run_dir / "etcd-data"
            shutil.rmtree(data, ignore_errors=True)
            client_port, peer_port = _free_port(), _free_port()
            etcd_url = f"http://127.0.0.1:{client_port}"
            peer_url = f"http://127.0.0.1:{peer_port}"
            proc = self._spawn(
                "etcd",
                [
                    "--name=workloadbuilder",
                    f"--data-dir={data}",
                    f"--listen-client-urls={etcd_url}",
                    f"--advertise-client-urls={etcd_url}",
                    f"--listen-peer-urls={peer_url}",
                    f"--initial-advertise-peer-urls={peer_url}",
                    f"--initial-cluster=workloadbuilder={peer_url}",
                    "--unsafe-no-fsync=true",
                    "--quota-backend-bytes=8589934592",
                    "--log-level=warn",
                ],
            )
            if (yield _Wait(proc=proc, probe=_http_probe(client_port, "/health"))):
                break
            self._retry_or_raise(proc, attempt)

        gates = ",".join(f"{k}={'true' if v else 'false'}" for k, v in self.feature_gates.items())
        for attempt in range(_PORT_ATTEMPTS):
            port = _free_port()
            server = f"https://127.0.0.1:{port}"
            apiserver_args = [
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={run_dir / 'apiserver-certs'}",
                f"--tls-cert-file={serving.cert}",
                f"--tls-private-key-file={serving.key}",
                f"--client-ca-file={pki.ca_cert}",
                f"--service-account-issuer={server}",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--allow-privileged=true",
                "--authorization-mode=RBAC",
                f"--disable-admission-plugins={','.join(self.disable_admission_plugins)}",
                f"--feature-gates={gates}",
                f"--runtime-config={','.join(RUNTIME_CONFIG)}",
                "--endpoint-reconciler-type=none",
                "--v=1",
                *self.extra_apiserver_args,
            ]
            proc = self._spawn("kube-apiserver", apiserver_args)
            ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
            ctx.load_cert_chain(str(self._admin.cert), str(self._admin.key))
            probe = _https_probe(port, "/readyz", ctx)
            if (yield _Wait(proc=proc, probe=probe)):
                self._server = server
                self._apiserver_args = apiserver_args
                self._apiserver_probe = probe
                break
            self._retry_or_raise(proc, attempt)

        self._kubeconfig = self._write_kubeconfig(
            run_dir / "admin.kubeconfig", self._admin, ADMIN_USER
        )
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        kubeconfig = str(self._kubeconfig)

        if self.with_controller_manager and not self.defer_controller_manager:
            yield from self._controller_manager_steps()

        if self.with_scheduler:
            config = run_dir / "kube-scheduler.yaml"
            config.write_text(
                yaml.safe_dump(
                    {
                        "apiVersion": "kubescheduler.config.k8s.io/v1",
                        "kind": "KubeSchedulerConfiguration",
                        "clientConnection": {"kubeconfig": kubeconfig, "qps": 5000, "burst": 5000},
                        "leaderElection": {"leaderElect": False},
                        "profiles": [{"schedulerName": "default-scheduler"}],
                    },
                    sort_keys=False,
                )
            )
            for attempt in range(_PORT_ATTEMPTS):
                port = _free_port()
                proc = self._spawn(
                    "kube-scheduler",
                    [
                        f"--config={config}",
                        f"--feature-gates={gates}",
                        "--bind-address=127.0.0.1",
                        f"--secure-port={port}",
                        f"--cert-dir={run_dir / 'scheduler-certs'}",
                        f"--authentication-kubeconfig={kubeconfig}",
                        f"--authorization-kubeconfig={kubeconfig}",
                        "--v=2",
                    ],
                )
                if (yield _Wait(proc=proc, probe=_https_probe(port, "/readyz", insecure))):
                    break
                self._retry_or_raise(proc, attempt)
        self._started = True

    def _spawn(self, name: str, args: list[str]) -> _Proc:
        log_path = self.run_dir / "logs" / f"{name}.log"
        log_file = log_path.open("ab")
        argv = [str(self._binaries[name]), *args]
        main = threading.current_thread() is threading.main_thread()
        try:
            log_file.write(f"# {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(argv)}\n".encode())
            log_file.flush()
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent if main else None,
                cwd=self.run_dir,
            )
        except BaseException:  # e.g. the binary cannot be executed: no process to own the log
            log_file.close()
            raise
        proc = _Proc(name=name, popen=popen, log_path=log_path, log_file=log_file)
        self._procs.append(proc)
        _log.debug("started %s (pid %d)", name, popen.pid)
        return proc

    def _retry_or_raise(self, proc: _Proc, attempt: int) -> None:
        self._terminate(proc)
        self._procs.remove(proc)
        tail = _tail(proc.log_path)
        if "address already in use" in tail and attempt + 1 < _PORT_ATTEMPTS:
            _log.info("%s: port taken, retrying with new ports", proc.name)
            return
        raise ControlPlaneError(
            f"{proc.name} exited during start-up (code {proc.popen.returncode}); last log "
            f"lines ({proc.log_path}):\n{tail}"
        )

    # ------------------------------------------------------------------- readiness
    def _poll(self, wait: _Wait) -> bool | None:
        if wait.proc.popen.poll() is not None:
            return False
        try:
            return True if wait.probe() else None
        except (OSError, http.client.HTTPException):
            return None

    def _timeout_error(self, wait: _Wait) -> ControlPlaneError:
        return ControlPlaneError(
            f"{wait.proc.name} not ready after {self.startup_timeout:.0f}s; last log lines "
            f"({wait.proc.log_path}):\n{_tail(wait.proc.log_path)}"
        )

    def _wait_sync(self, wait: _Wait) -> bool:
        deadline = time.monotonic() + self.startup_timeout
        interval = 0.05
        while time.monotonic() < deadline:
            result = self._poll(wait)
            if result is not None:
                return result
            time.sleep(interval)
            interval = min(interval * 1.5, 0.5)
        raise self._timeout_error(wait)

    async def _wait_async(self, wait: _Wait) -> bool:
        deadline = time.monotonic() + self.startup_timeout
        interval = 0.05
        while time.monotonic() < deadline:
            result = await asyncio.to_thread(self._poll, wait)
            if result is not None:
                return result
            await asyncio.sleep(interval)
            interval = min(interval * 1.5, 0.5)
        raise self._timeout_error(wait)

    # ---------------------------------------------------------------------- stopping
    @staticmethod
    def _terminate(proc: _Proc) -> None:
        if proc.popen.poll() is None:
            for sig, timeout in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 10.0)):
                try:
                    os.killpg(proc.popen.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.popen.wait(timeout=timeout)
                    break
                except subprocess.TimeoutExpired:
                    continue
        else:  # reap leftovers of its process group, if any
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.popen.pid, signal.SIGKILL)
        proc.log_file.close()

    def _stop(self, *, failed: bool) -> None:
        with self._stop_lock:
            for proc in reversed(self._procs):
                self._terminate(proc)
            self._procs.clear()
            self._started = False
            with _LIVE_LOCK:
                _LIVE.discard(self)
            run_dir = self._run_dir
            if run_dir is None:
                return
            shutil.rmtree(run_dir / "etcd-data", ignore_errors=True)
            keep = self._keep_run_dir if self._keep_run_dir is not None else not self._own_run_dir
            if failed:
                keep = True
            if not keep:
                shutil.rmtree(run_dir, ignore_errors=True)
            elif failed:
                _log.warning("control-plane logs kept in %s", run_dir / "logs")

    def __repr__(self) -> str:
        state = f"running at {self._server}" if self._started else "stopped"
        return f"<ControlPlane {state} run_dir={self._run_dir}>"


def _http_probe(port: int, path: str) -> Callable[[], bool]:
    def probe() -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2.0)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            body = resp.read()
        finally:
            conn.close()
        if resp.status != 200:
            return False
        try:
            return bool(json.loads(body).get("health") == "true")
        except ValueError:
            return False

    return probe


def _https_probe(port: int, path: str, ctx: ssl.SSLContext) -> Callable[[], bool]:
    def probe() -> bool:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=2.0, context=ctx)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            resp.read()
        finally:
            conn.close()
        return resp.status == 200

    return probe
