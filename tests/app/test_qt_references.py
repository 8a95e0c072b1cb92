"""PySide6 6.12.0 drops a reference to None on every void call (and to True on every emit)
on Python 3.11, which aborts the app after a few thousand calls; pyproject excludes it.
This test fails, rather than aborting later, if such a build is installed again."""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, Signal


class _Emitter(QObject):
    fired = Signal()


def test_qt_calls_keep_references_to_none_and_true() -> None:
    emitter = _Emitter()
    start_none, start_true = sys.getrefcount(None), sys.getrefcount(True)
    for _ in range(200):
        emitter.setObjectName("probe")
        emitter.fired.emit()
    assert sys.getrefcount(None) - start_none > -100
    assert sys.getrefcount(True) - start_true > -100
