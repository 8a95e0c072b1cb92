"""The variant of a Hugging Face export (the folder of files an `hf:` recipe's export wrote):
every file of the set gets its variant, written into another folder as one commit, and the
verdict is that folder's validation, as `onnx-studio validate FOLDER` gives it (each file
against eager PyTorch at its trial sizes, then greedy generation over the files).

fp16: each file's validation inputs are the trials its validation runs
(onnx_studio.engine.validation.hf_checks.trial_inputs: the export's inputs, other sizes, an empty
and a non-empty cache), and `--keep-fp32 auto` searches each file on its own. Node names are the
file's own in a folder of one file; in a set of several (an encoder and its decoders, whose node
names repeat) the document names them `FILE:NODE`, and an explicit `--keep-fp32` name may be either
(a plain name keeps that node in every file that has it).

The tolerance, the facts and the failure are those of onnx_studio.engine.analysis.variants: sizes
and latencies are those of the whole set (one run of every file on its export inputs).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import numpy as np

from onnx_studio.engine.analysis.conversions import (
    HalfPrecision,
    explicit_names,
    fail_message,
    variant_tolerance,
    write_converted,
)
from onnx_studio.engine.analysis.model_file import ModelFile
from onnx_studio.engine.analysis.timing import open_session, percentiles, time_calls
from onnx_studio.engine.errors import StudioError, one_line
from onnx_studio.engine.events import Events
from onnx_studio.engine.protocol import ExportReport, VariantFacts, VariantReport
from onnx_studio.engine.recipe import Recipe


def make_folder_variant(source: Path, recipe: Recipe, kind: str, output: Path,
                        events: Events, *, rtol: float | None, atol: float | None,
                        keep_io_types: bool, optimization: str, runs: int,
                        keep_fp32: str | None) -> VariantReport:
    """Write the `kind` variant of every file of the export folder `source` into the folder
    `output`, validate that folder against the recipe's model and return the variant
    document (onnx_studio.engine.analysis.variants.make_variant's, for a Hugging Face recipe).

    Raises StudioError for a wrong request (exit 2: `source` is no export folder of the
    recipe, `output` is no usable folder or is `source`, a --keep-fp32 name no file has) or a
    conversion that fails (kind "export").
    """
    from onnx_studio.engine.export.hf_files import check_output_folder
    from onnx_studio.engine.pipeline import hf_model_for_folder, validate_hf_report
    from onnx_studio.engine.validation.hf_checks import trial_inputs

    source = _source_folder(Path(source))
    output = check_output_folder(Path(output), "variant", [source])
    r, a = variant_tolerance(kind, recipe, rtol, atol)
    events.progress(0.0, "Loading the model")
    hf = hf_model_for_folder(recipe, source)
    files = [part.file for part in hf.parts]
    many = len(files) > 1
    originals = {name: ModelFile.read(source / name) for name in files}
    halves: dict[str, HalfPrecision] = {}
    started = time.perf_counter()
    if kind == "fp16":
        wanted = _explicit_by_file(explicit_names(keep_fp32), originals)
        for index, part in enumerate(hf.parts):
            events.progress(0.05 + 0.3 * index / len(files), f"Choosing {part.file}'s nodes")
            feeds = [{k: v.detach().cpu().numpy() for k, v in inputs.items()}
                     for inputs in trial_inputs(part)]
            halves[part.file] = HalfPrecision.choose(
                source / part.file, originals[part.file], feeds, wanted[part.file],
                keep_fp32 == "auto", r, a, keep_io_types,
                events.part(0.05 + 0.3 * index / len(files),
                            0.05 + 0.3 * (index + 1) / len(files)))
    events.progress(0.35, f"Making the {kind} variant of {len(files)} file(s)")
    settings = _write_set(kind, source, output, files, keep_io_types, optimization,
                          {name: set(half.kept) for name, half in halves.items()})
    if kind == "fp16":  # what was asked (the nodes it came to are `kept_fp32`)
        settings["keep_fp32"] = keep_fp32
    made = time.perf_counter() - started

    checked = dataclasses.replace(recipe, validate=dataclasses.replace(recipe.validate,
                                                                       rtol=r, atol=a))
    checked.base_dir = recipe.base_dir
    base = validate_hf_report(checked, output, events.part(0.4, 0.85), hf=hf)
    report = VariantReport(**{f.name: getattr(base, f.name)
                              for f in dataclasses.fields(ExportReport)})
    report.seconds = {"variant": made, **base.seconds}
    overflows = [dataclasses.replace(o, node=_qualified(name, o.node, many))
                 for name, half in halves.items() for o in half.find_overflows(output / name)]
    if overflows and report.ok:
        from onnx_studio.engine.analysis.ranges import overflow_error

        report.fail(overflow_error(overflows))
    events.progress(0.85, "Measuring latency")
    report.variant = VariantFacts.from_dict(_facts(
        kind, source, output, files, originals, settings, r, a, report, hf, runs, recipe,
        halves, overflows, many))
    fail_message(report, kind, output, r, a)
    events.progress(1.0, "Variant validated" if report.ok else "Variant failed")
    return report


def _source_folder(source: Path) -> Path:
    source = source.resolve()
    if source.is_file():
        raise StudioError("source", f"{source.name} is a file, but the recipe exports a Hugging "
                          "Face model into a folder: name the folder its export wrote "
                          f"({source.parent}), and -o a folder for the variant.", exit_code=2)
    if not source.is_dir():
        raise StudioError("source", f"The folder {source} does not exist; name the folder the "
                          "recipe's export wrote.", exit_code=2)
    return source


def _qualified(file: str, node: str, many: bool) -> str:
    return f"{file}:{node}" if many else node


def _explicit_by_file(names: list[str], originals: dict[str, ModelFile]
                      ) -> dict[str, list[str]]:
    """Each file's nodes of a --keep-fp32 list: FILE:NODE (FILE the name or its stem) for one
    file, a plain NODE for every file that has it; a `recipe` error (exit 2) for a name no
    file has."""
    nodes = {name: {n.name for n in model.proto.graph.node} for name, model in
             originals.items()}
    out: dict[str, list[str]] = {name: [] for name in originals}
    problems = []
    for text in names:
        holders = [f for f, known in nodes.items() if text in known]
        file, sep, node = text.partition(":")
        if not holders and sep:
            named = [f for f in nodes if file in (f, Path(f).stem)]
            holders = [f for f in named if node in nodes[f]]
            if not named:
                others = [f for f in nodes if node in nodes[f]]
                problems.append(f"{text} (the folder has no file {file}"
                                + (f"; {node} is a node of {', '.join(others)})" if others
                                   else ")"))
                continue
            if not holders:
                problems.append(f"{text} ({file} has no node {node})")
                continue
            text = node
        if not holders:
            problems.append(text)
        for f in holders:
            out[f].append(text)
    if problems:
        raise StudioError("recipe", f"--keep-fp32 names what the folder's files do not have: "
                          f"{'; '.join(problems[:5])}.", "Give node names as `inspect` or the "
                          f"graph shows them, FILE:NODE for one file of several (the files: "
                          f"{', '.join(sorted(nodes))}), or --keep-fp32 auto.", exit_code=2)
    return out


def _write_set(kind: str, source: Path, output: Path, files: list[str], keep_io_types: bool,
               optimization: str, keep: dict[str, set[str]]) -> dict[str, str | bool | None]:
    """Every file's variant into a staging folder, each checked, then committed into `output`
    as one set (onnx_studio.engine.file_set: the folder holds the previous set or the new one)."""
    import onnx

    from onnx_studio.engine.file_set import CommitBusy, FolderWrite

    settings: dict[str, str | bool | None] = {}
    try:
        with FolderWrite(output, output="variant", inputs=[source]) as write:
            for name in files:
                target = write.staging / name
                try:
                    settings = write_converted(kind, source / name, target, keep_io_types,
                                               optimization, keep.get(name, set()))
                    onnx.checker.check_model(str(target))
                except StudioError:
                    raise
                except Exception as exc:
                    raise StudioError("export", f"The {kind} conversion of {name} failed: "
                                      f"{one_line(exc)}.", "The details hold the cause; the "
                                      "other kinds may still work.", details=str(exc)) from None
            write.commit()
    except (OSError, CommitBusy) as exc:
        raise StudioError("write", f"Cannot write the variant's files into {output}: "
                          f"{getattr(exc, 'strerror', None) or exc}; free some space or "
                          "choose another output folder.") from None
    return settings


def _set_latency(folder: Path, files: list[str], hf: Any, providers: list[str], runs: int
                 ) -> dict[str, float]:
    """p50/p90 of one run of every file of the set in `folder` on its export inputs."""
    calls = []
    for name, part in zip(files, hf.parts, strict=True):
        session, _ = open_session(folder / name, providers=providers)
        wanted = {i.name for i in session.get_inputs()}
        feed = {k: np.asarray(v.detach().cpu().numpy()) for k, v in part.inputs.items()
                if k in wanted}
        calls.append((session, feed))
    return percentiles(time_calls(lambda: [s.run(None, f) for s, f in calls], runs))


def _facts(kind: str, source: Path, output: Path, files: list[str],
           originals: dict[str, ModelFile], settings: dict[str, str | bool | None], rtol: float,
           atol: float, report: VariantReport, hf: Any, runs: int, recipe: Recipe,
           halves: dict[str, HalfPrecision], overflows: list[Any], many: bool
           ) -> dict[str, Any]:
    """The `variant` facts of the set (onnx_studio.engine.protocol.VariantFacts)."""
    facts: dict[str, Any] = {"kind": kind, "source": str(source), "settings": settings,
                             "rtol": rtol, "atol": atol}
    facts["size_bytes"] = sum(ModelFile.read(output / name).size_bytes for name in files)
    facts["source_size_bytes"] = sum(originals[name].size_bytes for name in files)
    facts["size_ratio"] = round(facts["size_bytes"] / facts["source_size_bytes"], 4)
    try:
        before = _set_latency(source, files, hf, recipe.validate.providers, runs)
        after = _set_latency(output, files, hf, recipe.validate.providers, runs)
        facts.update(latency_ms=after, source_latency_ms=before,
                     latency_ratio=round(after["p50"] / before["p50"], 4)
                     if before["p50"] else None)
    except StudioError as err:  # a variant that does not run has no latency; validation says
        facts["note"] = err.message
    except Exception as exc:
        facts["note"] = f"The set could not be timed: {one_line(exc)}"
    if report.validation is not None:
        diffs = [o.max_abs_diff for o in report.validation.outputs if o.max_abs_diff is not None]
        facts["max_abs_diff"] = max(diffs) if diffs else None
    if halves:
        facts["fp16_overflows"] = [o.to_dict() for o in overflows]
        if any(h.kept or h.auto is not None for h in halves.values()):
            facts["kept_fp32"] = [_qualified(name, node, many)
                                  for name, half in halves.items() for node in half.kept]
    return facts
