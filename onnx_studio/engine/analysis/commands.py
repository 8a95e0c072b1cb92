"""The `compare`, `profile`, `variant` and `explain` commands of `onnx-studio`: their flags,
their runs and their text output. onnx_studio.engine.cli adds these parsers and hands the parsed
arguments here.

Each command prints one typed document with --json (onnx_studio.engine.protocol: `CompareDocument`,
`ProfileDocument`, `VariantReport`, `ExplainDocument`), on every outcome: a failure is the same
document with `ok` false and its `error`. Exit status as everywhere: 2 a wrong request, 1 a failed
check (files that disagree, a variant outside its tolerance) or a run that could not be made, 0
otherwise (explain: whether or not the file diverges). The flags and the recipe are checked here;
the work runs in a worker process of its own (onnx_studio.engine.job_client, through
onnx_studio.engine.cli), so a model that crashes, a signal or the out-of-memory killer still ends in
the document (`worker_crashed`, `cancelled`).
"""

from __future__ import annotations

import argparse
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.events import Events
from onnx_studio.engine.export.hf_files import check_output_folder
from onnx_studio.engine.export.onnx_file import check_output_path
from onnx_studio.engine.file_set import check_apart
from onnx_studio.engine.paths import repro_folder
from onnx_studio.engine.protocol import (
    CompareDocument,
    CompareRequest,
    CompareResult,
    ExplainDocument,
    ExplainRequest,
    ExplainResult,
    ProfileDocument,
    ProfileRequest,
    ProfileResult,
    Result,
    VariantReport,
    VariantRequest,
    VariantResult,
    WarningItem,
)
from onnx_studio.engine.recipe import Recipe, check_recipe, is_folder_source, to_toml

COMMANDS = ("compare", "profile", "variant", "explain")
AnalysisDocument = CompareDocument | ProfileDocument | VariantReport | ExplainDocument


def add_parsers(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add the three subcommands to `onnx-studio`'s subparsers (`common`: --json, -v)."""
    compare = sub.add_parser("compare", help="compare two .onnx files: graphs, weights, outputs")
    compare.add_argument("a", help="the first .onnx file (the reference)")
    compare.add_argument("b", help="the second .onnx file")
    compare.add_argument("--recipe", help="recipe of the model: its inputs, and PyTorch too")
    compare.add_argument("--runs", type=int, default=20, help="timed runs per file (20)")
    _dims(compare)
    common(compare)

    profile = sub.add_parser("profile", help="time an .onnx file in ONNX Runtime, per node")
    profile.add_argument("model", help="the .onnx file")
    profile.add_argument("--recipe", help="recipe of the model: its inputs, and PyTorch too")
    profile.add_argument("--runs", type=int, default=20, help="timed runs after warm-up (20)")
    profile.add_argument("--warmup", type=int, default=3, help="untimed runs first (3)")
    profile.add_argument("--provider", default="CPUExecutionProvider")
    profile.add_argument("--threads", type=int, help="intra-op threads (onnxruntime's default)")
    profile.add_argument("--optimization", default="all",
                         choices=("disable", "basic", "extended", "all"))
    _dims(profile)
    common(profile)

    variant = sub.add_parser("variant", help="write an optimized, fp16 or int8 copy, validated")
    variant.add_argument("model", help="the .onnx file (a Hugging Face recipe: its folder)")
    variant.add_argument("--recipe", required=True, help="recipe that rebuilds the model")
    variant.add_argument("--kind", required=True, choices=("fp16", "int8", "optimized"))
    variant.add_argument("-o", "--output", required=True,
                         help="the variant's .onnx path (a Hugging Face recipe: a folder)")
    variant.add_argument("--rtol", type=float, help="replace the kind's tolerance")
    variant.add_argument("--atol", type=float, help="replace the kind's tolerance")
    variant.add_argument("--no-keep-io-types", action="store_true",
                         help="fp16: make inputs and outputs float16 too")
    variant.add_argument("--optimization", default="extended",
                         choices=("basic", "extended", "all"), help="optimized: the level")
    variant.add_argument("--keep-fp32", metavar="auto|NODE,...",
                         help="fp16: nodes to keep in float32 (FILE:NODE for one file of a "
                         "Hugging Face folder); auto finds a small set that lets the variant "
                         "pass")
    common(variant)

    explain = sub.add_parser("explain", help="name the first node that diverges from PyTorch "
                             "and write a repro of it")
    explain.add_argument("model", help="the .onnx file (a Hugging Face recipe: its folder)")
    explain.add_argument("--recipe", required=True, help="recipe that rebuilds the model")
    explain.add_argument("-o", "--output", metavar="REPRO_DIR",
                         help="the repro folder (default: beside the file, NAME.repro)")
    common(explain)


def _dims(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dim", action="append", default=[], metavar="NAME=SIZE",
                        help="size of a dynamic dimension when there is no recipe "
                        "(default 2), e.g. --dim batch=4")


def parse_dims(texts: list[str]) -> dict[str, int]:
    """--dim NAME=SIZE flags as a dict; a `recipe` error (exit 2) for a malformed one."""
    dims = {}
    for text in texts:
        name, sep, size = text.partition("=")
        if not sep or not name or not size.strip().isdigit() or int(size) < 1:
            raise StudioError("recipe", f"--dim {text!r}: write NAME=SIZE with a size of at "
                              "least 1, e.g. --dim batch=4.", exit_code=2)
        dims[name] = int(size)
    return dims


def _recipe(path: str | None) -> Recipe | None:
    if not path:
        return None
    from onnx_studio.engine import recipe as recipes
    from onnx_studio.engine import shipped

    recipe = recipes.load(shipped.runnable(path))
    check_recipe(recipe)
    return recipe


def _file(name: str) -> str:
    """A file named on the command line, absolute (the worker resolves against the recipe)."""
    return str(Path(name).expanduser().resolve())


AnalysisRequest = CompareRequest | ProfileRequest | VariantRequest | ExplainRequest
RunJob = Callable[[AnalysisRequest, Path], Result]


def run(args: argparse.Namespace, events: Events, run_job: RunJob) -> AnalysisDocument:
    """Run one analysis command in a worker (`run_job(request, folder)`, onnx_studio.engine.cli's):
    every failure comes back inside the document, a worker that crashed or was cancelled
    included."""
    empty: AnalysisDocument = {"compare": CompareDocument, "profile": ProfileDocument,
                               "variant": VariantReport,
                               "explain": ExplainDocument}[args.command]()
    found = _collect(events)
    try:
        request, folder = request_of(args)
        doc = document_of(run_job(request, folder))
        doc.warnings = found + list(doc.warnings)
        if isinstance(doc, CompareDocument):
            judge_comparison(doc)
        return doc
    except StudioError as err:
        empty.fail(err)
    except Exception as exc:  # our own bug: still one sentence and the document
        empty.fail(StudioError(
            "export", f"onnx-studio {args.command} failed unexpectedly: {exc}.",
            "Run with --verbose and report the traceback.", details=traceback.format_exc()))
    empty.warnings = found
    return empty


def request_of(args: argparse.Namespace) -> tuple[AnalysisRequest, Path]:
    """The worker request for the command line, checked first (a wrong flag or recipe, or an
    output the command would refuse, is exit status 2 before any worker starts), and the
    folder where the job writes (for the clean-up of a killed job)."""
    recipe = _recipe(args.recipe)
    text = to_toml(recipe) if recipe is not None else None
    base = str(recipe.base_dir) if recipe is not None else None
    if args.command == "compare":
        return CompareRequest(a=_file(args.a), b=_file(args.b), recipe=text, base_dir=base,
                              dims=parse_dims(args.dim), runs=_runs(args.runs)), Path.cwd()
    if args.command == "profile":
        return ProfileRequest(onnx=_file(args.model), recipe=text, base_dir=base,
                              runs=_runs(args.runs), warmup=args.warmup,
                              provider=args.provider, threads=args.threads,
                              optimization=args.optimization,
                              dims=parse_dims(args.dim)), Path.cwd()
    assert recipe is not None and text is not None  # --recipe is required
    if args.command == "explain":
        model = _file(args.model)
        repro = _file(args.output) if args.output else None
        repro_folder(recipe, Path(model), Path(repro) if repro else None, [])
        return ExplainRequest(onnx=model, recipe=text, base_dir=base, repro_dir=repro), \
            Path(repro).parent if repro else Path(model).parent
    for name in ("rtol", "atol"):
        value = getattr(args, name)
        if value is not None and not (value >= 0 and value != float("inf")):
            raise StudioError("recipe", f"--{name} must be a finite number of at least 0.",
                              exit_code=2)
    output = _file(args.output)
    _check_variant_output(recipe, Path(_file(args.model)), Path(output))
    return VariantRequest(onnx=_file(args.model), recipe=text, base_dir=base, kind=args.kind,
                          output=output, rtol=args.rtol, atol=args.atol,
                          keep_io_types=not args.no_keep_io_types,
                          optimization=args.optimization,
                          keep_fp32=keep_fp32_request(args.keep_fp32, args.kind)), \
        Path(output).parent


def _check_variant_output(recipe: Recipe, source: Path, output: Path) -> None:
    """The variant's output, refused (kind `write`, exit 2) before a worker starts when the
    variant itself would refuse it (onnx_studio.engine.analysis.variants, folder_variants)."""
    if is_folder_source(recipe.model.source):
        check_output_folder(output, "variant", [source])
    else:
        check_apart([check_output_path(output)], [source], "The variant")


def keep_fp32_request(text: str | None, kind: str) -> str | None:
    """--keep-fp32 as the request carries it ("auto" or names joined by commas), checked."""
    if text is None:
        return None
    if kind != "fp16":
        raise StudioError("recipe", f"--keep-fp32 applies to --kind fp16, not {kind}.",
                          exit_code=2)
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise StudioError("recipe", "--keep-fp32 needs auto or node names joined by commas.",
                          exit_code=2)
    return "auto" if names == ["auto"] else ",".join(names)


def document_of(result: Result) -> AnalysisDocument:
    """The document a worker's analysis result carries."""
    if isinstance(result, CompareResult):
        return result.comparison
    if isinstance(result, ProfileResult):
        return result.profile
    if isinstance(result, ExplainResult):
        return result.explanation
    assert isinstance(result, VariantResult)
    return result.variant_report


def judge_comparison(doc: CompareDocument) -> None:
    """Files that disagree fail the command (exit status 1), with the first cause named."""
    if doc.ok or doc.parity is None or doc.error is not None:
        return
    worst = doc.parity.max_abs_diff
    if not doc.parity.ok:
        failed = [o.name for o in doc.parity.outputs if not o.passed]
        message = (f"The two files disagree: output {', '.join(failed) or '?'} differs by "
                   f"up to {worst:.3g}." if worst is not None else
                   "The two files disagree on their outputs.")
    else:
        message = "The files agree with each other but not with PyTorch."
    hint = ("See `initializers.changed` for weights that differ, and the operator "
            "histograms for what else changed.")
    if doc.initializers.changed:
        hint = f"Initializer {doc.initializers.changed[0].name!r} differs first; " + hint
    doc.fail(StudioError("validation", message, hint))


def _runs(runs: int) -> int:
    if runs < 1:
        raise StudioError("recipe", f"--runs must be at least 1 (got {runs}).", exit_code=2)
    return runs


def _collect(events: Events) -> list[WarningItem]:
    """Warnings said while the command runs, kept for the document as well."""
    found: list[WarningItem] = []
    shown = events.warning

    def warning(item: dict[str, Any]) -> None:
        found.append(WarningItem.from_dict(item))
        shown(item)

    events.warning = warning
    return found


def print_text(doc: AnalysisDocument, out: TextIO) -> None:
    """The document for a reader (without --json)."""
    if isinstance(doc, CompareDocument):
        _print_compare(doc, out)
    elif isinstance(doc, ProfileDocument):
        _print_profile(doc, out)
    elif isinstance(doc, ExplainDocument):
        _print_explain(doc, out)
    else:
        facts = doc.variant
        if facts is not None:
            out.write(f"wrote {doc.output} ({facts.kind}): size x{facts.size_ratio:.2f}, "
                      f"latency x{facts.latency_ratio or float('nan'):.2f}, max error "
                      f"{facts.max_abs_diff if facts.max_abs_diff is not None else '—'} "
                      f"(rtol {facts.rtol:g}, atol {facts.atol:g}): "
                      f"{'passed' if doc.ok else 'FAILED'}\n")
            if facts.kept_fp32 is not None:
                out.write(f"kept in float32 ({len(facts.kept_fp32)}): "
                          f"{', '.join(facts.kept_fp32) or 'none'}\n")


def _print_compare(doc: CompareDocument, out: TextIO) -> None:
    if not doc.nodes:
        return
    out.write(f"nodes: A {doc.nodes['a']}, B {doc.nodes['b']}; size: A {doc.size_bytes['a']} "
              f"B {doc.size_bytes['b']} bytes\n")
    ops = sorted(set(doc.ops["a"]) | set(doc.ops["b"]))
    for op in ops:
        na, nb = doc.ops["a"].get(op, 0), doc.ops["b"].get(op, 0)
        if na != nb:
            out.write(f"  {op}: {na} -> {nb}\n")
    if doc.matching is not None:
        out.write(f"matched nodes: {doc.matching.matched} ({doc.matching.by_name} by name, "
                  f"{doc.matching.by_structure} by structure); unmatched A "
                  f"{len(doc.matching.unmatched_a)}, B {len(doc.matching.unmatched_b)}\n")
    init = doc.initializers
    out.write(f"initializers: {len(init.added)} added, {len(init.removed)} removed, "
              f"{len(init.changed)} changed\n")
    for c in init.changed[:10]:
        out.write(f"  {c.name}: max abs diff {c.max_abs_diff}\n")
    if doc.parity is not None:
        out.write(f"parity: {'ok' if doc.parity.ok else 'FAILED'} (max abs diff "
                  f"{doc.parity.max_abs_diff})\n")
    for side, lat in doc.latency_ms.items():
        out.write(f"latency {side.upper()}: p50 {lat.p50:.3f} ms, p90 {lat.p90:.3f} ms\n")
    if doc.timing_note:
        out.write(doc.timing_note + "\n")


def _print_profile(doc: ProfileDocument, out: TextIO) -> None:
    if doc.latency_ms is None:
        return
    out.write(f"latency: p50 {doc.latency_ms.p50:.3f} ms, p90 {doc.latency_ms.p90:.3f} ms\n")
    if doc.torch_latency_ms is not None:
        out.write(f"eager PyTorch: p50 {doc.torch_latency_ms.p50:.3f} ms\n")
    out.write(doc.per_node_sentence() + "\n")
    out.write("slowest nodes (share of a run, as ms of the p50 run):\n")
    for n in doc.nodes[:10]:
        ran = f"  ran {' + '.join(n.fused)}" if n.fused else ""
        out.write(f"  {n.name:24} {n.op_type:14} {_part(n.share, n.p50_ms)}{ran}\n")
    out.write("slowest operators:\n")
    for o in doc.ops[:10]:
        out.write(f"  {o.op_type:24} {_part(o.share, o.p50_ms)}  x{o.count}\n")
    out.write("slowest module groups:\n")
    for g in doc.groups[:10]:
        out.write(f"  {g.name:40} {_part(g.share, g.p50_ms)}\n")


def _part(share: float | None, p50_ms: float | None) -> str:
    """A node's (operator's, group's) part of a run: "12.3%  0.009 ms"."""
    if share is None or p50_ms is None:
        return "—"
    return f"{share:6.1%} {p50_ms:9.4f} ms"


def _print_explain(doc: ExplainDocument, out: TextIO) -> None:
    if not doc.ok:
        return
    first = doc.first_divergence
    if first is None:
        out.write(f"no divergence: {doc.compared} values agree with PyTorch within rtol "
                  f"{doc.rtol:g}, atol {doc.atol:g}\n" if doc.compared else
                  f"nothing compared: {doc.message or 'no value matches the model'}\n")
        return
    where = " at ".join(p for p in (f"in {first.module}" if first.module else "",
                                    first.source) if p)
    out.write(f"first divergence: {first.op_type} node {first.node}"
              f"{' ' + where if where else ''}: max abs diff {first.max_abs_diff:.3g} "
              f"(x{first.tolerance_ratio or float('inf'):.3g} the tolerance); "
              f"{doc.downstream} node(s) beyond it downstream\n")
    for item in first.inputs:
        diff = "—" if item.max_abs_diff is None else f"{item.max_abs_diff:.3g}"
        out.write(f"  input {item.name} ({item.kind}): max abs diff {diff}\n")
    if doc.repro is not None:
        out.write(f"repro: {doc.repro.folder}\n  run: {doc.repro.command}\n")
