"""No import circle among the modules of onnx_studio: each package's modules import downward only
(issue 34), function-level and TYPE_CHECKING imports counted, since either one hides a circle
that the next refactoring turns into an ImportError or a half-initialised module."""

from __future__ import annotations

import grimp


def import_circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan's algorithm, iterative)."""
    modules = sorted(graph.modules)
    edges = {m: sorted(set(graph.find_modules_directly_imported_by(m)) & set(modules))
             for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                child = edges[node][i]
                if child not in index:
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    circles.append(sorted(group))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return circles


def test_the_circle_finder_finds_a_circle() -> None:
    """The finder itself: a -> b -> c -> a is one circle, d (imported by a) none."""
    graph = grimp.ImportGraph()
    for name in ("p", "p.a", "p.b", "p.c", "p.d"):
        graph.add_module(name)
    for importer, imported in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.a", "p.d")):
        graph.add_import(importer=importer, imported=imported)
    assert import_circles(graph) == [["p.a", "p.b", "p.c"]]


def test_no_module_of_onnx_studio_is_in_an_import_circle() -> None:
    graph = grimp.build_graph("onnx_studio", cache_dir=None)
    assert len(graph.modules) > 100  # the whole package was read
    circles = import_circles(graph)
    assert not circles, "modules that import each other (make one import downward only):\n" + \
        "\n".join(" <-> ".join(group) for group in circles)
