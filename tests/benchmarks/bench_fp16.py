"""fp16 that passes, on a CPU, over the corpus: each model's fp16 variant plainly and with
`--keep-fp32 auto`, as a user runs it (`onnx-studio variant EXPORT --recipe R --kind fp16
[--keep-fp32 auto] -o OUT --json`, a process each): whether its verdict passes (the outputs
against PyTorch within rtol/atol 1e-2 at every trial, greedy generation for the generative
Hugging Face exports, and no value beyond float16's range held in float16), its size against
the float32 export, the nodes kept in float32 and the seconds the command took. Prints a
markdown table, the pass rates (plain and auto, over the rows whose float32 export passes its
own validation) and the median size ratios; asserts nothing.

The rows:
- hand-made: tests/engine/explain_models.py's Stack (a plain MLP), Hot (a Linear whose values
  exceed 65504) and Scaled (a constant above 65504); the shipped tiny CNN; tiny random-weight
  BERT, GPT-2 and Llama (the bare models, no cache) built from their config classes;
- the corpus: every row of tests/corpus/architectures.py (read at run time: a new row appears
  here), saved with save_pretrained and exported as bench_corpus.py exports it (`onnx-studio
  export hf:DIR --validate`, its recipe, through one `onnx-studio batch`): a decoder with its
  cache, an encoder, a seq2seq set of three files, ...; the variant of a folder is every file's
  variant, judged by the folder's validation. A row whose export fails is listed with its cause
  and, where the corpus gives a fix (its `fails.fix` arguments), again with the fix applied.

Every export is validated in float32 first; a row whose float32 export fails its own validation
is listed as such and not judged in fp16 (its variants would fail for the same cause).

    python tests/benchmarks/bench_fp16.py [--only stack,BERT,T5] [--families decoder,hand-made]
        [--workers 1] [--work DIR]

--only: row names (the hand-made ones in lower case, the corpus's as it spells them; case does
not count); --families: hand-made, or the corpus's (decoder, encoder, seq2seq, vision, audio,
multimodal). --work DIR keeps the exports and each row's results there: a second run reuses
them (delete the folder for fresh timings).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from tests.benchmarks.bench_corpus import batch_run, cell, recipe_of  # noqa: E402
from tests.corpus.architectures import ARCHITECTURES  # noqa: E402

TRANSFORMERS = '''
import torch
import transformers


def bert():
    torch.manual_seed(0)
    return transformers.BertModel(transformers.BertConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64)).eval()


def gpt2():
    torch.manual_seed(0)
    return transformers.GPT2Model(transformers.GPT2Config(
        vocab_size=99, n_embd=32, n_layer=2, n_head=2, n_positions=64, use_cache=False)).eval()


def llama():
    torch.manual_seed(0)
    return transformers.LlamaModel(transformers.LlamaConfig(
        vocab_size=99, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        use_cache=False)).eval()
'''

TOKENS = """version = 1
[model]
source = "tiny_transformers.py:{name}"
[[inputs]]
name = "input_ids"
shape = [2, 16]
dtype = "int64"
dynamic = {{ 0 = "batch" }}
[[outputs]]
name = "last_hidden_state"
[export]
output = "{name}.onnx"
exporter = "dynamo"
[validate]
enabled = true
"""

CNN = """version = 1
[model]
source = "{models}/tiny_cnn.py:TinyCNN"
[[inputs]]
name = "x"
shape = [2, 3, 32, 32]
fill = "randn"
dynamic = {{ 0 = "batch" }}
[[outputs]]
name = "logits"
[export]
output = "cnn.onnx"
exporter = "dynamo"
[validate]
enabled = true
"""

HAND_MADE = ("stack", "hot", "scaled", "cnn", "bert", "gpt2", "llama")
HAND_FAMILY = "hand-made"


@dataclass
class Row:
    """One model (one attempt of a corpus row): its float32 export, then its fp16 variants."""

    label: str
    family: str
    recipes: Path
    export: dict[str, Any] = field(default_factory=dict)
    plain: dict[str, Any] | None = None
    auto: dict[str, Any] | None = None


def hand_made_recipe(name: str, folder: Path) -> Path:
    """The recipe of a hand-made model, written into `folder` (validation on)."""
    from tests.engine.explain_models import MODELS, RECIPE, WIDTHS

    path = folder / f"{name}.toml"
    if name in ("stack", "hot", "scaled"):
        cls = name.capitalize()
        (folder / "explain_models.py").write_text(MODELS, encoding="utf-8")
        text = RECIPE.format(cls=cls, width=WIDTHS[cls], name=name) + \
            "[validate]\nenabled = true\n"
    elif name == "cnn":
        text = CNN.format(models=REPO / "onnx_studio" / "resources" / "models")
    else:
        (folder / "tiny_transformers.py").write_text(TRANSFORMERS, encoding="utf-8")
        text = TOKENS.format(name=name)
    path.write_text(text, encoding="utf-8")
    return path.resolve()


def corpus_recipes(names: set[str] | None, families: set[str] | None, folder: Path
                   ) -> list[Row]:
    """Every chosen row: the hand-made models, then each corpus row's attempts (the defaults,
    then its fix), each with the recipe bench_corpus.py exports it with."""
    rows = []
    hand = folder / "hand"
    for made in (hand, folder / "recipes", folder / "exports"):
        made.mkdir(parents=True, exist_ok=True)
    for name in HAND_MADE:
        if _chosen(name, HAND_FAMILY, names, families):
            rows.append(Row(name, HAND_FAMILY, hand_made_recipe(name, hand)))
    for arch in ARCHITECTURES:
        if not _chosen(arch.name, arch.family, names, families):
            continue
        source = arch.build(folder / "models")
        fix = arch.fails.fix if arch.fails else None
        attempts = [list(arch.args)] + ([[*arch.args, *fix]] if fix is not None else [])
        for index, args in enumerate(attempts):
            label = arch.name + (f" ({' '.join(args)})" if args else "")
            stem = f"{arch.slug}_{index}"
            rows.append(Row(label, arch.family, recipe_of(
                ["export", f"hf:{source}", "-o", str(folder / "exports" / stem), "--validate",
                 *args], folder / "recipes" / f"{stem}.toml")))
    return rows


def _chosen(name: str, family: str, names: set[str] | None, families: set[str] | None) -> bool:
    return ((names is None or name.lower() in names)
            and (families is None or family.lower() in families))


def variant(row: Row, auto: bool, folder: Path) -> dict[str, Any]:
    """`onnx-studio variant` of the row's export, its document and the command's seconds."""
    source = Path(row.export["output"])
    suffix = "auto16" if auto else "plain16"
    hf = source.is_dir()
    output = source.with_name(f"{source.name}_{suffix}" if hf
                              else f"{source.stem}_{suffix}.onnx")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "onnx_studio.engine.cli", "variant", str(source), "--recipe",
         str(row.recipes), "--kind", "fp16", "-o", str(output), "--json",
         *(["--keep-fp32", "auto"] if auto else [])],
        capture_output=True, text=True, env=env, cwd=str(folder), check=False)
    seconds = time.perf_counter() - started
    lines = done.stdout.strip().splitlines()
    try:
        doc = json.loads(lines[-1])
    except (IndexError, ValueError):
        doc = {"ok": False, "error": {"kind": "crash", "message": (
            f"exit {done.returncode}, no document: " + done.stderr.strip()[-300:])}}
    return {"doc": doc, "seconds": seconds, "exit": done.returncode}


def cause(doc: dict[str, Any]) -> str:
    """Why a variant's verdict failed, in a few words."""
    facts = doc.get("variant") or {}
    overflows = facts.get("fp16_overflows") or []
    if overflows:
        return f"{len(overflows)} value(s) beyond 65504 in float16 (first {overflows[0]['node']})"
    validation = doc.get("validation") or {}
    failed = [o["name"] for o in validation.get("outputs") or [] if not o.get("passed")]
    if failed:
        worst = max((o.get("max_abs_diff") or 0.0) for o in validation["outputs"]
                    if not o.get("passed"))
        return f"outputs differ: {', '.join(failed[:2])} (max abs diff {worst:.3g})"
    generation = validation.get("generation") or {}
    if generation and not generation.get("passed", True):
        return "generation: " + str(generation.get("message") or "differs")
    error = doc.get("error") or {}
    return f"{error.get('kind', '?')}: {error.get('message', '')}"[:160]


def cached(store: Path, key: str, compute: Any) -> dict[str, Any]:
    """The result under `key` in the JSONL file `store`, computed (and kept) if missing."""
    found: dict[str, Any] = {}
    if store.is_file():
        for line in store.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            found[record["key"]] = record["value"]
    if key in found:
        return dict(found[key])
    value = compute()
    with store.open("a", encoding="utf-8") as out:
        out.write(json.dumps({"key": key, "value": value}) + "\n")
    return dict(value)


def table(rows: list[Row]) -> list[str]:
    header = ["model", "family", "files", "float32", "plain fp16", "size", "auto",
              "kept fp32", "size", "s plain", "s auto", "cause (failed verdicts)"]
    lines = ["| " + " | ".join(header) + " |",
             "| " + " | ".join("---:" if h in ("size", "kept fp32", "s plain", "s auto")
                               else "---" for h in header) + " |"]
    for row in rows:
        doc = row.export
        files = ", ".join(f["name"] for f in doc.get("files") or []) or (
            Path(doc["output"]).name if doc.get("ok") and doc.get("output") else "—")
        if row.plain is None or row.auto is None:
            error = doc.get("error") or {}
            what = ("export fails" if not doc.get("output") or error.get("kind") != "validation"
                    else "fails its validation")
            why = cell(f"{error.get('kind', '?')}: {error.get('message', '')}")[:200]
            lines.append(f"| {row.label} | {row.family} | {files} | {what} | — | — | — | — | — "
                         f"| — | — | {why} |")
            continue
        plain, auto = row.plain["doc"], row.auto["doc"]
        pf, af = plain.get("variant") or {}, auto.get("variant") or {}
        kept = af.get("kept_fp32")
        causes = [f"plain: {cause(plain)}" if not plain["ok"] else "",
                  f"auto: {cause(auto)}" if not auto["ok"] else ""]
        lines.append(
            f"| {row.label} | {row.family} | {files} | pass | "
            f"{'pass' if plain['ok'] else 'FAIL'} | {_ratio(pf)} | "
            f"{'pass' if auto['ok'] else 'FAIL'} | {len(kept) if kept is not None else '—'} | "
            f"{_ratio(af)} | {row.plain['seconds']:.0f} | {row.auto['seconds']:.0f} | "
            f"{cell('; '.join(c for c in causes if c))} |")
    return lines


def _ratio(facts: dict[str, Any]) -> str:
    ratio = facts.get("size_ratio")
    return f"x{ratio:.2f}" if ratio is not None else "—"


def summary(rows: list[Row]) -> list[str]:
    judged = [r for r in rows if r.plain is not None and r.auto is not None]
    out = []
    if judged:
        plain = sum(1 for r in judged if r.plain and r.plain["doc"]["ok"])
        auto = sum(1 for r in judged if r.auto and r.auto["doc"]["ok"])
        out.append(f"pass rate over the {len(judged)} models whose float32 export passes: "
                   f"plain fp16 {plain}/{len(judged)} ({100 * plain / len(judged):.0f}%), "
                   f"--keep-fp32 auto {auto}/{len(judged)} ({100 * auto / len(judged):.0f}%)")
        for name in ("plain", "auto"):
            ratios = [(getattr(r, name)["doc"].get("variant") or {}).get("size_ratio")
                      for r in judged]
            passed = [(getattr(r, name)["doc"].get("variant") or {}).get("size_ratio")
                      for r in judged if getattr(r, name)["doc"]["ok"]]
            known = [x for x in ratios if x is not None]
            good = [x for x in passed if x is not None]
            out.append(f"median size ratio, {name}: x{statistics.median(known):.2f} over all "
                       f"{len(known)}" + (f", x{statistics.median(good):.2f} over the "
                                          f"{len(good)} that pass" if good else ""))
        kept = [len((r.auto["doc"].get("variant") or {}).get("kept_fp32") or [])
                for r in judged if r.auto and r.auto["doc"]["ok"]]
        if kept:
            out.append(f"nodes auto keeps in float32 where it passes: median "
                       f"{statistics.median(kept):g}, at most {max(kept)}")
    skipped = [r.label for r in rows if r.plain is None]
    if skipped:
        out.append(f"not judged in fp16 ({len(skipped)}: the float32 export fails or fails "
                   f"its validation): {', '.join(skipped)}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="row names, comma-separated (default: all)")
    parser.add_argument("--families", help="families, comma-separated: hand-made, decoder, "
                        "encoder, seq2seq, vision, audio, multimodal (default: all)")
    parser.add_argument("--workers", type=int, default=1, help="exports at a time")
    parser.add_argument("--work", help="keep the exports and results in this folder (a second "
                        "run reuses them)")
    args = parser.parse_args()
    names = {n.strip().lower() for n in args.only.split(",")} if args.only else None
    families = ({f.strip().lower() for f in args.families.split(",")} if args.families
                else None)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.work).resolve() if args.work else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        rows = corpus_recipes(names, families, folder)
        if not rows:
            parser.error("no row matches --only/--families")
        print(f"exporting {len(rows)} model(s) in float32 (validated)…", file=sys.stderr,
              flush=True)
        exported = batch_run([r.recipes for r in rows], folder / "report", args.workers,
                             resume=args.work is not None)
        store = folder / "fp16.jsonl"
        for row in rows:
            row.export = exported[row.recipes][1]
            if not row.export.get("ok"):
                print(f"{row.label}: float32 export not ok, not judged", file=sys.stderr,
                      flush=True)
                continue
            row.plain = cached(store, f"{row.label}|plain", lambda r=row: variant(r, False,
                                                                                  folder))
            row.auto = cached(store, f"{row.label}|auto", lambda r=row: variant(r, True,
                                                                                folder))
            print(f"{row.label}: plain {'pass' if row.plain['doc']['ok'] else 'FAIL'}, auto "
                  f"{'pass' if row.auto['doc']['ok'] else 'FAIL'}", file=sys.stderr, flush=True)
    print("\n".join(table(rows)))
    print()
    print("\n".join(summary(rows)))
    print(f"\n{len(rows)} model(s), {time.perf_counter() - started:.0f} s in all.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
