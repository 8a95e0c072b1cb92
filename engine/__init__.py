"""Qt-free core of ONNX Export Studio: recipes, model sources, export, validation, graphs, CLI."""
