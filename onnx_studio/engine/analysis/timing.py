"""Latency as every analysis measures it: warm-up runs, then the median and 90th percentile."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.validation.ort_session import ort_message, session_settings

DEFAULT_RUNS = 20
DEFAULT_WARMUP = 3


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    """{"p50", "p90"} of run times in milliseconds (rounded to the microsecond)."""
    values = np.asarray(samples_ms, dtype=np.float64)
    return {"p50": round(float(np.percentile(values, 50)), 3),
            "p90": round(float(np.percentile(values, 90)), 3)}


def time_calls(call: Callable[[], Any], runs: int = DEFAULT_RUNS,
               warmup: int = DEFAULT_WARMUP) -> list[float]:
    """Wall time of `runs` calls in milliseconds, after `warmup` calls that are not counted."""
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000.0)
    return samples


def open_session(path: Any, *, providers: list[str] | None = None, optimization: str = "all",
                 threads: int | None = None, profile_prefix: str | None = None,
                 optimized_output: str | None = None) -> tuple[Any, float]:
    """An onnxruntime InferenceSession and the milliseconds it took to create.

    `threads` sets intra_op_num_threads (None: onnxruntime's default); `profile_prefix`
    turns on its profiler, writing the trace under that prefix; `optimized_output` makes it
    write the graph after optimization there. Raises StudioError("validation") when the
    session cannot be made.
    """
    import onnxruntime as ort

    options, chosen = session_settings(list(providers or ["CPUExecutionProvider"]),
                                       optimization)
    if threads is not None:
        options.intra_op_num_threads = int(threads)
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    if optimized_output is not None:
        options.optimized_model_filepath = optimized_output
    started = time.perf_counter()
    try:
        session = ort.InferenceSession(str(path), options, providers=chosen)
    except Exception as exc:
        raise StudioError("validation", f"ONNX Runtime cannot load {path}: {ort_message(exc)}",
                          "Check that the file runs in ONNX Runtime (onnx-studio validate).",
                          details=str(exc)) from None
    return session, (time.perf_counter() - started) * 1000.0


def run_session(session: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """All outputs of one run; a StudioError("validation") with onnxruntime's sentence."""
    try:
        return list(session.run(None, feeds))
    except Exception as exc:
        raise StudioError("validation", f"ONNX Runtime failed to run the file: "
                          f"{ort_message(exc)}",
                          "Check the input sizes (--dim NAME=SIZE) or the recipe's inputs.",
                          details=str(exc)) from None
