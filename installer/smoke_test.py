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

ALLOWED_STDERR = ("propagateSizeHints",)


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
    worker = subprocess.run([binary, "--worker"], input='{"id": 1, "job": "ping"}\n',
                            capture_output=True, text=True, env=env, timeout=300)
    if '"ready"' not in worker.stdout:
        problems.append(f"the worker did not start: {worker.stderr[-1000:]}")
    for problem in problems:
        print("smoke test:", problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
