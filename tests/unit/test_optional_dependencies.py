"""What importing the SDK costs: the HTTP stack and the scheduler's / simulator's
dependencies are loaded only by what needs them (each check runs in a fresh interpreter)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from fresh import run_fresh

from workloadbuilder import cli

ROOT = Path(__file__).resolve().parents[2]
HTTP_STACK = ("kubernetes_asyncio", "aiohttp")
HEAVY = ("numpy", "matplotlib")


def loaded(modules: list[str], roots: tuple[str, ...]) -> list[str]:
    return sorted({m.split(".")[0] for m in modules} & set(roots))


def test_memory_cluster_does_not_import_the_http_stack() -> None:
    out = run_fresh(
        """
        import asyncio, json, sys
        import workloadbuilder
        from workloadbuilder.cluster import MemoryCluster

        async def main():
            c = MemoryCluster()
            await c.create({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "a"}, "data": {"k": "v"}})
            await c.create({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                            "metadata": {"name": "g", "namespace": "default"},
                            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}})
            names = [o["metadata"]["name"] for o in (await c.list("ConfigMap")).items]
            groups = [g.metadata.name for g in (await c.list("PodGroup")).items]
            await c.close()
            return names, groups

        names, groups = asyncio.run(main())
        print(json.dumps({"names": names, "groups": groups, "modules": sorted(sys.modules)}))
        """
    )
    assert out["names"] == ["a"]
    assert out["groups"] == ["g"]
    assert loaded(out["modules"], HTTP_STACK) == []


def test_kube_cluster_is_imported_on_first_access() -> None:
    out = run_fresh(
        """
        import json, sys
        import workloadbuilder
        import workloadbuilder.cluster
        before = sorted(sys.modules)
        from workloadbuilder.cluster import KubeCluster, KubeConfigError
        print(json.dumps({
            "before": before,
            "after": sorted(sys.modules),
            "module": KubeCluster.__module__,
            "error": issubclass(KubeConfigError, Exception),
            "top": workloadbuilder.KubeCluster is KubeCluster,
        }))
        """
    )
    assert loaded(out["before"], HTTP_STACK) == []
    # kubernetes-asyncio is imported only for what needs it (exec plugins, auth providers,
    # in-cluster, a Configuration handed in): see tests/cluster/test_kubeconfig.py; aiohttp
    # only for a proxy or transport="aiohttp" (requests and watches go on the lean
    # transport): see the next test
    assert loaded(out["after"], HTTP_STACK) == []
    assert out["module"] == "workloadbuilder.cluster._kube"
    assert out["error"] and out["top"]


KUBE_WITHOUT_PROXY = """
    import asyncio, importlib, json, os, pkgutil, socket, sys, tempfile
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        os.environ.pop(var, None)
    import workloadbuilder.runtime
    for pkg in ("workloadbuilder.scheduler", "workloadbuilder.integrations"):
        mod = importlib.import_module(pkg)
        for info in pkgutil.walk_packages(mod.__path__, pkg + "."):
            if not info.name.endswith(".integrations.webhook"):  # the webhook's server is aiohttp's
                importlib.import_module(info.name)
    from workloadbuilder.cluster import Informer, KubeCluster, RetryPolicy
    from workloadbuilder.cluster._retry import classify_transport_error
    from workloadbuilder.errors import ApiError, Gone

    POD = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "5"}}

    def reply(body, status="200 OK", chunked=False):
        if not chunked:
            return (f"HTTP/1.1 {status}\\r\\nContent-Length: {len(body)}\\r\\n\\r\\n"
                    .encode() + body)
        framed = b"".join(b"%x\\r\\n%s\\r\\n" % (len(p), p) for p in body) + b"0\\r\\n\\r\\n"
        return b"HTTP/1.1 200 OK\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n" + framed

    async def serve(reader, writer):
        while True:
            try:
                head = await reader.readuntil(b"\\r\\n\\r\\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            target = head.split(b" ")[1].decode()
            if "watch=1" in target and "resourceVersion=1" in target:
                status = json.dumps({"kind": "Status", "code": 410, "reason": "Gone"})
                writer.write(reply(status.encode(), "410 Gone"))
            elif "watch=1" in target:
                events = [json.dumps({"type": t, "object": POD}).encode() + b"\\n"
                          for t in ("ADDED", "MODIFIED")]
                writer.write(reply(events, chunked=True))
            elif target.startswith("/api/v1/pods"):
                doc = {"kind": "PodList", "metadata": {"resourceVersion": "5"}, "items": [POD]}
                writer.write(reply(json.dumps(doc).encode()))
            else:
                writer.write(reply(json.dumps(POD).encode()))
            await writer.drain()
        writer.close()

    async def main():
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        config = {"apiVersion": "v1", "kind": "Config",
                  "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                  "users": [{"name": "u", "user": {"token": "t"}}],
                  "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                  "current-context": "x"}
        path = os.path.join(tempfile.mkdtemp(), "config")
        with open(path, "w") as f:
            json.dump(config, f)
        kube = KubeCluster.from_kubeconfig(path)
        got = {}
        async with kube:
            got["get"] = (await kube.get("Pod", "p", "ns"))["metadata"]["name"]
            got["watch"] = [e.type async for e in kube.watch("Pod", "ns", resource_version="5")]
            try:
                async for _ in kube.watch("Pod", "ns", resource_version="1"):
                    pass
            except Gone:
                got["gone"] = True
            informer = Informer(kube, "Pod")
            await informer.start()
            await informer.wait_synced(10)
            got["informer"] = informer.keys()
            await informer.stop()
        server.close()
        # transport failures are classified without aiohttp: a refused watch is retried, then
        # fails as a connection error
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
        probe.close()
        config["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{closed_port}"
        with open(path, "w") as f:
            json.dump(config, f)
        retry = RetryPolicy(max_attempts=2, initial_backoff=0.01, max_backoff=0.01)
        async with KubeCluster.from_kubeconfig(path, retry=retry) as refused:
            try:
                async for _ in refused.watch("Pod", "ns"):
                    pass
            except ApiError as e:
                got["refused"] = [e.status, e.reason]
        got["classified"] = [
            getattr(classify_transport_error(e), "not_sent", None)
            for e in (TimeoutError(), ConnectionResetError(), ValueError("x"))
        ]
        return got

    got = asyncio.run(main())
    print(json.dumps({"got": got, "modules": sorted(sys.modules)}))
"""


def test_kube_cluster_without_a_proxy_never_imports_aiohttp() -> None:
    # the scheduler's and the integrations' modules, then a KubeCluster used against a local
    # server (a get, a watch on the lean transport, a 410, an informer's list and watch)
    out = run_fresh(KUBE_WITHOUT_PROXY)
    assert out["got"]["get"] == "p"
    assert out["got"]["watch"] == ["ADDED", "MODIFIED"]
    assert out["got"]["gone"] is True
    assert out["got"]["informer"] == ["ns/p"]
    assert out["got"]["refused"] == [0, "ConnectionError"]
    assert out["got"]["classified"] == [False, False, None]
    assert (
        "workloadbuilder.scheduler.cli" in out["modules"]
        and "workloadbuilder.integrations.cli" in out["modules"]
    )
    assert loaded(out["modules"], HTTP_STACK) == []


def test_building_and_validating_do_not_import_numpy_or_matplotlib() -> None:
    out = run_fresh(
        """
        import contextlib, importlib, io, json, pkgutil, sys
        import workloadbuilder
        for pkg in ("workloadbuilder.builder", "workloadbuilder.kinds"):
            mod = importlib.import_module(pkg)
            for info in pkgutil.walk_packages(mod.__path__, pkg + "."):
                importlib.import_module(info.name)
        from workloadbuilder.cli import main
        codes = []
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            for command in ("build", "validate"):
                codes.append(main([command, "-f", "examples/job-gang.yaml"]))
        print(json.dumps({"codes": codes, "printed": printed.getvalue(),
                          "modules": sorted(sys.modules)}))
        """
    )
    assert out["codes"] == [0, 0]
    assert "kind: Workload" in out["printed"]
    assert loaded(out["modules"], HEAVY) == []


MISSING_NUMPY = """
    import contextlib, io, json, sys
    sys.modules["numpy"] = None  # as if workloadbuilder[scheduler] were not installed
    from workloadbuilder.cli import main
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main({argv!r})
        except SystemExit as e:
            code = e.code
    print(json.dumps({{"code": code, "stderr": err.getvalue(), "stdout": out.getvalue()}}))
"""


@pytest.mark.parametrize(
    "argv", [["scheduler"], ["scheduler", "--kubeconfig", "k"], ["-v", "scheduler"]]
)
def test_a_command_whose_extra_is_missing_says_what_to_install(argv: list[str]) -> None:
    out = run_fresh(MISSING_NUMPY.format(argv=argv))
    assert out["code"] == 1
    assert out["stderr"] == (
        "error: workloadbuilder scheduler needs the 'scheduler' extra: "
        "pip install 'workloadbuilder[scheduler]'\n"
    )
    assert "Traceback" not in out["stderr"] + out["stdout"]
    assert len(out["stderr"].strip().splitlines()) == 1


def test_help_lists_the_unavailable_command_and_builtins_still_work() -> None:
    out = run_fresh(MISSING_NUMPY.format(argv=["--help"]))
    assert out["code"] == 0
    assert "(unavailable: needs the 'scheduler' extra)" in out["stdout"]
    assert "build" in out["stdout"]
    out = run_fresh(MISSING_NUMPY.format(argv=["build", "-f", "examples/job-basic.yaml"]))
    assert out["code"] == 0
    assert "kind: Workload" in out["stdout"]


def test_each_optional_module_maps_to_an_extra_that_installs_it() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    core = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for module, extra in cli._OPTIONAL_MODULES.items():
        assert any(req.startswith(module) for req in extras[extra]), (module, extra)
        assert any(req.startswith(module) for req in extras["all"]), module
        assert not any(req.startswith(module) for req in core), module
    # each command's pre-run check names an extra that brings the modules it checks
    top_level = {"numpy": "numpy", "matplotlib": "matplotlib", "cel": "common-expression-language"}
    for command, (extra, modules) in cli._COMMAND_EXTRAS.items():
        for module in modules:
            assert any(req.startswith(top_level[module]) for req in extras[extra]), command
    assert "integrations" in extras  # nothing beyond the SDK's own dependencies
    # the simulator also needs the scheduler's dependencies
    assert set(extras["scheduler"]) <= set(extras["simulator"])
    assert set(extras["all"]) == set(extras["scheduler"]) | set(extras["simulator"])


def test_the_hint_names_the_extra_of_the_missing_module() -> None:
    parser = cli._Parser(prog="workloadbuilder")
    sub = parser.add_subparsers(dest="command")
    cli._unavailable(parser, sub, "simulate", ModuleNotFoundError(name="matplotlib"))
    cli._unavailable(parser, sub, "other", ImportError("cannot import name 'x'"))
    assert parser.unavailable["simulate"] == (
        "workloadbuilder simulate needs the 'simulator' extra: "
        "pip install 'workloadbuilder[simulator]'"
    )
    assert parser.unavailable["other"] == (
        "the 'other' command is unavailable: cannot import name 'x'"
    )
