"""The window's log files: what the Log tab shows, kept on disk with rotation.

`log_dir()` is $ONNX_STUDIO_LOG_DIR or platformdirs' user log folder; `attach(session)` writes
every line the session logs to `studio.log` there (1 MB per file, 5 old files kept), so a
crash or a bug report has the last jobs' words after the window is gone.
"""

from __future__ import annotations

import logging
import os
from logging.handlers import RotatingFileHandler
from pathlib import Path

from app.session import ExportSession
from engine.dirs import APP_NAME

__all__ = ["LOG_FILE", "attach", "log_dir", "versions"]

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


def attach(session: ExportSession) -> Path | None:
    """Write the session's log lines to the log file; its path, or None when the folder
    cannot be written (the window works without it)."""
    try:
        logger = _logger()
    except OSError:
        return None
    session.logLine.connect(lambda line: logger.info(line.rstrip()))
    return log_dir() / LOG_FILE


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
