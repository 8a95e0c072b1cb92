"""Can Qt open a window here? Checked before Qt is imported, so a first run explains itself.

On Linux, Qt's window-system plugins are shared libraries that PySide6 ships, but they link
against system libraries it does not ship (the X11/xcb helper libraries above all). When one is
missing, or when there is no display at all, Qt prints "could not load the Qt platform plugin
xcb" and aborts the process. `check()` finds that out first and `ensure_usable()` prints what
is missing, the one command that installs it (Debian/Ubuntu and Fedora), and the offscreen
alternative, then the caller exits with status 2.

How a library is found without running `ldd`: a small ELF reader (`read_elf`) takes each
binary's DT_NEEDED names, RUNPATH/RPATH (with $ORIGIN) from its dynamic section, and every name
is looked up the way the dynamic linker does it: RPATH (without RUNPATH), LD_LIBRARY_PATH,
RUNPATH, /etc/ld.so.cache, then the default folders, accepting only a file of the same ELF
class and machine. What resolves inside PySide6's Qt folder is read in turn (libqxcb.so ->
libQt6XcbQpa.so.6 -> libQt6Gui.so.6 ...); a system library found is not (its package manager
installed what it needs), which keeps the check at 10-40 ms.
A name the reader cannot find is then tried with `dlopen` (ctypes) before it is reported:
the window's process is the one that will load the plugin, so this catches whatever the reader
does not model (an executable's RPATH, hardware-capability folders); it only ever loads a
library the reader thought missing. With explicit `search_dirs` (tests) only those folders
and the binaries' own RUNPATH/RPATH count, and nothing is loaded.

Nothing here imports Qt (PySide6 is located with `importlib.util.find_spec`, which does not
run it), so `onnx-studio export` stays as fast as the engine alone.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import struct
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, TextIO

EXIT_STATUS = 2  # the request cannot be served here; the same status as a wrong request
LD_CACHE = "/etc/ld.so.cache"

# The system libraries PySide6's Qt links against, by the platform that needs them, in the
# order the install command lists them. Qt itself (libQt6*.so.6) ships inside the wheel.
XCB_LIBRARIES = (
    "libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-keysyms.so.1", "libxcb-image.so.0",
    "libxcb-render-util.so.0", "libxkbcommon-x11.so.0", "libxcb-xkb.so.1", "libxcb-shape.so.0",
    "libxcb-randr.so.0", "libxcb-render.so.0", "libxcb-shm.so.0", "libxcb-sync.so.1",
    "libxcb-xfixes.so.0", "libxcb-util.so.1", "libxcb.so.1", "libX11-xcb.so.1",
)
WAYLAND_LIBRARIES = ("libwayland-client.so.0", "libwayland-cursor.so.0", "libwayland-egl.so.1")
GUI_LIBRARIES = (  # QtGui and QtWidgets themselves, whatever the platform plugin
    "libX11.so.6", "libxkbcommon.so.0", "libGL.so.1", "libEGL.so.1", "libfontconfig.so.1",
    "libfreetype.so.6", "libglib-2.0.so.0", "libdbus-1.so.3",
)

# soname -> (Debian/Ubuntu package, Fedora package)
PACKAGES: dict[str, tuple[str, str]] = {
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor"),
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image"),
    "libxcb-render-util.so.0": ("libxcb-render-util0", "xcb-util-renderutil"),
    "libxcb-util.so.1": ("libxcb-util1", "xcb-util"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon"),
    "libxcb-xkb.so.1": ("libxcb-xkb1", "libxcb"),
    "libxcb-shape.so.0": ("libxcb-shape0", "libxcb"),
    "libxcb-randr.so.0": ("libxcb-randr0", "libxcb"),
    "libxcb-render.so.0": ("libxcb-render0", "libxcb"),
    "libxcb-shm.so.0": ("libxcb-shm0", "libxcb"),
    "libxcb-sync.so.1": ("libxcb-sync1", "libxcb"),
    "libxcb-xfixes.so.0": ("libxcb-xfixes0", "libxcb"),
    "libxcb-glx.so.0": ("libxcb-glx0", "libxcb"),
    "libxcb.so.1": ("libxcb1", "libxcb"),
    "libX11-xcb.so.1": ("libx11-xcb1", "libX11-xcb"),
    "libX11.so.6": ("libx11-6", "libX11"),
    "libGL.so.1": ("libgl1", "libglvnd-glx"),
    "libGLX.so.0": ("libglx0", "libglvnd-glx"),
    "libGLdispatch.so.0": ("libglvnd0", "libglvnd"),
    "libEGL.so.1": ("libegl1", "libglvnd-egl"),
    "libOpenGL.so.0": ("libopengl0", "libglvnd-opengl"),
    "libfontconfig.so.1": ("libfontconfig1", "fontconfig"),
    "libfreetype.so.6": ("libfreetype6", "freetype"),
    "libglib-2.0.so.0": ("libglib2.0-0", "glib2"),
    "libgthread-2.0.so.0": ("libglib2.0-0", "glib2"),
    "libdbus-1.so.3": ("libdbus-1-3", "dbus-libs"),
    "libwayland-client.so.0": ("libwayland-client0", "libwayland-client"),
    "libwayland-cursor.so.0": ("libwayland-cursor0", "libwayland-cursor"),
    "libwayland-egl.so.1": ("libwayland-egl1", "libwayland-egl"),
    "libzstd.so.1": ("libzstd1", "libzstd"),
    "libstdc++.so.6": ("libstdc++6", "libstdc++"),
    "libgcc_s.so.1": ("libgcc-s1", "libgcc"),
}

# ELF constants (the System V gABI)
_PT_LOAD, _PT_DYNAMIC = 1, 2
_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_STRSZ, _DT_RPATH, _DT_RUNPATH = 0, 1, 5, 10, 15, 29


# ------------------------------------------------------------------------------ ELF reader


@dataclass(frozen=True)
class ElfInfo:
    """What the dynamic linker reads from one shared object."""

    path: Path
    kind: tuple[int, int, int]  # (ELF class, byte order, machine): a library must match
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]


def elf_kind(path: Path) -> tuple[int, int, int] | None:
    """(class, byte order, machine) of an ELF file, or None when `path` is not one."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(20)
    except OSError:
        return None
    if len(head) < 20 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
        return None
    order = "<" if head[5] == 1 else ">"
    (machine,) = struct.unpack_from(order + "H", head, 18)
    return head[4], head[5], machine


def read_elf(path: Path) -> ElfInfo | None:
    """The dynamic section of the shared object at `path`; None when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            return _read_elf(fh, path)
    except (OSError, struct.error, ValueError, UnicodeDecodeError):
        return None


def _read_elf(fh: BinaryIO, path: Path) -> ElfInfo | None:
    ident = fh.read(16)
    if len(ident) < 16 or ident[:4] != b"\x7fELF" or ident[4] not in (1, 2):
        return None
    wide, order = ident[4] == 2, "<" if ident[5] == 1 else ">"
    header = fh.read(48 if wide else 36)
    fields = struct.unpack(order + ("HHIQQQIHHHHHH" if wide else "HHIIIIIHHHHHH"), header)
    machine, phoff, phentsize, phnum = fields[1], fields[4], fields[8], fields[9]
    fh.seek(phoff)
    table = fh.read(phentsize * phnum)
    loads: list[tuple[int, int, int]] = []  # (vaddr, filesz, offset)
    dynamic: tuple[int, int] | None = None  # (offset, filesz)
    for i in range(phnum):
        if wide:
            p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(
                order + "IIQQQQ", table, i * phentsize)
        else:
            p_type, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(
                order + "IIIII", table, i * phentsize)
        if p_type == _PT_LOAD:
            loads.append((p_vaddr, p_filesz, p_offset))
        elif p_type == _PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
    kind = (ident[4], ident[5], machine)
    if dynamic is None:  # a static binary: needs nothing
        return ElfInfo(path, kind, (), (), ())
    fh.seek(dynamic[0])
    raw = fh.read(dynamic[1])
    entry = struct.Struct(order + ("qQ" if wide else "iI"))
    tags: list[tuple[int, int]] = []
    for (tag, value) in entry.iter_unpack(raw[: len(raw) - len(raw) % entry.size]):
        if tag == _DT_NULL:
            break
        tags.append((tag, value))
    strtab = next((v for t, v in tags if t == _DT_STRTAB), None)
    strsz = next((v for t, v in tags if t == _DT_STRSZ), 0)
    if strtab is None:
        return ElfInfo(path, kind, (), (), ())
    offset = next((off + strtab - va for va, size, off in loads if va <= strtab < va + size),
                  strtab)
    fh.seek(offset)
    strings = fh.read(strsz)

    def text(at: int) -> str:
        end = strings.index(b"\0", at)
        return strings[at:end].decode("utf-8")

    def paths(tag: int) -> tuple[str, ...]:
        return tuple(p for t, v in tags if t == tag for p in text(v).split(":") if p)

    needed = tuple(text(v) for t, v in tags if t == _DT_NEEDED)
    return ElfInfo(path, kind, needed, paths(_DT_RPATH), paths(_DT_RUNPATH))


# ------------------------------------------------------------------------ library search


def read_ld_cache(path: Path = Path(LD_CACHE)) -> dict[str, list[str]]:
    """soname -> paths, from glibc's cache (the format `ldconfig` writes since glibc 2.2)."""
    try:
        data = path.read_bytes()
    except OSError:
        return {}
    start = data.find(b"glibc-ld.so.cache1.1")  # 0, or after the old-format table
    found: dict[str, list[str]] = {}
    if start < 0:
        return found
    try:
        count = struct.unpack_from("=I", data, start + 20)[0]
        for i in range(count):
            _, key, value = struct.unpack_from("=iII", data, start + 48 + 24 * i)
            name = data[start + key: data.index(b"\0", start + key)].decode()
            target = data[start + value: data.index(b"\0", start + value)].decode()
            found.setdefault(name, []).append(target)
    except (struct.error, ValueError, UnicodeDecodeError):
        pass
    return found


def _default_dirs() -> list[str]:
    """The dynamic linker's built-in folders (after the cache), Debian's multiarch ones too."""
    import sysconfig

    arch = sysconfig.get_config_var("MULTIARCH") or ""
    found = [f"/lib/{arch}", f"/usr/lib/{arch}"] if arch else []
    if sys.maxsize > 2**32:
        found += ["/lib64", "/usr/lib64"]
    return [*found, "/lib", "/usr/lib"]


def _loaded_libraries() -> set[str]:
    """Names of the shared objects this process has already loaded (Linux /proc)."""
    try:
        maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    return {line.rsplit("/", 1)[-1] for line in maps.splitlines() if ".so" in line}


@dataclass
class Missing:
    """A library that does not resolve, and the binary that needs it."""

    name: str
    needed_by: str


@dataclass
class Resolver:
    """Finds shared libraries as the dynamic linker would.

    `search_dirs` None means the system's search (LD_LIBRARY_PATH from `env`, the ld.so
    cache, the default folders, libraries already loaded, and a dlopen before a name is called
    missing); a list means only those folders (plus each binary's own RUNPATH/RPATH).
    """

    search_dirs: Sequence[Path] | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    # every file the answer rests on (the binaries read, the libraries found, the ld.so
    # cache), and "dlopen:NAME" for a name only dlopen found: onnx_studio.app.platform_memo's key
    read: set[str] = field(default_factory=set)
    _cache: dict[str, list[str]] | None = field(default=None, init=False, repr=False)
    _loaded: set[str] | None = field(default=None, init=False, repr=False)
    _elves: dict[str, ElfInfo | None] = field(default_factory=dict, init=False, repr=False)

    @property
    def system(self) -> bool:
        return self.search_dirs is None

    def find(self, name: str, binary: ElfInfo) -> Path | None:
        if "/" in name:
            candidates: Iterable[str] = [name]
        else:
            candidates = (os.path.join(folder, name) for folder in self._folders(name, binary))
        for candidate in candidates:
            if elf_kind(Path(candidate)) == binary.kind:
                self.read.add(os.path.realpath(candidate))
                return Path(candidate)
        return None

    def _folders(self, name: str, binary: ElfInfo) -> Iterable[str]:
        origin = str(binary.path.parent)

        def expand(entries: Iterable[str]) -> list[str]:
            return [e.replace("${ORIGIN}", origin).replace("$ORIGIN", origin) for e in entries
                    if "$" not in e.replace("${ORIGIN}", "").replace("$ORIGIN", "")]

        if not binary.runpath:
            yield from expand(binary.rpath)
        if self.system:
            yield from (p for p in self.env.get("LD_LIBRARY_PATH", "").split(":") if p)
        yield from expand(binary.runpath)
        if not self.system:
            yield from (str(d) for d in self.search_dirs or ())
            return
        if self._cache is None:
            self._cache = read_ld_cache()
            self.read.add(LD_CACHE)
        for target in self._cache.get(name, []):
            yield os.path.dirname(target)
        yield from _default_dirs()

    def elf(self, path: Path) -> ElfInfo | None:
        key = os.path.realpath(path)
        self.read.add(key)
        if key not in self._elves:
            info = read_elf(path)
            self._elves[key] = info
        info = self._elves[key]
        # the same file reached by another path has another $ORIGIN
        return info if info is None or info.path == path else ElfInfo(
            path, info.kind, info.needed, info.rpath, info.runpath)

    def already_loaded(self, name: str) -> bool:
        if not self.system:
            return False
        if self._loaded is None:
            self._loaded = _loaded_libraries()
        return name in self._loaded

    def loads(self, name: str) -> bool:
        """Whether dlopen finds `name` in this process (system search only)."""
        if not self.system:
            return False
        import ctypes

        try:
            ctypes.CDLL(name)
        except OSError:
            return False
        self.read.add(f"dlopen:{name}")
        return True


def find_missing(binary: Path, search_dirs: Sequence[Path] | None = None,
                 env: Mapping[str, str] | None = None,
                 bundle: Path | None = None) -> list[Missing] | None:
    """Every library that `binary` needs, directly or through what it loads, and that does
    not resolve. None when `binary` itself cannot be read (nothing can be said).

    `search_dirs` None: the system's search, with `env`'s LD_LIBRARY_PATH (this process's
    environment by default); a list: only those folders and the binaries' RUNPATH/RPATH.
    `bundle`: follow only the libraries found inside this folder (None: every one, as ldd).
    """
    resolver = Resolver(search_dirs, dict(os.environ if env is None else env))
    return _walk(binary, resolver, bundle)


def _walk(binary: Path, resolver: Resolver, bundle: Path | None) -> list[Missing] | None:
    """The names `binary` and the libraries it loads need that do not resolve.

    With a `bundle` (PySide6's Qt folder) the walk follows only the libraries that ship in it
    and stops at system libraries: a system library that is there was installed by the
    system's package manager with everything it depends on. This keeps the check at ~10 ms.
    """
    root = resolver.elf(binary)
    if root is None:
        return None
    missing: dict[str, Missing] = {}
    seen: set[str] = {os.path.realpath(binary)}
    todo = [root]
    while todo:
        info = todo.pop()
        for name in info.needed:
            if name in missing or resolver.already_loaded(name):
                continue
            found = resolver.find(name, info)
            if found is None:
                missing[name] = Missing(name, info.path.name)
                continue
            real = os.path.realpath(found)
            if real in seen or (bundle is not None and not _inside(found, bundle)):
                continue
            seen.add(real)
            child = resolver.elf(found)
            if child is not None:
                todo.append(child)
    return [m for m in missing.values() if not resolver.loads(m.name)]


def _inside(path: Path, folder: Path) -> bool:
    """Whether `path` lies in `folder`, by name (a symlinked lib/ inside still counts)."""
    inner, outer = os.path.abspath(path), os.path.abspath(folder)
    return os.path.commonpath([inner, outer]) == outer


# ---------------------------------------------------------------------------- the check


@dataclass
class Problem:
    """Why Qt cannot open a window here, and the words that say so."""

    no_display: bool = False
    platform: str = "xcb"  # the plugin the missing libraries belong to: xcb, wayland, gui
    missing: list[Missing] = field(default_factory=list)

    def message(self, command: str = "onnx-studio gui") -> str:
        lines: list[str] = []
        if self.no_display:
            lines += [
                "onnx-studio: the window cannot open: there is no display (neither DISPLAY "
                "nor WAYLAND_DISPLAY is set).",
                "  Start it from a desktop session, or over SSH with X forwarding (ssh -X).",
            ]
        if self.missing:
            what = {"xcb": "Qt's X11 platform plugin (xcb)",
                    "wayland": "Qt's Wayland platform plugin",
                    "gui": "Qt's GUI libraries"}.get(self.platform, "Qt")
            head = ("onnx-studio: the window cannot open: " if not self.no_display
                    else "Also, ")
            lines.append(f"{head}{what} needs system libraries that are missing:")
            width = max(len(m.name) for m in self.missing)
            for m in self.missing:
                lines.append(f"  {m.name:<{width}}  (needed by {m.needed_by})")
            debian, fedora = install_packages(self.platform, [m.name for m in self.missing])
            lines += [
                "Install them with one command (the whole set Qt needs, so nothing is left):",
                f"  Debian/Ubuntu:  sudo apt-get install -y {' '.join(debian)}",
                f"  Fedora:         sudo dnf install -y {' '.join(fedora)}",
            ]
        if self.platform != "gui":  # the offscreen plugin needs Qt's GUI libraries too
            lines += [
                "Without a screen (screenshots, CI), Qt's offscreen platform draws into memory "
                "and needs none of this:",
                f"  QT_QPA_PLATFORM=offscreen {command} --exit-after-paint",
            ]
        lines.append("The command line (onnx-studio export / validate / inspect) needs no "
                     "display and none of these libraries.")
        return "\n".join(lines)


def install_packages(platform: str, missing: Iterable[str] = ()) -> tuple[list[str], list[str]]:
    """(Debian packages, Fedora packages) for `platform`'s whole set plus `missing`."""
    names = [*{"xcb": XCB_LIBRARIES, "wayland": WAYLAND_LIBRARIES}.get(platform, ()),
             *GUI_LIBRARIES, *missing]
    debian: dict[str, None] = {}
    fedora: dict[str, None] = {}
    for name in names:
        deb, rpm = PACKAGES.get(name, (_debian_guess(name), f"'{name}()(64bit)'"))
        debian[deb] = None
        fedora[rpm] = None
    return list(debian), list(fedora)


def _debian_guess(soname: str) -> str:
    """Debian's library package naming: libfoo.so.1 -> libfoo1, libfoo2.so.1 -> libfoo2-1."""
    stem, _, version = soname.partition(".so.")
    stem = stem.lower()
    if not version:
        return stem
    major = version.split(".")[0]
    return f"{stem}-{major}" if stem[-1:].isdigit() else f"{stem}{major}"


def qt_folder() -> Path | None:
    """PySide6's Qt folder (lib/, plugins/), found without importing PySide6."""
    with contextlib.suppress(ImportError, ValueError):
        spec = importlib.util.find_spec("PySide6")
        if spec is not None and spec.submodule_search_locations:
            for location in spec.submodule_search_locations:
                if (Path(location) / "Qt").is_dir():
                    return Path(location) / "Qt"
    return None


def check(env: Mapping[str, str] | None = None, *, qt_dir: Path | None = None,
          search_dirs: Sequence[Path] | None = None, system: str | None = None,
          read: set[str] | None = None) -> Problem | None:
    """None when Qt can open a window here as far as can be told; else the Problem.

    Inputs are explicit so a test can give fake ones: `env` (default os.environ), `qt_dir`
    (PySide6's Qt folder, holding lib/ and plugins/platforms/), `search_dirs` (None: the
    system's library search; a list: only those folders) and `system` (sys.platform).

    Linux only. First the system libraries of QtGui/QtWidgets themselves (whatever the
    platform: without them `import PySide6.QtWidgets` fails). Then, only when QT_QPA_PLATFORM
    is unset or "xcb" (any other platform the user chose, offscreen included, is theirs to
    own): a display, and the libraries of the plugin Qt will load. When in doubt (no PySide6
    found, a file that is not ELF) the answer is None: Qt then speaks for itself, and a setup
    that works is never refused. `read`, when given, gets the files the answer rests on
    (`Resolver.read`).
    """
    env = os.environ if env is None else env
    if not (system or sys.platform).startswith("linux"):
        return None
    qt_dir = qt_dir or qt_folder()
    if qt_dir is None:
        return None
    resolver = Resolver(search_dirs, dict(env), read=set() if read is None else read)

    def missing_for(binary: Path) -> list[Missing]:
        return (_walk(binary, resolver, qt_dir) or []) if binary.is_file() else []

    gui = missing_for(qt_dir / "lib" / "libQt6Widgets.so.6")
    if gui:
        return Problem(platform="gui", missing=gui)
    chosen = env.get("QT_QPA_PLATFORM", "")
    if chosen and chosen.split(":")[0].strip() != "xcb":
        return None
    platforms = qt_dir / "plugins" / "platforms"
    # Qt's own order (QGuiApplicationPrivate::createPlatformIntegration): wayland first when
    # WAYLAND_DISPLAY or XDG_SESSION_TYPE=wayland says so, then xcb; QT_QPA_PLATFORM=xcb
    # leaves xcb alone. The first plugin that loads wins.
    wayland = not chosen and (bool(env.get("WAYLAND_DISPLAY"))
                              or env.get("XDG_SESSION_TYPE") == "wayland")
    x11 = bool(env.get("DISPLAY"))
    if wayland:
        plugin = platforms / "libqwayland.so"
        missing_wayland = missing_for(plugin)
        if not missing_wayland:
            return None  # it loads (or, not found, Qt explains that itself)
        if not x11:
            return Problem(platform="wayland", missing=missing_wayland)
    missing_xcb = missing_for(platforms / "libqxcb.so")
    if not x11 and not wayland:
        return Problem(no_display=True, platform="xcb", missing=missing_xcb)
    if missing_xcb:
        return Problem(platform="xcb", missing=missing_xcb)
    return None


def ensure_usable(command: str = "onnx-studio gui", stream: TextIO | None = None,
                  env: Mapping[str, str] | None = None, *, qt_dir: Path | None = None,
                  search_dirs: Sequence[Path] | None = None,
                  read: set[str] | None = None) -> int:
    """0 when the window can open; else print why (with the fix) on `stream` (stderr) and
    return EXIT_STATUS. The other arguments are `check()`'s (`read` is left empty when the
    check itself failed: that answer rests on nothing)."""
    try:
        problem = check(env, qt_dir=qt_dir, search_dirs=search_dirs, read=read)
    except Exception:  # a bug in this check must never be what stops the window
        if read is not None:
            read.clear()
        return 0
    if problem is None:
        return 0
    print(problem.message(command), file=stream or sys.stderr, flush=True)
    return EXIT_STATUS
