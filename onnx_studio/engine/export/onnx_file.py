"""Nothing half-written: an ONNX file (and its external data) appears only when complete.

The exporter writes into a hidden temporary folder beside the target; the result is checked
with `onnx.checker` and then renamed into place, data files first, so a failed or cancelled
export leaves the previous file untouched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from onnx_studio.engine import process_tree
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.files import (
    COMMIT,
    FOLDER_MARKER,
    durable,
    existing_mode,
    new_temp_folder,
    remove_abandoned,
    sync_folder,
)

INLINE_LIMIT = 2**31 - 2**20  # protobuf's 2 GB message limit, with room for the graph

# `external_data = "auto"` keeps the weights inside the .onnx file (one file to ship) up to
# this size. Above it they go to a data file beside it: writing an inline model serialises the
# whole protobuf in memory (measured: about 3.2x the weights' size at peak, against 1.3x for
# external data, and every later read of the file parses the weights again), while ONNX
# Runtime reads external data straight from disk.
AUTO_EXTERNAL_BYTES = 512 * 2**20
# Peak memory of an inline write as a multiple of the weights (measured with bench_large.py);
# "auto" also picks external data when that much memory is not available.
INLINE_WRITE_FACTOR = 3.5


def wants_external_data(choice: str, weight_bytes: int,
                        available_bytes: int | None = None) -> bool | None:
    """Should the exporter write the weights as external data? True: yes; None: let the
    exporter decide by its own limit (2 GB), for "never" (refused afterwards when it had to)
    and for an "auto" that keeps a small model in one file."""
    if choice == "always":
        return True
    if choice == "auto":
        if weight_bytes >= AUTO_EXTERNAL_BYTES:
            return True
        if available_bytes is None:
            available_bytes = available_memory()
        if available_bytes is not None and weight_bytes * INLINE_WRITE_FACTOR > available_bytes:
            return True
    return None


def available_memory() -> int | None:
    """Bytes of memory this machine can still give (None when psutil cannot say)."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # psutil missing or unsupported here: no memory rule
        return None


@contextlib.contextmanager
def write_progress(folder: Path, expected_bytes: int, progress: Callable[[float, str], None],
                   interval: float = 0.25) -> Iterator[None]:
    """Report how far the files written into `folder` have come towards `expected_bytes`
    while the body runs (the exporter writes its weights in one call that says nothing)."""
    if expected_bytes < 64 * 2**20:  # a write too short to watch
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(interval):
            try:
                written = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
            except OSError:  # a file renamed or removed under the scan: ask again
                continue
            progress(min(written / expected_bytes, 1.0),
                     f"Writing the weights ({written / 2**30:.1f} of "
                     f"{expected_bytes / 2**30:.1f} GB)")

    watcher = threading.Thread(target=watch, name="write-progress", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def check_output_path(path: Path) -> Path:
    """Return the absolute target path, or raise a `write` error (exit status 2: the request is
    wrong) saying what to change: an .onnx name, not a folder, in a folder this process can
    create files in (the nearest existing folder, when the rest is still to be created).

    Writability is tried, not read from permission bits: root passes every permission check,
    yet cannot create files in /proc or on a read-only mount.
    """
    path = Path(os.path.abspath(path))
    if path.is_dir():
        raise StudioError("write", f"The output {path} is a folder; name an .onnx file in it.",
                          exit_code=2)
    if path.suffix.lower() != ".onnx":
        named = path.with_name(f"{path.stem or 'model'}.onnx")
        raise StudioError("write", f"The output {path.name} does not end in .onnx; name the "
                          f"file {named.name}.", f"Write the output as {named}.", exit_code=2)
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise StudioError(
                    "write", f"Cannot write {path}: {parent} is a file, not a folder; "
                    "choose another output path.", exit_code=2)
            check_writable(parent)
            break
    return path


def check_writable(folder: Path) -> None:
    """Create (and at once remove) a nameless file in `folder`; a `write` error if it fails."""
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StudioError("write", f"Cannot write into {folder} (permission denied); "
                          "choose a folder you can write to.", exit_code=2)
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise StudioError("write", f"Cannot create files in {folder} ({reason}); choose a "
                          "folder you can write to.", exit_code=2) from None


class AtomicOnnxWrite:
    """Context manager: export into `temp_path`, call `finish()`, and the file is in place."""

    def __init__(self, target: Path) -> None:
        self.target = target
        self.temp_dir: Path | None = None
        self.total_bytes = 0
        self.external_data_file: str | None = None

    @property
    def temp_path(self) -> Path:
        assert self.temp_dir is not None, "use AtomicOnnxWrite as a context manager"
        return self.temp_dir / self.target.name

    def __enter__(self) -> AtomicOnnxWrite:
        try:
            self.target.parent.mkdir(parents=True, exist_ok=True)
            remove_abandoned(self.target.parent, process_tree.alive, name=self.target.name)
            # the pid in the name lets a later export tell an abandoned folder (its worker was
            # killed by Cancel) from one that another live process is still writing
            self.temp_dir = new_temp_folder(self.target.parent, self.target.name)
        except OSError as exc:
            raise StudioError("write", f"Cannot create files in {self.target.parent}: "
                              f"{exc.strerror or exc}; choose another output folder.") from None
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def finish(self, external_data: str = "auto") -> None:
        """Apply the external-data choice, check the model, and rename everything into place."""
        import onnx

        path = self.temp_path
        if not path.is_file():
            raise StudioError("export", "The exporter finished without writing a file.")
        data_files = self._data_files()
        if external_data == "always" and not data_files:
            self._resave(external=True)
        elif external_data == "never" and data_files:
            if sum(p.stat().st_size for p in data_files) > INLINE_LIMIT:
                raise StudioError("write", "The weights are larger than 2 GB and cannot be "
                                  "stored inside the .onnx file; set external_data = \"auto\".")
            self._resave(external=False)
        try:
            onnx.checker.check_model(str(path))
        except Exception as exc:  # ValidationError, or a protobuf/IO error reading it back
            raise StudioError("export", f"The exported file fails onnx.checker: "
                              f"{str(exc).strip().splitlines()[0] if str(exc).strip() else exc}.",
                              "This is an exporter bug or a custom operator without a schema; "
                              "see the details.", details=str(exc)) from None
        data_files = self._rename_data_away_from(referenced_data(self.target))
        self.total_bytes = path.stat().st_size + sum(p.stat().st_size for p in data_files)
        previous = referenced_data(self.target)
        # an overwritten file keeps its owner's choice of mode (a private 0600 model stays
        # private); new files keep the mode the umask gave them when the exporter wrote them
        onnx_mode = existing_mode(self.target)
        # the commit point: a cancel lands before it (the previous file stays) or after the
        # renames (the client has been told the file is committed), never between them
        with COMMIT.committing(self.target):
            self._rename_into_place(path, data_files, previous, onnx_mode)

    def _rename_into_place(self, path: Path, data_files: list[Path], previous: set[str],
                           onnx_mode: int | None) -> None:
        try:
            # data first, under names the old .onnx does not use, then the .onnx: a kill at any
            # step leaves the old pair or the new pair, never a file reading another's weights
            # the data keeps the mode of the data it replaces (under whichever name)
            old_data_modes = [m for m in (existing_mode(self.target.parent / n)
                                          for n in sorted(previous)) if m is not None]
            for data in data_files:
                final = self.target.parent / data.name
                mode = existing_mode(final)
                if mode is None:
                    mode = old_data_modes[0] if old_data_modes else onnx_mode
                durable(data, mode)
                os.replace(data, final)
            durable(path, onnx_mode)
            os.replace(path, self.target)
        except OSError as exc:
            raise StudioError("write", f"Cannot move the new file into {self.target}: "
                              f"{exc.strerror or exc}.") from None
        sync_folder(self.target.parent)
        self.external_data_file = data_files[0].name if data_files else None
        for name in previous - {p.name for p in data_files}:
            # the previous export's weights, now read by nothing
            (self.target.parent / name).unlink(missing_ok=True)

    def _rename_data_away_from(self, taken: set[str]) -> list[Path]:
        """Give the new data files names the current target does not read; the new data files.

        The exporter names its data `<file>.onnx.data`; when the file being replaced reads that
        name, the new data becomes `<file>.onnx.1.data` (and back again the next time).
        """
        import onnx

        path = self.temp_path
        data_files = self._data_files()
        clashes = [p for p in data_files if p.name in taken]
        if not clashes:
            return data_files
        names = [f"{self.target.name}.data", f"{self.target.name}.1.data"]
        free = [n for n in names if n not in taken]
        renames = {}
        for data in clashes:
            new_name = free.pop(0) if free else f"{self.target.name}.{os.getpid()}.data"
            renames[data.name] = new_name
            os.replace(data, data.with_name(new_name))
        model = onnx.load(str(path), load_external_data=False)
        for tensor in _tensors(model.graph):
            for entry in tensor.external_data:
                if entry.key == "location" and entry.value in renames:
                    entry.value = renames[entry.value]
        onnx.save_model(model, str(path))
        return self._data_files()

    def _data_files(self) -> list[Path]:
        """The files the exporter wrote beside the .onnx file in the temporary folder."""
        return [p for p in self.temp_path.parent.iterdir()
                if p != self.temp_path and p.name != FOLDER_MARKER]

    def _resave(self, external: bool) -> None:
        import onnx
        from onnx.external_data_helper import set_external_data

        path = self.temp_path
        model = onnx.load(str(path), load_external_data=True)
        for p in [path, *self._data_files()]:
            p.unlink()
        if external:
            # marked here, not with save_model(save_as_external_data=True): onnx checks that
            # location against the current directory, so re-exporting from the output folder
            # would fail on the previous export's data file
            for tensor in _tensors(model.graph):
                if tensor.HasField("raw_data"):
                    set_external_data(tensor, f"{path.name}.data")
        onnx.save_model(model, str(path))

def referenced_data(path: Path) -> set[str]:
    """The external data files the ONNX file at `path` reads (empty when it has none)."""
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # no file, or not ONNX: it reads nothing we could break
        return set()
    return {entry.value for tensor in _tensors(model.graph) for entry in tensor.external_data
            if entry.key == "location"}


def uses_external_data(model: Any) -> bool:
    """Does this ModelProto (read without its data) keep a tensor in an external file?"""
    return any(tensor.external_data for tensor in _tensors(model.graph))


def _tensors(graph: Any) -> Iterator[Any]:
    """Every TensorProto of a graph and its subgraphs (initializers and tensor attributes)."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("g"):
                yield from _tensors(attr.g)
            for sub in attr.graphs:
                yield from _tensors(sub)

