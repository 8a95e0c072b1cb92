"""Nothing half-written: an ONNX file (and its external data) appears only when complete.

The exporter writes into a staging folder beside the target (onnx_studio.engine.file_set); the
result is checked with `onnx.checker` and then committed into place, data files first, so a
failed or cancelled export leaves the previous file untouched.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.file_set import CommitBusy, FolderWrite, previous_set
from onnx_studio.engine.files import FOLDER_MARKER, existing_mode

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
    """Context manager: export into `temp_path`, call `finish()`, and the file is in place.

    The file and its data files are one output of onnx_studio.engine.file_set (`file:NAME` in
    the folder's manifest): staged beside the target, committed as one set. The target itself
    may replace any file of that name (the user named it); a data file never replaces a file
    the studio did not write (it takes a free name instead), and nothing replaces one of the
    command's `inputs`.
    """

    def __init__(self, target: Path, inputs: Iterable[Path] = ()) -> None:
        self.target = target
        self.total_bytes = 0
        self.external_data_file: str | None = None
        self._write = FolderWrite(target.parent, output=f"file:{target.name}",
                                  whole_folder=False, replaceable=[target.name], inputs=inputs,
                                  what="The export")

    @property
    def temp_path(self) -> Path:
        """Where the exporter writes the .onnx file (its data files go beside it)."""
        return self._write.staging / self.target.name

    def __enter__(self) -> AtomicOnnxWrite:
        self._write.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._write.__exit__(exc_type, exc, tb)

    def finish(self, external_data: str = "auto") -> None:
        """Apply the external-data choice, check the model, and commit it into place."""
        import onnx

        path = self.temp_path
        if not path.is_file():
            raise StudioError("export", "The exporter finished without writing a file.")
        data_files = self._data_files()
        if external_data == "always" and not _holds_external_data(path):
            self._resave(external=True)
        elif external_data == "never" and data_files:
            if sum(p.stat().st_size for p in data_files) > INLINE_LIMIT:
                raise StudioError("write", "The weights are larger than 2 GB and cannot be "
                                  "stored inside the .onnx file; set external_data = \"auto\".")
            self._resave(external=False)
        for unread in set(self._data_files()) - set(self._read_data_files()):
            unread.unlink()  # an empty or stray file the exporter left: ours, in staging
        try:
            onnx.checker.check_model(str(path))
        except Exception as exc:  # ValidationError, or a protobuf/IO error reading it back
            raise StudioError("export", f"The exported file fails onnx.checker: "
                              f"{str(exc).strip().splitlines()[0] if str(exc).strip() else exc}.",
                              "This is an exporter bug or a custom operator without a schema; "
                              "see the details.", details=str(exc)) from None
        data_files = self._rename_data_away_from(self._taken())
        self._keep_data_mode(data_files)
        self.total_bytes = path.stat().st_size + sum(p.stat().st_size for p in data_files)
        try:
            self._write.commit()
        except CommitBusy as exc:
            raise StudioError("write", f"Cannot write {self.target}: {exc}.") from None
        except OSError as exc:
            raise StudioError("write", f"Cannot move the new file into {self.target}: "
                              f"{exc.strerror or exc}.") from None
        self.external_data_file = data_files[0].name if data_files else None

    def _keep_data_mode(self, data_files: list[Path]) -> None:
        """New data under a new name takes the mode of the data it replaces (a private 0640
        stays private under whichever name), else the .onnx file's; the commit gives a file
        that replaces its namesake that file's mode."""
        folder = self.target.parent
        modes = [m for m in (existing_mode(folder / n) for n in sorted(referenced_data(
            self.target))) if m is not None] + [m for m in [existing_mode(self.target)]
                                                 if m is not None]
        for data in data_files:
            if modes and existing_mode(folder / data.name) is None:
                os.chmod(data, modes[0])

    def _taken(self) -> set[str]:
        """Names beside the target a data file may not take: files the studio did not write
        for this output (another file's data, a user's file), and the data the current target
        reads (so that until the new .onnx replaces it, the old one reads its own data)."""
        ours = set(previous_set(self.target.parent, f"file:{self.target.name}"))
        folder = self.target.parent
        present = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
        return (present - ours) | referenced_data(self.target)

    def _rename_data_away_from(self, taken: set[str]) -> list[Path]:
        """Give the new data files names no file the studio did not write has; the new data
        files.

        The exporter names its data `<file>.onnx.data`; when a file of that name is not ours
        to replace, the new data becomes `<file>.onnx.1.data` (or the next free number).
        """
        import onnx

        path = self.temp_path
        data_files = self._data_files()
        clashes = [p for p in data_files if p.name in taken]
        if not clashes:
            return data_files
        used = taken | {p.name for p in data_files}
        renames = {}
        for data in clashes:
            number = 1
            while f"{self.target.name}.{number}.data" in used:
                number += 1
            new_name = f"{self.target.name}.{number}.data"
            used.add(new_name)
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
        """The files the exporter wrote beside the .onnx file in the staging folder."""
        return [p for p in self.temp_path.parent.iterdir()
                if p != self.temp_path and p.name != FOLDER_MARKER]

    def _read_data_files(self) -> list[Path]:
        """The staged data files the staged .onnx file reads."""
        return [self.temp_path.parent / n for n in referenced_data(self.temp_path)]

    def _resave(self, external: bool) -> None:
        import onnx
        from onnx.external_data_helper import convert_model_to_external_data

        path = self.temp_path
        model = onnx.load(str(path), load_external_data=True)
        for p in [path, *self._data_files()]:
            p.unlink()
        if external:
            # every tensor, however small: "always" means the weights are in the data file.
            # Marked here, not with save_model(save_as_external_data=True): onnx checks that
            # location against the current directory, so re-exporting from the output folder
            # would fail on the previous export's data file
            convert_model_to_external_data(model, all_tensors_to_one_file=True,
                                           location=f"{path.name}.data", size_threshold=0)
        onnx.save_model(model, str(path))


def _holds_external_data(path: Path) -> bool:
    """Does the .onnx file at `path` keep any tensor in a data file?"""
    import onnx

    return uses_external_data(onnx.load(str(path), load_external_data=False))


def with_data_files(path: Path) -> list[Path]:
    """The .onnx file at `path` and the external data files it reads (what a command that
    reads it must never write over)."""
    return [path, *(path.parent / name for name in sorted(referenced_data(path)))]


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

