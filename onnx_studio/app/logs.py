"""The window's log files: what the Log tab shows, kept on disk with rotation.

`log_dir()` is $ONNX_STUDIO_LOG_DIR or platformdirs' user log folder; `attach(session)` writes
every line the session logs to `studio.log` there (1 MB per file, 5 old files kept), so a
crash or a bug report has the last jobs' words after the window is gone. The file (and the
logging machinery) is opened with the first line, or when its path is asked for: the window's
first paint writes none.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from onnx_studio.engine.dirs import APP_NAME

if TYPE_CHECKING:
    from onnx_studio.app.session import ExportSession

__all__ = ["LOG_FILE", "LogFile", "attach", "log_dir", "versions"]

LOG_FILE = "studio.log"
MAX_BYTES = 1_000_000
BACKUPS = 5


def log_dir() -> Path:
    """$ONNX_STUDIO_LOG_DIR, or the platform's user log folder."""
    if os.environ.get("ONNX_STUDIO_LOG_DIR"):
        return Path(os.environ["ONNX_STUDIO_LOG_DIR"])
    import platformdirs

    return Path(platformdirs.user_log_dir(APP_NAME, appauthor=False))


def _logger() -> logging.Logger:
    from logging.handlers import RotatingFileHandler

    logger = logging.getLogger("onnx_studio.window")
    folder = log_dir()
    target = str(folder / LOG_FILE)
    if not any(isinstance(h, RotatingFileHandler) and h.baseFilename == target
               for h in logger.handlers):
        for handler in list(logger.handlers):  # the log folder moved (tests): the new one
            logger.removeHandler(handler)
            handler.close()
        folder.mkdir(parents=True, exist_ok=True)
        handler = RotatingFileHandler(target, maxBytes=MAX_BYTES, backupCount=BACKUPS,
                                      encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


class LogFile:
    """The log file a session's lines go to, opened when the first one comes (`write`)."""

    def __init__(self) -> None:
        self._logger: logging.Logger | None = None
        self._unwritable = False

    def _open(self) -> logging.Logger | None:
        if self._logger is None and not self._unwritable:
            try:
                self._logger = _logger()
            except OSError:
                self._unwritable = True  # the window works without it
        return self._logger

    def write(self, line: str) -> None:
        logger = self._open()
        if logger is not None:
            logger.info(line.rstrip())

    @property
    def path(self) -> Path | None:
        """The log file; None when its folder cannot be written."""
        return log_dir() / LOG_FILE if self._open() is not None else None


def attach(session: ExportSession) -> LogFile:
    """Write the session's log lines to the log file (opened with the first one)."""
    log = LogFile()
    session.logLine.connect(log.write)
    return log


def about_html(title: str, torch: str | None, log_file: Path | None) -> str:
    """The About box: what the app does, the versions it runs on, where it logs."""
    rows = "".join(f"<tr><td><b>{name}</b></td><td>&nbsp;{version}</td></tr>"
                   for name, version in versions(torch))
    return (f"<h3>{title}</h3>Exports PyTorch models to ONNX and checks them in ONNX "
            f"Runtime.<table>{rows}</table><p>Logs: {log_file or 'not written'}</p>")


def versions(torch: str | None) -> list[tuple[str, str]]:
    """(name, version) of the app and what it runs on; torch as the worker reported it (the
    window never imports torch), onnx and onnxruntime from their installed metadata."""
    from importlib import metadata

    import PySide6
    from PySide6.QtCore import qVersion

    def installed(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    return [("ONNX Export Studio", installed("onnx-export-studio")),
            ("torch", torch or "not known yet (the worker is starting)"),
            ("onnx", installed("onnx")), ("onnxruntime", installed("onnxruntime")),
            ("Qt", qVersion()), ("PySide6", PySide6.__version__)]
