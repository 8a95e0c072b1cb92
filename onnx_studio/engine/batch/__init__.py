"""A zoo of recipes in one run: `onnx-studio batch`, here or on a Ray cluster.

- `read_items(texts, list_file, report_dir)` (`items.py`): the items (recipe files, `hf:` and
  `hf-config:` folders) as `ItemJob`s, each with the fingerprint --resume compares.
- `run_batch(jobs, report_dir, options)` (`runner.py`): runs them on an executor (`local.py`:
  N worker processes on this machine; `ray_executor.py`: Ray tasks), appends each record to
  REPORT_DIR/results.jsonl as it finishes (`records.py`), writes REPORT_DIR/report.html
  (`report_html.py`) and returns the `BatchSummary`.
- `run_item(job, ...)` (`item_run.py`): one item in a worker process of its own (the CLI's
  job client), whatever it does to that process ending in its record.

The command's flags and text output are in `command.py`. Nothing here imports torch: the
batch's own process only waits on its workers.
"""

from onnx_studio.engine.batch.item_run import run_item
from onnx_studio.engine.batch.items import ItemJob, fingerprint, read_items
from onnx_studio.engine.batch.runner import EXECUTORS, BatchOptions, run_batch

__all__ = ["EXECUTORS", "BatchOptions", "ItemJob", "fingerprint", "read_items", "run_batch",
           "run_item"]
