"""How far an ONNX Runtime output is from the PyTorch reference: metrics and plot data.

NumPy only (no torch, no onnxruntime), so the window can import it to read plot data
(`load_plots`). Every number returned is a plain finite float or int, or None, so the result
is strict JSON.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from onnx_studio.engine.files import write_bytes_atomic

PLOT_POINTS = 100_000  # scatter points kept per output; enough for a plot, small on disk
HIST_BINS = 64
# the denominator floor of the relative difference, as in torch.onnx.verification, so node
# and output numbers read the same way
REL_EPS = 1e-7


def _finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def validation_warning(message: str) -> dict[str, Any]:
    """A warning of the validation, shaped like the export's warnings."""
    return {"category": "ValidationWarning", "message": message, "source": ""}


def compare(reference: np.ndarray, candidate: np.ndarray, rtol: float, atol: float
            ) -> dict[str, Any]:
    """Metrics of `candidate` against `reference` for one output of one trial.

    An element passes when |candidate - reference| <= atol + rtol * |reference| (NumPy's
    isclose with the reference as the second argument); NaN must meet NaN and an infinity the
    same infinity. Integer and bool outputs are compared exactly.
    """
    if not (math.isfinite(rtol) and math.isfinite(atol) and rtol >= 0 and atol >= 0):
        # a NaN tolerance compares False with every difference and would pass them all
        raise ValueError(f"tolerances must be finite and not negative (rtol={rtol}, "
                         f"atol={atol})")
    out: dict[str, Any] = {
        "shape": list(reference.shape),
        "dtype": str(reference.dtype),
        "onnx_shape": list(candidate.shape),
        "onnx_dtype": str(candidate.dtype),
    }
    problems: list[str] = []
    if reference.shape != candidate.shape:
        problems.append(f"shape {list(candidate.shape)} from ONNX Runtime, "
                        f"{list(reference.shape)} from PyTorch")
    if reference.dtype != candidate.dtype:
        problems.append(f"dtype {candidate.dtype} from ONNX Runtime, "
                        f"{reference.dtype} from PyTorch")
    if reference.shape != candidate.shape:
        out.update(passed=False, message="; ".join(problems), max_abs_diff=None,
                   max_rel_diff=None, mean_abs_diff=None, cosine_similarity=None,
                   mismatched=None, mismatched_fraction=None, nan_mismatch=None,
                   inf_mismatch=None, matched_nans=None, elements=int(reference.size))
        return out

    exact = not (_is_float(reference) or _is_float(candidate))
    # float32 outputs stay float32 (one temporary per step instead of float64 copies of every
    # array); sums accumulate in float64 so the reported means and cosines are still exact
    work = np.float64 if exact or np.float64 in (reference.dtype, candidate.dtype) \
        else np.float32
    ref = reference.astype(work, copy=False).ravel()
    cand = candidate.astype(work, copy=False).ravel()
    n = ref.size
    if np.isfinite(ref).all() and np.isfinite(cand).all():
        r, c = ref, cand
        nan_mismatch = inf_mismatch = matched_nans = 0
    else:
        # NaN agrees only with NaN at the same position; those are counted, not hidden
        ref_nan, cand_nan = np.isnan(ref), np.isnan(cand)
        nan_mismatch = int(np.count_nonzero(ref_nan != cand_nan))
        matched_nans = int(np.count_nonzero(ref_nan & cand_nan))
        inf_mismatch = int(np.count_nonzero((np.isinf(ref) | np.isinf(cand)) & (ref != cand)
                                            & ~(ref_nan | cand_nan)))
        both_finite = np.isfinite(ref) & np.isfinite(cand)
        r, c = ref[both_finite], cand[both_finite]
    diff = np.subtract(c, r)
    np.abs(diff, out=diff)
    scale = np.abs(r)
    if exact:
        # counted in the native dtypes: float64 cannot tell 2**53 from 2**53 + 1
        outside_finite = int(np.count_nonzero(reference.ravel() != candidate.ravel()))
        max_rel = float((diff / (scale + REL_EPS)).max()) if diff.size else None
        band = [float(r.max()), float(r.min())] if r.size else None
    else:
        rel = scale + work(REL_EPS)
        np.divide(diff, rel, out=rel)
        max_rel = float(rel.max()) if rel.size else None
        scale *= work(rtol)
        scale += work(atol)
        outside_finite = int(np.count_nonzero(diff > scale))
        band = ([float(np.max(r - scale)), float(np.min(r + scale))] if r.size else None)
    mismatched = outside_finite + nan_mismatch + inf_mismatch
    # the output's own scale: its largest finite |expected|
    reference_scale = float(np.abs(r).max()) if r.size else None
    rule = None if exact else "element-wise"
    if (mismatched and not problems and not exact and mismatched == outside_finite
            and reference_scale and diff.size
            and float(diff.max()) <= scale_tolerance(rtol, reference.dtype) * reference_scale):
        # each element outside atol + rtol*|ref|, but the output as a whole within float32
        # rounding of its scale (random weights that give logits of 1e8): passed by its scale
        rule, mismatched = "scale", 0
    # no element compared (an empty output, or no finite pair): the numbers are unknown, None
    max_abs = float(diff.max()) if diff.size else None
    mean_abs = float(np.sum(diff, dtype=np.float64)) / diff.size if diff.size else None
    rr = float(np.sum(np.square(r), dtype=np.float64))
    cc = float(np.sum(np.square(c), dtype=np.float64))
    cosine: float | None
    if diff.size == 0:
        cosine = None
    elif rr == 0.0 or cc == 0.0:
        # two all-zero tensors point the same way; one zero tensor does not
        cosine = 1.0 if rr == cc == 0.0 else 0.0
    else:
        cosine = float(np.sum(np.multiply(r, c), dtype=np.float64)) / math.sqrt(rr * cc)
        cosine = max(-1.0, min(1.0, cosine))  # rounding can step just past 1
    if mismatched:
        if problems:  # another dtype: a tolerance is not the question, the values only tell
            problems.append(f"{mismatched} of {n} elements differ too")
        else:
            problems.append(f"{mismatched} of {n} elements differ"
                            + ("" if exact or max_abs is None
                               else f" by more than atol + rtol*|ref| "
                                    f"(max abs diff {max_abs:.3g})"))
    if problems and not exact and diff.size and nan_mismatch == inf_mismatch == 0:
        out.update(_tolerances_that_pass(np.abs(r), diff, rtol, atol))
    out.update(
        passed=not problems,
        message="; ".join(problems),
        rule=rule if not problems else None,
        reference_scale=_finite(reference_scale),
        tolerance_hull=None if exact else tolerance_hull(np.abs(r), diff),
        max_abs_diff=_finite(max_abs),
        max_rel_diff=_finite(max_rel),
        mean_abs_diff=_finite(mean_abs),
        cosine_similarity=_finite(cosine),
        mismatched=mismatched,
        mismatched_fraction=mismatched / n if n else None,
        nan_mismatch=nan_mismatch,
        inf_mismatch=inf_mismatch,
        matched_nans=matched_nans,
        elements=int(n),
        exact=exact,
        # the constants that would pass this trial too ([low, high], empty when low > high)
        # and the reference's finite range: read by `cannot_tell`
        constant_band=band,
        reference_range=[float(r.min()), float(r.max())] if r.size else None,
    )
    return out


# the scale rule: an output passes when its largest difference is within this many float32
# (or its own dtype's) epsilons of its largest |expected| (and within rtol of it). Rounding of a
# sum grows with its length; 64 epsilons (7.6e-6 for float32) keeps a real error out: a wrong
# value differs by a good part of the scale, not by a few parts in a million.
SCALE_EPSILONS = 64


def scale_tolerance(rtol: float, dtype: Any = np.float32) -> float:
    """The fraction of an output's scale (max |expected|) within which its largest difference
    is rounding: SCALE_EPSILONS epsilons of its float dtype (float32 for other dtypes), and
    never more than rtol."""
    kind = np.dtype(dtype)
    eps = float(np.finfo(kind if np.issubdtype(kind, np.floating) else np.float32).eps)
    return min(rtol, SCALE_EPSILONS * eps)


def _tolerances_that_pass(scale: np.ndarray, diff: np.ndarray, rtol: float, atol: float
                          ) -> dict[str, float | None]:
    """The atol that would pass at this rtol, the rtol that would pass at this atol (None when
    none would: a difference where |expected| is 0), and the largest difference as a fraction
    of the output's scale."""
    needed_atol = float(np.max(diff - np.float64(rtol) * scale))
    over = diff > atol
    if np.any(over & (scale == 0)):
        needed_rtol = None
    else:
        needed_rtol = float(np.max((diff[over] - atol) / scale[over])) if np.any(over) else rtol
    top = float(scale.max())
    return {"needed_atol": _finite(max(needed_atol, atol)),
            "needed_rtol": _finite(None if needed_rtol is None else max(needed_rtol, rtol)),
            "scale_ratio": _finite(float(diff.max()) / top) if top > 0 else None}


HULL_MAX_ELEMENTS = 50_000_000  # beyond this the hull's sort costs more than it saves


def tolerance_hull(scale: np.ndarray, diff: np.ndarray) -> list[list[float]] | None:
    """The few (|ref|, |diff|) pairs that decide `compare`'s verdict at every tolerance.

    An output passes at (rtol, atol) when max(diff - rtol*|ref|) <= atol over its finite
    elements. For rtol >= 0 that maximum is reached on the upper convex hull of the points
    (|ref|, diff) that no other point beats with a smaller |ref| and a larger diff, so those
    vertices (usually a handful) let the window judge the stored numbers again at another
    tolerance without running anything (`judge_hull`). The pair of the largest |ref| closes the
    list (the output's scale, for the scale rule). None for outputs too large to sort.
    """
    if diff.size == 0:
        return []
    if diff.size > HULL_MAX_ELEMENTS:
        return None
    order = np.lexsort((-diff, scale))  # |ref| ascending, the larger diff first on ties
    s, d = scale[order], diff[order]
    best = np.maximum.accumulate(d)
    keep = np.ones(d.size, dtype=bool)
    keep[1:] = d[1:] > best[:-1]  # a point beaten by one with a smaller |ref| never decides
    points = list(zip(s[keep].tolist(), d[keep].tolist(), strict=True))
    hull: list[tuple[float, float]] = []
    for point in points:  # upper hull, |ref| ascending, diff strictly rising
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (x2 - x1) * (point[1] - y1) - (y2 - y1) * (point[0] - x1) >= 0:
                hull.pop()  # the middle point lies on or below the line: never the maximum
            else:
                break
        hull.append(point)
    top = int(np.argmax(scale))  # the output's scale for the scale rule (judge_hull): a real
    if float(scale[top]) > hull[-1][0]:  # pair, so the element-wise verdict stays the same
        hull.append((float(scale[top]), float(diff[top])))
    return [[x, y] for x, y in hull]


def judge_hull(hull: list[list[float]], rtol: float, atol: float, dtype: str = "float32"
               ) -> bool:
    """True when no element of a `tolerance_hull` lies outside atol + rtol*|ref|, computed in
    the output's working dtype as `compare` does, or when the largest difference is within
    rounding of the output's scale (`scale_tolerance`), as `compare`'s scale rule."""
    if not hull:
        return True
    points = np.asarray(hull, dtype=np.float64 if dtype == "float64" else np.float32)
    bound = points[:, 0] * np.asarray(rtol, points.dtype) + np.asarray(atol, points.dtype)
    if not np.any(np.greater(points[:, 1], bound)):
        return True
    # the scale rule: its last point holds the largest |ref|, and its largest diff is on it
    top = float(points[:, 0].max())
    return top > 0 and float(points[:, 1].max()) <= scale_tolerance(rtol, dtype) * top


def _is_float(array: np.ndarray) -> bool:
    return bool(np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype,
                                                                          np.complexfloating))


def worst(per_trial: list[dict[str, Any]]) -> dict[str, Any]:
    """Fold one output's metrics from several trials into its worst case."""
    ran = [m for m in per_trial if m.get("max_abs_diff") is not None or not m.get("passed")]
    out: dict[str, Any] = {"passed": all(m.get("passed", False) for m in per_trial)}
    for key in ("max_abs_diff", "max_rel_diff", "mean_abs_diff", "mismatched",
                "mismatched_fraction", "nan_mismatch", "inf_mismatch", "matched_nans"):
        values = [m[key] for m in ran if m.get(key) is not None]
        out[key] = max(values) if values else None
    for key in ("reference_scale", "scale_ratio", "needed_atol", "needed_rtol"):
        values = [m[key] for m in ran if m.get(key) is not None]
        if values:
            out[key] = max(values)
    rules = {m.get("rule") for m in per_trial}
    if out["passed"] and rules & {"scale", "element-wise"}:
        out["rule"] = "scale" if "scale" in rules else "element-wise"
    cosines = [m["cosine_similarity"] for m in ran if m.get("cosine_similarity") is not None]
    out["cosine_similarity"] = min(cosines) if cosines else None
    messages = [m["message"] for m in per_trial if m.get("message")]
    out["message"] = messages[0] if messages else ""
    return out


VERDICT = "Verdict"  # the category of a warning that the verdict cannot tell


def cannot_tell(name: str, per_trial: list[dict[str, Any]], rtol: float, atol: float
                ) -> dict[str, Any] | None:
    """A `Verdict` warning when one output's comparison (its `compare` metrics in every trial)
    cannot tell a right file from a wrong one: some constant lies within the tolerance of every
    expected element of every trial, so a file returning that constant (zeros, when every
    |expected| is within atol) would pass too. None when the output varies beyond the
    tolerance, or when a trial failed (the comparison told then)."""
    bands = [m.get("constant_band") for m in per_trial]
    if not per_trial or None in bands or not all(m.get("passed") for m in per_trial):
        return None
    low = max(b[0] for b in bands if b is not None)
    high = min(b[1] for b in bands if b is not None)
    ranges = [m["reference_range"] for m in per_trial]
    smallest, largest = min(r[0] for r in ranges), max(r[1] for r in ranges)
    elements = sum(int(m.get("elements") or 0) for m in per_trial)
    if low > high:
        return None
    if low <= 0.0 <= high and not all(m.get("exact") for m in per_trial):
        size = max(abs(smallest), abs(largest))
        # a tolerance below the output's scale tells zeros from it; an output that is zero
        # everywhere has no scale, and no tolerance would
        lower = (f", or lower atol below its scale (atol = {size / 100:.0e})" if size > 0
                 else "")
        return {"category": VERDICT, "source": "", "message":
                f"Output {name!r} is within the tolerance of zero in every trial (largest "
                f"|expected| {size:.3g}, atol {atol:g}), so the comparison cannot tell a "
                "right file from a wrong one: a file that returns zeros passes too.",
                "hint": "Make the output large enough to compare: load real weights or a "
                        "checkpoint (random weights at their default initialisation can leave "
                        f"it near zero) or initialise the weights wider, feed inputs that move "
                        f"it{lower}."}
    if elements < 2:  # one number: nothing says whether it could vary
        return None
    same = (f"{smallest:.6g}" if smallest == largest
            else f"{smallest:.6g} to {largest:.6g}, within rtol {rtol:g} and atol {atol:g}")
    return {"category": VERDICT, "source": "", "message":
            f"Output {name!r} is the same value ({same}) in every element of every trial, so "
            "the comparison cannot tell a right file from a wrong one: a file that returns "
            "that constant passes too.",
            "hint": "Make the output vary: load real weights or a checkpoint, feed inputs that "
                    "move it (random fills, other sizes), or tighten rtol/atol below its "
                    "spread."}


def conclusiveness(cannot: list[dict[str, Any]]) -> dict[str, Any]:
    """The validation dict's `conclusive`, and when false the sentence (`inconclusive`) and the
    `hint` saying what would make it conclusive, from the outputs' `cannot_tell` warnings."""
    if not cannot:
        return {"conclusive": True}
    first = cannot[0]["message"]
    if len(cannot) > 1:
        first += f" ({len(cannot) - 1} more output(s) likewise)"
    return {"conclusive": False, "inconclusive": f"Inconclusive: {first}",
            "hint": cannot[0]["hint"]}  # the first output's: each says what would tell


def plot_sample(reference: np.ndarray, candidate: np.ndarray,
                points: int = PLOT_POINTS) -> dict[str, np.ndarray]:
    """Evenly spaced reference/candidate pairs (same indices) and a histogram of the error."""
    ref = reference.ravel()
    cand = candidate.ravel()
    n = ref.size
    index = np.linspace(0, n - 1, num=min(n, points)).round().astype(np.int64) if n else \
        np.zeros(0, np.int64)
    error = cand.astype(np.float64) - ref.astype(np.float64)
    error = error[np.isfinite(error)]
    if error.size:
        lo, hi = float(error.min()), float(error.max())
        if lo == hi:  # np.histogram needs a non-empty range
            lo, hi = lo - 0.5, hi + 0.5
        counts, edges = np.histogram(error, bins=HIST_BINS, range=(lo, hi))
    else:
        counts, edges = np.zeros(0, np.int64), np.zeros(0, np.float64)
    return {
        "index": index,
        "reference": ref[index],
        "candidate": cand[index],
        "hist_counts": counts.astype(np.int64),
        "hist_edges": edges.astype(np.float64),
    }


class PlotKeeper:
    """Keeps, per output, the arrays of the worst trial seen so far; samples them on save."""

    def __init__(self) -> None:
        self.kept: dict[str, tuple[float, str, np.ndarray, np.ndarray]] = {}

    def offer(self, name: str, label: str, metrics: dict[str, Any], ref: np.ndarray,
              cand: np.ndarray) -> None:
        score = metrics.get("max_abs_diff")
        score = float("inf") if score is None else float(score)
        if not metrics["passed"]:
            score += 1e300  # a failing trial is always the one to show
        if name not in self.kept or score > self.kept[name][0]:
            self.kept[name] = (score, label, ref, cand)  # references, not copies

    def save(self, path: Path, warn: Callable[[dict[str, Any]], None]) -> str | None:
        """Write the samples to `path` (.npz); the path written, or None with a warning."""
        arrays: dict[str, np.ndarray] = {"names": np.array(list(self.kept), dtype=str)}
        for i, (_, label, ref, cand) in enumerate(self.kept.values()):
            arrays[f"{i}/trial"] = np.array(label)
            for key, value in plot_sample(ref, cand).items():
                arrays[f"{i}/{key}"] = value
        try:  # temp file + rename: the window never reads a half-written file
            path.parent.mkdir(parents=True, exist_ok=True)
            buffer = io.BytesIO()
            np.savez(buffer, **arrays)  # type: ignore[arg-type]
            write_bytes_atomic(path, buffer.getvalue())
        except OSError as exc:
            warn({"category": "ValidationWarning", "source": "",
                  "message": f"Plot data could not be saved to {path}: {exc.strerror}."})
            return None
        return str(path)


def load_plots(path: Path) -> dict[str, dict[str, Any]]:
    """Read a plot file back: {output name: {trial, index, reference, candidate, hist_*}}."""
    with np.load(path, allow_pickle=False) as data:
        names = [str(n) for n in data["names"]]
        out: dict[str, dict[str, Any]] = {}
        for i, name in enumerate(names):
            if f"{i}/index" not in data:
                continue
            out[name] = {key: data[f"{i}/{key}"] for key in
                         ("index", "reference", "candidate", "hist_counts", "hist_edges")}
            out[name]["trial"] = str(data[f"{i}/trial"])
        return out
