"""`python -m onnx_studio`: the command line, as `onnx-studio` (no arguments: the window)."""

from onnx_studio.app.launcher import main

if __name__ == "__main__":
    raise SystemExit(main())
