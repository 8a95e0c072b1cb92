"""The house rules, checked: ruff, mypy, the import contracts, and a window without torch."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import MYPY, REPO


def _run(*args: str, timeout: float = 100) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_ruff_is_clean() -> None:
    result = _run(sys.executable, "-m", "ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow  # about 50 s on a fresh checkout (no .mypy_cache yet), run beside the suite
@pytest.mark.timeout(400)
def test_mypy_is_clean(request: pytest.FixtureRequest) -> None:
    """mypy was started when this test was collected (tests/conftest.py), unless the suite
    runs in several processes (pytest-xdist): then it runs here, beside the other tests."""
    if MYPY not in request.config.stash:
        result = _run(sys.executable, "-m", "mypy", timeout=380)
        assert result.returncode == 0, result.stdout + result.stderr
        return
    mypy, output = request.config.stash[MYPY]
    status = mypy.wait(timeout=380)
    output.seek(0)
    assert status == 0, output.read().decode(errors="replace")


def test_a_modules_tests_run_in_one_test_process(tmp_path: Path) -> None:
    """The suite's xdist groups hold (tests/conftest.py): run in two processes, each test
    module's tests all run in one of them, so its module fixtures (an export) are made once."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    modules = ["tests/engine/test_paths.py", "tests/engine/test_recipe.py"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-v", "-p", "no:cacheprovider",
         f"--basetemp={tmp_path / 'run'}", *modules], cwd=REPO, env=env, capture_output=True,
        text=True, timeout=100)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    processes: dict[str, set[str]] = {}
    for worker, module in re.findall(r"^\[(gw\d+)\] \[ *\d+%\] PASSED (\S+?)::",
                                     result.stdout, re.MULTILINE):
        processes.setdefault(module, set()).add(worker)
    assert sorted(processes) == modules, result.stdout[-3000:]
    assert all(len(workers) == 1 for workers in processes.values()), processes


def test_import_contracts_hold() -> None:
    """The engine's layers, engine without Qt or app, app and graph without torch
    (`[tool.importlinter]` in pyproject.toml)."""
    result = _run(sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; "
                  "sys.exit(lint_imports(no_cache=True))")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout, result.stdout


def test_the_cli_process_stays_light() -> None:
    """The CLI's own process parses the command and talks to its worker: importing it loads
    none of the heavy libraries the job needs (they would cost every command their import)."""
    code = ("import sys, onnx_studio.engine.cli\n"
            "heavy = {'torch', 'numpy', 'onnx', 'onnxruntime', 'onnxscript', 'transformers'}\n"
            "print(sorted(heavy & set(sys.modules)))\n")
    result = _run(sys.executable, "-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_app_imports_without_torch() -> None:
    """Every app module imports with torch made unimportable, and none pulls torch in."""
    code = (
        "import os, sys, pkgutil, importlib\n"
        "os.environ['QT_QPA_PLATFORM'] = 'offscreen'\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'torch':\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import onnx_studio.app as app\n"
        "for m in pkgutil.walk_packages(app.__path__, 'onnx_studio.app.'):\n"
        "    importlib.import_module(m.name)\n"
        "assert 'torch' not in sys.modules\n"
        "print('ok')\n"
    )
    result = _run(sys.executable, "-c", code)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr


# `.get("key")` / `.get('key')` (a key computed in an f-string is a variable's), and an
# environment lookup, the one mapping read by name
_DICT_READ = re.compile(r"\.get\(\s*[rbu]?['\"]")
_ENVIRONMENT = re.compile(r"\b(?:environ|env)\.get\(")


def test_the_window_reads_typed_fields_not_dicts() -> None:
    """No `.get("…")` on a message or document dict anywhere in app/ (issue 25): the window reads
    onnx_studio.engine.protocol's typed fields, from the worker's line to the glass. Environment
    variables (os.environ, or a copy of it named env) are the one mapping read by name."""
    found = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
             for path in sorted((REPO / "onnx_studio" / "app").rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if _DICT_READ.search(_ENVIRONMENT.sub("", line))]
    assert not found, "read typed fields instead:\n" + "\n".join(found)


def test_the_window_modules_are_short() -> None:
    """Files by concern (issue 25): every module of app/ at most 600 lines, the window's own
    module under 300 (menus, status line and session parts live in their own modules)."""
    lengths = {path.relative_to(REPO).as_posix(): len(path.read_text(encoding="utf-8")
                                                      .splitlines())
               for path in (REPO / "onnx_studio" / "app").rglob("*.py")}
    long = {name: n for name, n in lengths.items() if n > 600}
    assert not long, long
    assert lengths["onnx_studio/app/window.py"] < 300
