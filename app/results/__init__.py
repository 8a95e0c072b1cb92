"""The result tabs that show what a job produced: Summary, Warnings, Python and Log.

Each is a view of the session: the Summary shows the last export (or why it failed), the
Warnings tab the session's warnings (a row opens its source line in `SourceViewer`), the Python
tab the recipe as a script, the Log what the worker and the session said. `text_label` and
`mono` are shared with the Validation tab.
"""

from app.results.log import LogView
from app.results.python import PythonView
from app.results.summary import SummaryView, human_size, mono, text_label
from app.results.warnings import SourceViewer, WarningsView, resolve_source, split_source

__all__ = ["LogView", "PythonView", "SourceViewer", "SummaryView", "WarningsView", "human_size",
           "mono", "resolve_source", "split_source", "text_label"]
