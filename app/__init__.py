"""The Qt window of ONNX Export Studio. Never imports torch: the worker process does."""
