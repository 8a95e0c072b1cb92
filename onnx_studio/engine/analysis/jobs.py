"""The worker's analysis jobs: compare, profile, variant and explain requests run in
onnx_studio.engine.analysis, answered with the documents the CLI prints. A request that cannot run
(a missing file, a recipe that does not parse) raises StudioError, which the worker sends as the
job's `error`; files that disagree or a variant outside its tolerance are results with `ok`
false."""

from __future__ import annotations

from pathlib import Path

from onnx_studio.engine.events import Events
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
    VariantReport,
    VariantRequest,
    VariantResult,
)
from onnx_studio.engine.recipe import Recipe, check_recipe


def _recipe(text: str | None, base_dir: str | None) -> Recipe | None:
    if text is None:
        return None
    from onnx_studio.engine import recipe as recipes

    recipe = recipes.loads(text, base_dir=Path(base_dir or Path.cwd()), name="recipe")
    check_recipe(recipe)
    return recipe


def _path(name: str, base_dir: str | None) -> Path:
    path = Path(name).expanduser()
    return path if path.is_absolute() else Path(base_dir or Path.cwd()) / path


def compare(request: CompareRequest, events: Events) -> CompareResult:
    """Compare two files (onnx_studio.engine.analysis.compare_files)."""
    from onnx_studio.engine.analysis.compare import compare_files

    doc = CompareDocument.from_dict(compare_files(
        _path(request.a, request.base_dir), _path(request.b, request.base_dir),
        _recipe(request.recipe, request.base_dir), events, dims=request.dims,
        runs=request.runs))
    return CompareResult(id=request.id, comparison=doc)


def profile(request: ProfileRequest, events: Events) -> ProfileResult:
    """Profile one file (onnx_studio.engine.analysis.profile_file)."""
    from onnx_studio.engine.analysis.profile import profile_file

    doc = ProfileDocument.from_dict(profile_file(
        _path(request.onnx, request.base_dir), _recipe(request.recipe, request.base_dir),
        events, runs=request.runs, warmup=request.warmup, provider=request.provider,
        threads=request.threads, optimization=request.optimization, dims=request.dims))
    return ProfileResult(id=request.id, profile=doc)


def variant(request: VariantRequest, events: Events) -> VariantResult:
    """Make and validate one variant (onnx_studio.engine.analysis.make_variant)."""
    from onnx_studio.engine.analysis.variants import make_variant

    recipe = _recipe(request.recipe, request.base_dir)
    assert recipe is not None
    report = make_variant(_path(request.onnx, request.base_dir), recipe, request.kind,
                          _path(request.output, request.base_dir), events,
                          rtol=request.rtol, atol=request.atol,
                          keep_io_types=request.keep_io_types,
                          optimization=request.optimization,
                          keep_fp32=request.keep_fp32)
    assert isinstance(report, VariantReport)
    return VariantResult(id=request.id, variant_report=report)


def explain(request: ExplainRequest, events: Events) -> ExplainResult:
    """Name the first divergent node and write its repro (onnx_studio.engine.analysis.explain)."""
    from onnx_studio.engine.analysis.explain import explain as explain_file

    recipe = _recipe(request.recipe, request.base_dir)
    assert recipe is not None
    repro = _path(request.repro_dir, request.base_dir) if request.repro_dir else None
    doc = ExplainDocument.from_dict(explain_file(
        recipe, _path(request.onnx, request.base_dir), events, repro,
        write_repro=request.write_repro))
    return ExplainResult(id=request.id, explanation=doc)
