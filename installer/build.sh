#!/usr/bin/env bash
# Build the frozen app into dist/onnx-studio/ and smoke-test it.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install pyinstaller
python -m PyInstaller --noconfirm --clean --distpath dist --workpath build/pyinstaller \
    installer/onnx-studio.spec
python installer/smoke_test.py dist/onnx-studio/onnx-studio
