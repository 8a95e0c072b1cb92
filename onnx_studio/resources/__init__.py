"""Files that ship with ONNX Export Studio: example recipes (recipes/*.toml) and the model and
extension files they name (models/*.py), installed as package data.

A data package, not code: read it through `onnx_studio.engine.shipped`, never by a path built from a
checkout's layout, and never write into it (it may be a read-only install folder).
"""
