"""The window and its worker run on Windows and macOS too: no unguarded POSIX-only call.

The rule this scan enforces, on every module of app/ and on the engine's process modules
(worker.py, worker_process.py, process_tree.py, job_client.py):

- A POSIX-only name (`os.killpg`, `os.setpgid`, `os.fork`, `signal.SIGKILL`, ... below) may
  appear only inside the body of an `if` whose condition asks `hasattr(os, ...)` or
  `hasattr(signal, ...)`: the branch that runs only where the feature exists, so the code has
  a path for the other platforms (the `else`, or nothing to do there).
- Never allowed, guard or not: importing `selectors` (it cannot wait on pipes on Windows),
  the `start_new_session=` and `preexec_fn=` arguments (subprocess's POSIX-only process
  setup), and `from os import killpg`-style imports of a POSIX-only name (the import itself
  fails on Windows).

Tests may use POSIX (they run here); the product may not.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

POSIX_ONLY = {
    "os": {"killpg", "setpgid", "getpgid", "getpgrp", "setsid", "fork", "forkpty", "wait3",
           "wait4", "WNOHANG"},
    "signal": {"SIGKILL", "SIGHUP", "SIGCHLD", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGPIPE",
               "pthread_sigmask", "pthread_kill", "sigwait", "alarm", "setitimer"},
}
NEVER_MODULES = {"selectors"}
NEVER_KEYWORDS = {"start_new_session", "preexec_fn"}


def _is_feature_guard(test: ast.expr) -> bool:
    """Does this `if` condition ask hasattr(os|signal, ...) (not negated)?"""
    negated: set[int] = set()
    for node in ast.walk(test):
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            negated.update(id(inner) for inner in ast.walk(node.operand))
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and node.func.id == "hasattr" and node.args and isinstance(node.args[0], ast.Name)
        and node.args[0].id in POSIX_ONLY and id(node) not in negated
        for node in ast.walk(test))


def unguarded_posix_calls(source: str, filename: str = "<source>") -> list[str]:
    """Each breach of the rule in `source`, as 'file:line: what'."""
    tree = ast.parse(source, filename)
    found: list[str] = []

    def visit(node: ast.AST, guarded: bool) -> None:
        what = None
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.attr in POSIX_ONLY.get(node.value.id, ()) and not guarded:
                what = f"{node.value.id}.{node.attr} outside a hasattr() guard"
        elif isinstance(node, ast.Import):
            names = {alias.name.split(".")[0] for alias in node.names}
            if names & NEVER_MODULES:
                what = f"import {', '.join(sorted(names & NEVER_MODULES))}"
        elif isinstance(node, ast.ImportFrom):
            module = (node.module or "").split(".")[0]
            names = {alias.name for alias in node.names}
            if module in NEVER_MODULES or names & POSIX_ONLY.get(module, set()):
                what = f"from {node.module} import {', '.join(sorted(names))}"
        elif isinstance(node, ast.keyword) and node.arg in NEVER_KEYWORDS:
            what = f"{node.arg}= argument"
        if what:
            found.append(f"{filename}:{getattr(node, 'lineno', '?')}: {what}")
        if isinstance(node, ast.If):
            visit(node.test, guarded)
            inside = guarded or _is_feature_guard(node.test)
            for child in node.body:
                visit(child, inside)
            for child in node.orelse:
                visit(child, guarded)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, guarded)

    visit(tree, False)
    return found


def product_sources() -> list[Path]:
    # the worker, and what ends processes and trees for the window and the CLI
    engine = ["worker.py", "worker_process.py", "process_tree.py", "job_client.py"]
    return [*sorted((REPO / "onnx_studio" / "app").rglob("*.py")),
            *(REPO / "onnx_studio" / "engine" / n for n in engine)]


def test_app_and_worker_have_no_unguarded_posix_only_calls() -> None:
    breaches = [breach for path in product_sources()
                for breach in unguarded_posix_calls(path.read_text(encoding="utf-8"),
                                                    str(path.relative_to(REPO)))]
    assert not breaches, "\n".join(breaches)


def test_the_scan_tells_guarded_from_unguarded() -> None:
    unguarded = (
        "import os, selectors, signal, subprocess\n"
        "os.killpg(1, signal.SIGKILL)\n"
        "subprocess.Popen(['x'], start_new_session=True, preexec_fn=os.setsid)\n"
        "from os import setpgid\n"
        "if not hasattr(os, 'killpg'):\n    os.killpg(1, 9)\n"
        "if hasattr(os, 'killpg'):\n    pass\nelse:\n    os.fork()\n"
    )
    found = unguarded_posix_calls(unguarded)
    assert [line.split(": ", 1)[1] for line in found] == [
        "import selectors",
        "os.killpg outside a hasattr() guard",
        "signal.SIGKILL outside a hasattr() guard",
        "start_new_session= argument",
        "preexec_fn= argument",
        "os.setsid outside a hasattr() guard",
        "from os import setpgid",
        "os.killpg outside a hasattr() guard",
        "os.fork outside a hasattr() guard",
    ]
    guarded = (
        "import os, signal\n"
        "def end(pid):\n"
        "    if hasattr(os, 'killpg') and pid:\n"
        "        os.killpg(pid, signal.SIGKILL)\n"
        "        if pid > 1:\n            os.setpgid(0, 0)\n"
        "    else:\n        os.kill(pid, signal.SIGTERM)\n"
    )
    assert unguarded_posix_calls(guarded) == []
