"""The Qt window of ONNX Export Studio. Never imports torch: the worker process does.

`session.ExportSession` holds the state of a window (recipe, results, jobs); `window.MainWindow`
lays out its views: `form` (the recipe's fields, the export bar) and `tabs` (Summary, Warnings,
`validation`, `graph`, Python, Log, from `results` and those packages). `jobs` runs the worker
processes (`worker_client`). docs/architecture.md is the map.
"""
