"""Qt-free core of ONNX Export Studio, in layers (top to bottom; no import runs upward):

- `cli`, `worker`: the command line and the worker process the window drives
- `pipeline`: export, then validate
- `validation`: ONNX Runtime against eager PyTorch
- `export`: the two exporters, the request check, the atomic ONNX writer
- `source`: model sources, example inputs
- `recipe` (with `toml_writer`, `paths`, `shipped`) and `graph`
- `protocol`, `files`, `dirs`, `errors`, `events`, `report`
"""
