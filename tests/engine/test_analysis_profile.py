"""profile: a GPT-2-like model (transformers GPT2Config, random weights, use_cache=False) in
ONNX Runtime — latency against eager PyTorch, the profiler's times per node, operator type and
module group."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onnx_studio.engine.analysis.profile import RUNTIME_GROUP, profile_file
from onnx_studio.engine.cli import main
from onnx_studio.engine.recipe import load as load_recipe
from tests.engine.analysis_models import GPT2, export_recipe, write_recipe


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("gpt2")
    recipe = write_recipe(folder, "gpt2.toml", GPT2)
    return export_recipe(recipe), recipe


def test_profile_names_slowest_ops_and_groups(gpt2: tuple[Path, Path]) -> None:
    onnx_path, recipe_path = gpt2
    doc = profile_file(onnx_path, load_recipe(recipe_path), runs=20, threads=1)
    assert doc["ok"]
    lat, eager = doc["latency_ms"], doc["torch_latency_ms"]
    assert 0 < lat["p50"] <= lat["p90"] and 0 < eager["p50"] <= eager["p90"]
    nodes, ops, groups = doc["nodes"], doc["ops"], doc["groups"]
    for rows in (nodes, ops, groups):
        times = [r["ms"] for r in rows]
        assert times == sorted(times, reverse=True) and times[0] > 0
    # every node counted once: the aggregates are the same time cut three ways
    total = sum(n["ms"] for n in nodes)
    assert sum(o["ms"] for o in ops) == pytest.approx(total, rel=1e-3)
    assert sum(g["ms"] for g in groups) == pytest.approx(total, rel=1e-3)
    assert sum(o["count"] for o in ops) == len(nodes)
    # the transformer's own modules lead the groups, named as the graph view names them
    named = [g["name"] for g in groups if g["name"] != RUNTIME_GROUP]
    assert any(name.startswith(("h.0", "h.1")) for name in named[:3]), groups[:5]
    assert sum(g["ms"] for g in groups if g["name"].startswith(("h.", "ln_f", "wte", "wpe"))
               ) > 0.5 * total
    # matrix products are among the slowest operators of a transformer
    assert {"MatMul", "Gemm", "FusedMatMul"} & {o["op_type"] for o in ops[:4]}, ops[:6]
    # the profiler's node times add up to the profiled runs (the rest is onnxruntime's own
    # work between kernels), within 20%
    assert 0.8 <= doc["coverage"] <= 1.2, doc
    assert doc["node_total_ms"] == pytest.approx(total, rel=1e-3)
    assert doc["overhead"] > 0 and doc["profiled_run_ms"] > 0


def test_profile_cli_without_recipe(gpt2: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
                                    ) -> None:
    code = main(["profile", str(gpt2[0]), "--runs", "3", "--json"])
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0, doc
    assert list(doc)[:6] == ["ok", "latency_ms", "nodes", "ops", "groups", "runs"]
    assert "torch_latency_ms" not in doc
    # the keys, and the file's node each profiled one comes from
    # (issue 36: each one's share of the profiled run and of the p50; a fused kernel's nodes)
    assert set(doc["nodes"][0]) - {"fused"} == {"name", "op_type", "group", "ms", "node",
                                                "share", "p50_ms"}
    assert any(n["node"] for n in doc["nodes"])
    assert set(doc["ops"][0]) == {"op_type", "ms", "count", "share", "p50_ms"}
    assert set(doc["groups"][0]) == {"name", "ms", "share", "p50_ms"}


def test_profile_refuses_bad_requests(gpt2: tuple[Path, Path], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["profile", str(tmp_path / "missing.onnx"), "--json"])
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 2 and doc["error"]["kind"] == "source" and "missing.onnx" in \
        doc["error"]["message"]
    code = main(["profile", str(gpt2[0]), "--runs", "0", "--json"])
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 2 and "--runs" in doc["error"]["message"]
    code = main(["profile", str(gpt2[0]), "--provider", "NoSuchExecutionProvider", "--json"])
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 1 and "NoSuchExecutionProvider" in doc["error"]["message"]
