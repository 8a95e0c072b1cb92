"""After the export: compare two ONNX files, profile one in ONNX Runtime, make variants.

- `compare_files(a, b, recipe=None)`: the static diff (inputs, outputs, opsets, operator
  histogram, initializers) with a node matching, and both files run on the same inputs
  (`compare.py`, the matching in `matching.py`).
- `profile_file(path, recipe=None)`: latency after warm-up, ONNX Runtime's own profiler per
  node, operator type and module group, and eager PyTorch on the same inputs (`profile.py`).
- `make_variant(path, recipe, kind, output)`: an ORT-optimized, fp16 or dynamic int8 copy,
  validated against eager PyTorch with a tolerance fit for its precision (`variants.py`;
  each kind's conversion in `conversions.py`, a Hugging Face folder's in `folder_variants.py`).

Feeds without a recipe come from the file's input shapes (`feeds.py`); latency is measured
one way for all three (`timing.py`). The CLI's command bodies are in `commands.py`.
torch, onnx and onnxruntime are imported inside the functions that need them, and this
package imports none of its modules: the CLI's process, which only parses the command, stays
light (tests/test_quality.py).
"""
