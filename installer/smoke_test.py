"""Smoke test of a frozen build: open the window offscreen, paint once, exit cleanly.

Fails on a non-zero exit, on missing timings, or on anything unexpected on standard error
(a missing data file or hidden import shows up there first).

    python installer/smoke_test.py dist/onnx-studio/onnx-studio
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ALLOWED_STDERR = ("propagateSizeHints",)
RECIPE = """
version = 1
[model]
source = "example:lstm"
[[inputs]]
name = "input"
shape = [5, 3, 10]
dynamic = {{ 0 = "sequence" }}
[[inputs]]
name = "h0"
shape = [8, 3, 20]
[[inputs]]
name = "c0"
shape = [8, 3, 20]
[export]
output = "{output}"
exporter = "torchscript"
"""


def main() -> int:
    binary = sys.argv[1]
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    result = subprocess.run([binary, "--exit-after-paint"], capture_output=True, text=True,
                            env=env, timeout=120)
    unexpected = [line for line in result.stderr.splitlines()
                  if line.strip() and not any(a in line for a in ALLOWED_STDERR)]
    problems = []
    if result.returncode != 0:
        problems.append(f"exit status {result.returncode}")
    if unexpected:
        problems.append("unexpected stderr:\n  " + "\n  ".join(unexpected[:20]))
    try:
        timings = json.loads(result.stdout.strip().splitlines()[-1])
        print(f"window painted in {timings['window_s']:.3f} s")
    except (IndexError, ValueError, KeyError):
        problems.append(f"no timings printed; stdout was {result.stdout[-500:]!r}")
    # The frozen worker exports and validates a seed example end to end.
    out = Path(tempfile.mkdtemp()) / "lstm.onnx"
    recipe = RECIPE.format(output=out)
    request = {"id": 1, "job": "export", "recipe": recipe, "base_dir": str(out.parent),
               "validate": True}
    worker = subprocess.run([binary, "--worker"], input=json.dumps(request) + "\n",
                            capture_output=True, text=True, env=env, timeout=600)
    results = [json.loads(line) for line in worker.stdout.splitlines()
               if '"result"' in line or '"error"' in line]
    report = results[-1].get("report", {}) if results else {}
    if not report.get("ok") or not out.is_file():
        problems.append(f"the frozen worker did not export: {worker.stdout[-1000:]}"
                        f"{worker.stderr[-1000:]}")
    else:
        print(f"frozen worker exported and validated {out.name}")
    for problem in problems:
        print("smoke test:", problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
