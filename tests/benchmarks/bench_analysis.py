"""Analysis speed: compare two ~4k-node files up to a painted diff (goal <= 2 s), the
runtime part of a compare, and the profiler's overhead. Prints a table of medians; asserts
nothing.

The files: bench_graph's synthetic GPT-2-like blocks (95 blocks of 43 nodes, about 4.1k
nodes, named as TorchScript names them), and a copy with every node renamed (so the matching
is all structural), one Identity inserted after the first node and one weight changed. The
runtime part and the profiler run a real dynamo export of bench_graph's 4-layer GPT-2.

    cd /work/main && QT_QPA_PLATFORM=offscreen python tests/benchmarks/bench_analysis.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def make_pair(folder: Path, blocks: int = 95) -> tuple[Path, Path]:
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    from tests.benchmarks.bench_graph import synthetic_blocks

    a = synthetic_blocks(folder / "a.onnx", blocks=blocks)
    model = onnx.load(str(a))
    g = model.graph
    for i, node in enumerate(g.node):
        node.name = f"renamed_{i}"
    first = g.node[0]
    old = first.output[0]
    first.output[0] = old + "_pre"
    g.node.insert(1, helper.make_node("Identity", [old + "_pre"], [old], name="inserted"))
    init = g.initializer[0]
    values = numpy_helper.to_array(init).copy()
    values.flat[0] += np.asarray(1.0, values.dtype)
    init.CopyFrom(numpy_helper.from_array(values, init.name))
    b = folder / "b.onnx"
    onnx.save_model(model, str(b))
    return a, b


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--screenshot", metavar="PNG",
                        help="only save the Graph tab's profile overlay of the 4-layer GPT-2")
    args = parser.parse_args()
    if args.screenshot:
        return screenshot(Path(args.screenshot))
    from PySide6.QtWidgets import QApplication

    from onnx_studio.app.compare.graphs import SideBySideGraphs
    from onnx_studio.engine.analysis.compare import compare_files
    from onnx_studio.engine.analysis.profile import profile_file
    from onnx_studio.engine.protocol import CompareDocument

    app = QApplication.instance() or QApplication([])
    rows: list[tuple[str, float, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        a, b = make_pair(Path(tmp))
        static, paint, total = [], [], []
        doc = None
        for _ in range(args.runs):
            t0 = time.perf_counter()
            doc = CompareDocument.from_dict(compare_files(a, b, run=False))
            t1 = time.perf_counter()
            graphs = SideBySideGraphs()
            graphs.resize(1600, 900)
            graphs.show()
            assert doc.matching is not None
            graphs.show_files(a, b, doc.matching)
            graphs.repaint()
            app.processEvents()
            t2 = time.perf_counter()
            static.append(t1 - t0)
            paint.append(t2 - t1)
            total.append(t2 - t0)
            graphs.close()
            graphs.deleteLater()
            app.processEvents()
        assert doc is not None and doc.matching is not None
        m = doc.matching
        print(f"files: {doc.nodes['a']} and {doc.nodes['b']} nodes; matched {m.matched} "
              f"({m.by_name} by name, {m.by_structure} by structure), unmatched A "
              f"{len(m.unmatched_a)}, B {len(m.unmatched_b)}; changed initializers "
              f"{[c.name for c in doc.initializers.changed]}", file=sys.stderr)
        rows.append(("compare, static diff + matching (engine)", statistics.median(static),
                     ""))
        rows.append(("both graphs loaded, laid out, painted", statistics.median(paint), ""))
        rows.append(("to a painted diff (goal <= 2 s)", statistics.median(total),
                     "met" if statistics.median(total) <= 2.0 else "MISSED"))
        # the synthetic blocks are for the browser, not for running: a real dynamo export of
        # bench_graph's GPT-2 (4 layers) for the runtime part and the profiler
        from tests.benchmarks.bench_graph import export_gpt2

        real = export_gpt2(Path(tmp) / "gpt2_4.onnx", layers=4, dynamic=False)
        runtime = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            compare_files(real, real, runs=10)
            runtime.append(time.perf_counter() - t0)
        rows.append(("compare with runtime, 4-layer GPT-2 export against itself (2 sessions, "
                     "parity, 10 timed runs each)",
                     statistics.median(runtime), ""))
        overheads, coverage, p50 = [], [], []
        for _ in range(args.runs):
            prof = profile_file(real, runs=20, threads=1)
            overheads.append(prof["overhead"])
            coverage.append(prof["coverage"])
            p50.append(prof["latency_ms"]["p50"])
        rows.append(("profile (4-layer GPT-2, 1 thread): plain p50 (ms)",
                     statistics.median(p50), ""))
        rows.append(("profile: overhead (profiled run / plain p50)",
                     statistics.median(overheads), ""))
        rows.append(("profile: node times / profiled run", statistics.median(coverage), ""))
    print(f"| measure ({args.runs} runs, median) | value | goal |")
    print("| --- | ---: | --- |")
    for name, value, goal in rows:
        unit = "" if "profile" in name else " s"
        print(f"| {name} | {value:.3f}{unit} | {goal} |")
    return 0


def screenshot(png: Path) -> int:
    """The documentation's picture: the profile of a 4-layer GPT-2 export as a heat overlay on its
    graph, module groups collapsed, as the Compare tab's overlay toggle shows it."""
    from PySide6.QtWidgets import QApplication

    from onnx_studio.app.graph.browser import GraphBrowser
    from onnx_studio.engine.analysis.profile import profile_file
    from tests.benchmarks.bench_graph import export_gpt2

    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory() as tmp:
        real = export_gpt2(Path(tmp) / "gpt2_4.onnx", layers=4, dynamic=False)
        doc = profile_file(real, runs=50, threads=1)
        values: dict[str, float] = {}
        for n in doc["nodes"]:
            if n["node"]:
                values[n["node"]] = values.get(n["node"], 0.0) + n["ms"]
        browser = GraphBrowser()
        browser.resize(1366, 768)
        browser.show()
        browser.load_file(real)
        browser.set_overlay(values, "ms per run")
        for _ in range(5):
            app.processEvents()
        browser.grab().save(str(png))
    slow = ", ".join(f"{g['name']} {g['ms']:.3f} ms" for g in doc["groups"][:4])
    print(f"saved {png}; slowest groups: {slow}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
