"""`python -m onnx_studio.app` opens the window (as `onnx-studio` alone does)."""

from onnx_studio.app.main import main

# importing onnx_studio.app.__main__ (tools walking the package) opens nothing
if __name__ == "__main__":
    raise SystemExit(main())
