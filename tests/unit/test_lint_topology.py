"""``workloadbuilder lint topology`` and :func:`workloadbuilder.lint.lint_topology`: every
finding type, clean cases, notes, exit codes, JSON output and bad input."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from workloadbuilder.cli import main
from workloadbuilder.lint import LintInputError, lint_topology
from workloadbuilder.testing.builders import (
    make_composite_pod_group,
    make_composite_pod_group_template,
    make_job,
    make_jobset,
    make_lws,
    make_pod,
    make_pod_group,
    make_pod_group_template,
    make_pod_template,
    make_replicated_job,
    make_scheduling,
    make_workload,
)

BLOCK = "example.com/block"
RACK = "example.com/rack"


def node(name: str, labels: Mapping[str, str], cpu: str = "8") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels)},
        "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"}},
    }


def cluster(
    blocks: int = 2, racks_per_block: int = 2, nodes_per_rack: int = 2
) -> list[dict[str, Any]]:
    """Nested racks in blocks: n-<i>, block b<j>, rack r<k>."""
    out = []
    i = 0
    for b in range(blocks):
        for r in range(racks_per_block):
            for _ in range(nodes_per_rack):
                rack = b * racks_per_block + r
                out.append(node(f"n-{i}", {BLOCK: f"b{b}", RACK: f"r{rack}"}))
                i += 1
    return out


def rack_job(name: str = "train", pods: int = 2, cpu: str = "4", key: str = RACK) -> dict[str, Any]:
    return (
        make_job(name)
        .parallelism(pods)
        .container_name("c")
        .image("x")
        .request("cpu", cpu)
        .gang()
        .topology(key)
        .obj()
    )


def types(result: Any) -> list[str]:
    return [f.type for f in result.findings]


# ---- the SDK function --------------------------------------------------------------------


def test_clean_job_with_a_rack_constraint() -> None:
    result = lint_topology([rack_job(pods=4, cpu="4")], cluster())
    assert result.clean and result.findings == ()
    assert [lv.key for lv in result.levels] == [RACK]
    assert result.levels[0].domains == 4 and result.nodes == 8
    assert result.notes == ()


def test_missing_key() -> None:
    result = lint_topology([rack_job(key="example.com/pod")], cluster())
    assert types(result) == ["missing-key"]
    f = result.findings[0]
    assert f.key == "example.com/pod" and "no node has this label" in f.message
    assert f.subject == "Job default/train"
    assert f.path == "spec.scheduling.schedulingConstraints.topology[0].key"


def _composite_workload(outer: str, inner: str, *, min_groups: int = 2) -> dict[str, Any]:
    return (
        make_workload("llm")
        .composite_pod_group_template(
            make_composite_pod_group_template("slices")
            .gang(min_groups)
            .topology(outer)
            .pod_group_template(make_pod_group_template("slice").gang(2).topology(inner))
        )
        .obj()
    )


def _composite_instances(
    children: int = 2, pods: int = 2, cpu: str = "4", min_groups: int = 2
) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [
        make_composite_pod_group("llm-slices-0")
        .workload_ref("llm", "slices")
        .gang(min_groups)
        .topology(BLOCK)
        .obj()
    ]
    for c in range(children):
        pg = f"llm-slices-0-slice-{c}"
        docs.append(
            make_pod_group(pg)
            .workload_ref("llm", "slice")
            .parent("llm-slices-0")
            .gang(pods)
            .topology(RACK)
            .obj()
        )
        for p in range(pods):
            docs.append(
                make_pod(f"{pg}-{p}").pod_group(pg).container_name("c").request("cpu", cpu).obj()
            )
    return docs


def test_clean_composite_block_of_racks() -> None:
    docs = [_composite_workload(BLOCK, RACK), *_composite_instances()]
    result = lint_topology(docs, cluster())
    assert result.clean, result.findings
    assert [(lv.template, lv.key, lv.parent_key) for lv in result.levels] == [
        ("slices", BLOCK, None),
        ("slice", RACK, BLOCK),
    ]


def test_rack_spanning_two_blocks_is_reported_with_its_nodes() -> None:
    nodes = cluster()
    nodes[4]["metadata"]["labels"][RACK] = "r1"  # n-4 is in block b1 but labelled rack r1
    result = lint_topology([_composite_workload(BLOCK, RACK)], nodes)
    assert "not-nested" in types(result)
    f = next(f for f in result.findings if f.type == "not-nested")
    assert f.path == (
        "spec.compositePodGroupTemplates[0].podGroupTemplates[0]"
        ".schedulingConstraints.topology[0].key"
    )
    assert f.subject == "Workload default/llm"
    assert set(f.nodes) == {"n-2", "n-3", "n-4"} and f.domains == ("b0", "b1")
    assert "example.com/rack=r1 spans 2 domains of its parent level example.com/block" in f.message
    assert "b0: n-2, n-3" in f.message and "b1: n-4" in f.message


def test_swapped_levels_are_not_coarser() -> None:
    result = lint_topology([_composite_workload(RACK, BLOCK)], cluster())
    assert "not-coarser" in types(result)
    f = next(f for f in result.findings if f.type == "not-coarser")
    assert f.key == BLOCK and "parent level example.com/rack is not coarser" in f.message
    # each block spans two racks: the child level is not nested either
    assert "not-nested" in types(result)


def test_same_key_at_both_levels_is_not_coarser() -> None:
    result = lint_topology([_composite_workload(RACK, RACK)], cluster())
    assert types(result) == ["not-coarser"]
    assert "the same key as its parent level" in result.findings[0].message


def test_gang_larger_than_any_rack_never_fits() -> None:
    # a rack is 2 nodes x 8 CPU; 5 pods x 4 CPU need 20 CPU
    result = lint_topology([rack_job(pods=5, cpu="4")], cluster())
    assert types(result) == ["never-fits"]
    f = result.findings[0]
    assert "can never schedule" in f.message and "5 pods (5 x {cpu 4})" in f.message
    assert "the largest, example.com/rack=r0 (2 nodes), has cpu 16" in f.message
    assert "holds 4 of them" in f.message
    assert f.domains == ("r0",) and f.nodes == ("n-0", "n-1")


def test_per_node_packing_counts_not_only_the_sum() -> None:
    # 2 pods x 5 CPU: a rack has 16 CPU in total, but each 8-CPU node holds only one
    assert lint_topology([rack_job(pods=2, cpu="5")], cluster()).clean
    result = lint_topology([rack_job(pods=3, cpu="5")], cluster())
    assert types(result) == ["never-fits"] and "holds 2 of them" in result.findings[0].message


def test_composite_tree_that_no_block_holds() -> None:
    # minGroupCount 3 children of 2 x 4 CPU = 24 CPU; a block (4 nodes x 8) has 32, so it fits
    docs = [_composite_workload(BLOCK, RACK, min_groups=3), *_composite_instances(3, min_groups=3)]
    assert lint_topology(docs, cluster()).clean
    # 3 children of 2 x 8 CPU = 48 CPU do not fit a 32-CPU block
    docs = [
        _composite_workload(BLOCK, RACK, min_groups=3),
        *_composite_instances(3, cpu="8", min_groups=3),
    ]
    result = lint_topology(docs, cluster())
    assert types(result) == ["never-fits"]
    f = result.findings[0]
    assert "template 'slices'" in f.message and "3 of its child groups" in f.message
    assert f.key == BLOCK


def test_unconstrained_group_is_checked_against_the_whole_cluster() -> None:
    job = make_job("big").parallelism(9).container_name("c").request("cpu", "8").gang().obj()
    result = lint_topology([job, rack_job()], cluster())
    assert types(result) == ["never-fits"]
    assert "the whole cluster" in result.findings[0].message


def test_nodes_missing_a_label() -> None:
    nodes = [*cluster(), node("cpu-0", {BLOCK: "b0"}), node("cpu-1", {})]
    result = lint_topology([rack_job()], nodes)
    assert types(result) == ["missing-label"]
    f = result.findings[0]
    assert f.nodes == ("cpu-0", "cpu-1") and "2 of 10 nodes lack the label" in f.message


def test_pod_templates_unknown_are_noted_not_guessed() -> None:
    wl = _composite_workload(BLOCK, RACK)
    result = lint_topology([wl], cluster())
    assert result.clean
    assert any("capacity is not checked" in n for n in result.notes)
    generic = {
        "apiVersion": "workloadbuilder.io/v1alpha1",
        "kind": "GenericWorkload",
        "metadata": {"name": "g"},
        "spec": {
            "podSets": [
                {
                    "name": "w",
                    "count": 64,
                    "scheduling": {"schedulingConstraints": {"topology": [{"key": RACK}]}},
                }
            ]
        },
    }
    result = lint_topology([generic], cluster())
    assert result.clean and any("pod templates are not known" in n for n in result.notes)


def test_standalone_pod_group_with_its_pods() -> None:
    docs: list[Any] = [make_pod_group("pg").gang(3).topology(RACK).obj()]
    docs += [
        make_pod(f"p-{i}").pod_group("pg").container_name("c").request("cpu", "6").obj()
        for i in range(3)
    ]
    result = lint_topology(docs, cluster())
    assert types(result) == ["never-fits"]
    assert result.findings[0].subject == "PodGroup default/pg"
    assert result.findings[0].path == "spec.schedulingConstraints.topology[0].key"


def test_jobset_and_lws() -> None:
    js = (
        make_jobset("rl")
        .annotation("alpha.jobset.sigs.k8s.io/exclusive-topology", RACK)
        .replicated_job(
            make_replicated_job("learner").parallelism(3).container_name("c").request("cpu", "6")
        )
        .scheduling(make_scheduling().gang())
        .obj()
    )
    result = lint_topology([js], cluster())
    assert types(result) == ["never-fits"] and result.findings[0].subject == "JobSet default/rl"
    lws = (
        make_lws("serve")
        .replicas(2)
        .size(2)
        .worker_template(make_pod_template().container_name("c").request("cpu", "8"))
        .scheduling(make_scheduling().gang().topology(RACK))
        .obj()
    )
    assert lint_topology([lws], cluster()).clean
    bigger = (
        make_lws("serve")
        .replicas(1)
        .size(3)
        .worker_template(make_pod_template().container_name("c").request("cpu", "8"))
    )
    result = lint_topology(
        [bigger.scheduling(make_scheduling().gang().topology(RACK)).obj()], cluster()
    )
    assert types(result) == ["never-fits"] and "3 pods" in result.findings[0].message


def test_unknown_kind_is_an_input_error() -> None:
    with pytest.raises(LintInputError) as e:
        lint_topology([rack_job(), {"apiVersion": "apps/v1", "kind": "Deployment"}], cluster())
    assert e.value.document == 2 and "unsupported kind apps/v1/Deployment" in str(e.value)


# ---- the command -------------------------------------------------------------------------


def _files(tmp_path: Path, objects: Sequence[Any], nodes: Sequence[Any]) -> tuple[str, str]:
    w, n = tmp_path / "w.yaml", tmp_path / "nodes.yaml"
    w.write_text(yaml.safe_dump_all(list(objects)))
    n.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(nodes)}))
    return str(w), str(n)


def test_cli_clean_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w, n = _files(tmp_path, [rack_job()], cluster())
    assert main(["lint", "topology", "-f", w, "--nodes", n]) == 0
    out = capsys.readouterr().out
    assert out.startswith("no findings; checked 1 level (1 with a topology key) of 1 object")
    assert "against 8 nodes" in out


def test_cli_findings_exit_1_text_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = [*cluster(), node("cpu-0", {})]
    w, n = _files(tmp_path, [rack_job(pods=5)], nodes)
    assert main(["lint", "topology", "-f", w, "--nodes", n]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(
        "Job default/train: spec.scheduling.schedulingConstraints.topology[0].key: [never-fits]"
    )
    assert "[missing-label]" in out[1]
    assert out[-1].startswith("2 findings (1 never-fits, 1 missing-label)")
    assert main(["lint", "topology", "-f", w, "--nodes", n, "-o", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["nodes"] == 9
    assert [f["type"] for f in data["findings"]] == ["never-fits", "missing-label"]
    assert data["findings"][1]["nodes"] == ["cpu-0"]
    assert data["levels"][0]["key"] == RACK and data["levels"][0]["domains"] == 4
    assert set(data["findings"][0]) == {
        "type",
        "object",
        "path",
        "key",
        "message",
        "nodes",
        "domains",
    }


def test_cli_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w, n = _files(tmp_path, [rack_job()], cluster())
    assert main(["lint", "topology", "-f", w]) == 2
    assert "give the nodes" in capsys.readouterr().err
    assert main(["lint", "topology", "--nodes", n]) == 2
    assert main(["lint", "topology", "-f", w, "--nodes", n, "--kubeconfig", n]) == 2
    assert main(["lint"]) == 2
    assert "name a check: topology" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["lint", "topology", "-f", w, "--nodes", n, "-o", "yaml"])
    assert e.value.code == 2


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "cannot read"),
        ("key: [unclosed\n", "not valid YAML"),
        (
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\nspec: {}\n---\n"
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
            "document 2: Deployment default/d: kind: unsupported kind",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {schedulingGroup: x}\n",
            "document 1: Pod default/p: spec.schedulingGroup: Invalid value",
        ),
        (
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\nspec: {parallelism: four}\n",
            "document 1: Job default/a: spec.parallelism: Invalid value",
        ),
        (
            "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: p}\n"
            "spec: {schedulingPolicy: {gang: {minCount: many}}}\n",
            "document 1: PodGroup default/p: spec.schedulingPolicy.gang.minCount",
        ),
    ],
)
def test_cli_bad_input_exits_1_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, words: str
) -> None:
    _, n = _files(tmp_path, [], cluster())
    w = tmp_path / "bad.yaml"
    if content is not None:
        w.write_text(content)
    assert main(["lint", "topology", "-f", str(w), "--nodes", n]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and "Traceback" not in err


def test_cli_bad_nodes_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w, _ = _files(tmp_path, [rack_job()], [])
    bad = tmp_path / "n.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    assert main(["lint", "topology", "-f", w, "--nodes", str(bad)]) == 1
    assert "expected Node" in capsys.readouterr().err
    assert main(["lint", "topology", "-f", w, "--nodes", str(tmp_path / "none.yaml")]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_the_lint_module_needs_neither_the_scheduler_nor_numpy() -> None:
    import subprocess
    import sys

    code = (
        "import sys, workloadbuilder.lint, workloadbuilder.cli._lint\n"
        "wanted = ('numpy', 'matplotlib', 'workloadbuilder.scheduler',\n"
        "          'workloadbuilder.simulator')\n"
        "bad = [m for m in wanted if m in sys.modules]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_generic_workload_levels_are_checked_in_its_planned_workload() -> None:
    generic = {
        "apiVersion": "workloadbuilder.io/v1alpha1",
        "kind": "GenericWorkload",
        "metadata": {"name": "llm"},
        "spec": {
            "groups": [
                {
                    "name": "slices",
                    "scheduling": {
                        "schedulingPolicy": {"gang": {}},
                        "schedulingConstraints": {"topology": [{"key": RACK}]},
                    },
                    "podSets": [
                        {
                            "name": "slice",
                            "replicas": 2,
                            "count": 2,
                            "scheduling": {"schedulingConstraints": {"topology": [{"key": BLOCK}]}},
                        }
                    ],
                }
            ]
        },
    }
    result = lint_topology([generic], cluster())
    assert "not-coarser" in types(result)
    f = next(f for f in result.findings if f.type == "not-coarser")
    assert f.subject == "GenericWorkload default/llm"
    assert f.path.startswith(
        "Workload llm: spec.compositePodGroupTemplates[0].podGroupTemplates[0]"
    )
    assert any("pod templates are not known" in n for n in result.notes)


def test_three_levels_block_rack_host_are_clean() -> None:
    host = "kubernetes.io/hostname"
    nodes = cluster()
    for n in nodes:
        n["metadata"]["labels"][host] = n["metadata"]["name"]
    wl = (
        make_workload("deep")
        .composite_pod_group_template(
            make_composite_pod_group_template("block")
            .gang(1)
            .topology(BLOCK)
            .composite_pod_group_template(
                make_composite_pod_group_template("rack")
                .gang(1)
                .topology(RACK)
                .pod_group_template(make_pod_group_template("host").gang(1).topology(host))
            )
        )
        .obj()
    )
    result = lint_topology([wl], nodes)
    assert result.clean, result.findings
    assert [(lv.key, lv.parent_key) for lv in result.levels] == [
        (BLOCK, None),
        (RACK, BLOCK),
        (host, RACK),
    ]
