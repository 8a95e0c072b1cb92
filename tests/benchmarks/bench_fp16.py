"""fp16 that passes, on a CPU: over a small corpus of real dynamo exports, the fp16 variant
plainly and with `--keep-fp32 auto` — whether its verdict passes (outputs against PyTorch
within rtol/atol 1e-2, and no value beyond float16's range held in float16), its size
against the float32 file, the nodes kept and the seconds it took. Prints a markdown table
and the pass rates; asserts nothing.

The corpus: tests/engine/explain_models.py's Stack (a plain MLP), Hot (a Linear whose values
exceed 65504) and Scaled (a constant above 65504); the shipped tiny CNN; tiny random-weight
BERT, GPT-2 and Llama built from their transformers config classes.

    cd /work/main && python tests/benchmarks/bench_fp16.py [--only bert,gpt2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

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
"""

CORPUS = ("stack", "hot", "scaled", "cnn", "bert", "gpt2", "llama")


def corpus(folder: Path, names: list[str]) -> list[tuple[str, Path, Path]]:
    """(name, the .onnx file, its recipe) of each model, exported into `folder`."""
    from engine import recipe as recipes
    from engine.pipeline import export
    from tests.engine.explain_models import exported

    found = []
    for name in names:
        if name in ("stack", "hot", "scaled"):
            onnx_path, recipe_path = exported(folder, name.capitalize())
        else:
            (folder / "tiny_transformers.py").write_text(TRANSFORMERS)
            text = (CNN.format(models=REPO / "resources" / "models") if name == "cnn"
                    else TOKENS.format(name=name))
            recipe_path = folder / f"{name}.toml"
            recipe_path.write_text(text)
            recipe = recipes.load(recipe_path)
            report = export(recipe, validate=False)
            assert report.ok, report.error
            onnx_path = recipe.output_path
        found.append((name, onnx_path, recipe_path))
    return found


def run(source: Path, recipe_path: Path, keep: str | None) -> dict[str, object]:
    from engine import recipe as recipes
    from engine.analysis.variants import make_variant

    started = time.perf_counter()
    suffix = "auto" if keep else "plain"
    report = make_variant(source, recipes.load(recipe_path), "fp16",
                          source.with_name(f"{source.stem}_{suffix}16.onnx"), runs=3,
                          keep_fp32=keep)
    facts = report.variant
    assert facts is not None
    return {"ok": report.ok, "size": facts.size_ratio, "kept": facts.kept_fp32,
            "overflows": len(facts.fp16_overflows or []), "error": facts.max_abs_diff,
            "seconds": time.perf_counter() - started}


def main() -> int:
    import onnx

    parser = argparse.ArgumentParser()
    parser.add_argument("--only", help="models to run, e.g. bert,gpt2 (default: all)")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(CORPUS)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, source, recipe_path in corpus(Path(tmp), names):
            nodes = len(onnx.load(str(source), load_external_data=False).graph.node)
            plain = run(source, recipe_path, None)
            auto = run(source, recipe_path, "auto")
            rows.append((name, nodes, plain, auto))
            print(f"{name}: plain {plain}, auto {auto}", file=sys.stderr)
    print("| model | nodes | plain fp16 | size | overflows | auto | kept fp32 | size | "
          "s plain | s auto |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, nodes, plain, auto in rows:
        kept = auto["kept"] or []
        assert isinstance(kept, list)
        print(f"| {name} | {nodes} | {'pass' if plain['ok'] else 'FAIL'} | "
              f"x{plain['size']:.2f} | {plain['overflows']} | "
              f"{'pass' if auto['ok'] else 'FAIL'} | {len(kept)} | x{auto['size']:.2f} | "
              f"{plain['seconds']:.1f} | {auto['seconds']:.1f} |")
    total = len(rows)
    print(f"\npass rate: plain {sum(1 for r in rows if r[2]['ok'])}/{total}, "
          f"auto {sum(1 for r in rows if r[3]['ok'])}/{total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
