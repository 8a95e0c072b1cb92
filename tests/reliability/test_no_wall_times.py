"""No test asserts a wall time (issue 23, item 9).

A time limit in a test fails on a loaded machine while nothing is wrong (cancel -> next
progress < 1.0 s failed at 1.73 s on a fresh clone under load). Tests assert order and outcome;
how long things take is printed by the scripts in tests/benchmarks/ (bench_stop.py for the
cancels, bench_window.py and bench_graph.py for the first paint). This reads every test module
and names each `assert` that compares a measured time with a number other than 0.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
CLOCKS = {"perf_counter", "monotonic", "time", "perf_counter_ns", "monotonic_ns", "time_ns"}
# names and keys that hold a measured time (the exit-after-paint line's window_s, graph_s)
TIME_WORDS = ("seconds", "took", "elapsed", "duration")
TIME_SUFFIXES = ("_s", "_ms", "_seconds")


def reads_a_clock(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr in CLOCKS and isinstance(n.func.value, ast.Name)
               and n.func.value.id == "time" for n in ast.walk(node))


def is_time_name(name: str) -> bool:
    return name in TIME_WORDS or name.endswith(TIME_SUFFIXES)


def measured(node: ast.AST, timed: set[str], clocks: set[str]) -> bool:
    """True for an expression that is a measured time: a difference of clock readings (or of
    names assigned one), a name assigned such a difference, or a name or key that says it
    holds seconds."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and (
            reads_a_clock(node) or any(isinstance(n, ast.Name) and n.id in clocks
                                       for n in ast.walk(node))):
        return True
    if isinstance(node, ast.Name):
        return node.id in timed or is_time_name(node.id)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return isinstance(node.slice.value, str) and is_time_name(node.slice.value)
    return False


def nonzero_number(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, int | float)
            and not isinstance(node.value, bool) and node.value != 0)


def assigned(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(names assigned a clock difference, names assigned a clock reading) anywhere in the
    module: took = t1 - t0; clicked = time.perf_counter()."""
    timed: set[str] = set()
    clocks: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and reads_a_clock(node.value):
            names = {t.id for t in node.targets if isinstance(t, ast.Name)}
            difference = isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Sub)
            (timed if difference else clocks).update(names)
    return timed, clocks


def wall_time_asserts(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    timed, clocks = assigned(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            sides = [compare.left, *compare.comparators]
            ordering = all(isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE)
                           for op in compare.ops)
            if ordering and any(measured(s, timed, clocks) for s in sides) \
                    and any(nonzero_number(s) for s in sides):
                where = path.relative_to(TESTS.parent) if path.is_relative_to(TESTS) else path.name
                yield f"{where}:{node.lineno}: {ast.unparse(compare)}"


def test_the_check_finds_a_time_limit(tmp_path: Path) -> None:
    """The reader itself: each form a time limit took in this suite is found."""
    sample = tmp_path / "test_sample.py"
    # the forms, kept as text: as source in this file, they would be time limits themselves
    sample.write_text((DATA / "wall_time_sample.txt").read_text(encoding="utf-8"),
                      encoding="utf-8")
    found = list(wall_time_asserts(sample))
    assert [line.split(":")[1] for line in found] == ["4", "6", "7", "8", "9", "11"], found


def test_no_test_asserts_a_wall_time() -> None:
    found = [line for path in sorted(TESTS.rglob("*.py"))
             if "benchmarks" not in path.parts and path.name.startswith(("test_", "conftest"))
             for line in wall_time_asserts(path)]
    assert found == [], ("assert order and outcome; time it in tests/benchmarks/:\n"
                         + "\n".join(found))
