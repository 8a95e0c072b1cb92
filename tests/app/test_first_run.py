"""A first run that explains itself: no display, or the system libraries Qt's window-system
plugins need missing, is said (with the install command) before Qt can abort the process.

The check's inputs are arguments: the environment, PySide6's Qt folder and the library search
folders. The fakes here are a Qt folder whose plugins are copies of the real ones with one
dependency renamed (its lib/ a link to the real one), and an empty library folder.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from onnx_studio.app import platform_check as pc
from tests.conftest import REPO

QT = pc.qt_folder()
PLATFORMS = QT / "plugins" / "platforms" if QT else Path("/nonexistent")
XCB = PLATFORMS / "libqxcb.so"
pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not XCB.is_file(),
    reason="Qt's xcb plugin is a Linux thing (and PySide6 must ship it)")

DISPLAY_VARIABLES = ("DISPLAY", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE", "QT_QPA_PLATFORM")


def fake_qt(root: Path, rename: dict[str, str] | None = None) -> Path:
    """A Qt folder: lib/ links to PySide6's; the platform plugins are copies, with each
    `rename` key (a DT_NEEDED name) replaced by its value (the same length) in the copy."""
    assert QT is not None
    qt = root / "Qt"
    (qt / "plugins" / "platforms").mkdir(parents=True)
    (qt / "lib").symlink_to(QT / "lib", target_is_directory=True)
    for plugin in ("libqxcb.so", "libqwayland.so", "libqoffscreen.so"):
        if not (PLATFORMS / plugin).is_file():
            continue
        data = (PLATFORMS / plugin).read_bytes()
        for old, new in (rename or {}).items():
            assert len(old) == len(new)
            data = data.replace(old.encode() + b"\0", new.encode() + b"\0")
        (qt / "plugins" / "platforms" / plugin).write_bytes(data)
    return qt


def renamed(name: str) -> str:
    """`libxcb-shape.so.0` -> `libxcb-shapZ.so.0`: a library no system has."""
    stem, dot, version = name.partition(".so")
    return f"{stem[:-1]}Z{dot}{version}"


def names(missing: list[pc.Missing] | None) -> set[str]:
    assert missing is not None
    return {m.name for m in missing}


def test_the_elf_reader_reads_what_readelf_reads() -> None:
    info = pc.read_elf(XCB)
    assert info is not None
    assert "libQt6XcbQpa.so.6" in info.needed and "libxcb.so.1" in info.needed
    assert info.runpath == ("$ORIGIN/../../lib",)
    if shutil.which("readelf") is None:
        return
    out = subprocess.run(["readelf", "-d", str(XCB)], capture_output=True, text=True,
                         timeout=60).stdout
    listed = [line.split("[", 1)[1].rstrip("]") for line in out.splitlines()
              if "(NEEDED)" in line]
    assert list(info.needed) == listed


def test_the_system_search_agrees_with_ldd() -> None:
    """Without `ldd`, the reader + ld.so.cache find the same missing libraries as ldd does."""
    if shutil.which("ldd") is None:
        pytest.skip("no ldd to compare with")
    out = subprocess.run(["ldd", str(XCB)], capture_output=True, text=True, timeout=60).stdout
    not_found = {line.split("=>")[0].strip() for line in out.splitlines() if "not found" in line}
    assert names(pc.find_missing(XCB)) == not_found


def test_an_empty_library_folder_leaves_only_what_qt_ships(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    missing = pc.find_missing(XCB, search_dirs=[empty], bundle=QT)
    found = names(missing)
    assert {"libxcb.so.1", "libxkbcommon-x11.so.0", "libX11.so.6", "libc.so.6"} <= found
    assert not [n for n in found if n.startswith("libQt6")], "Qt's own libraries ship with it"
    assert {m.needed_by for m in missing or []} >= {"libqxcb.so"}

    out = io.StringIO()
    status = pc.ensure_usable(stream=out, env={"DISPLAY": ":0"}, qt_dir=QT, search_dirs=[empty])
    assert status == pc.EXIT_STATUS == 2
    text = out.getvalue()
    assert "Qt's GUI libraries needs system libraries that are missing" in text
    assert "libX11.so.6" in text and "sudo apt-get install -y " in text


def test_a_renamed_dependency_is_named_with_the_install_commands(tmp_path: Path) -> None:
    env = {"DISPLAY": ":0"}
    before = pc.check(env, qt_dir=fake_qt(tmp_path / "good"))
    missing_before = set() if before is None else names(before.missing)
    info = pc.read_elf(XCB)
    assert info is not None
    victim = next((n for n in info.needed
                   if n in pc.XCB_LIBRARIES and n not in missing_before), None)
    if victim is None:
        pytest.skip("no xcb library is installed here to rename")
    qt = fake_qt(tmp_path / "broken", {victim: renamed(victim)})

    problem = pc.check(env, qt_dir=qt)
    assert problem is not None and problem.platform == "xcb" and not problem.no_display
    assert names(problem.missing) == missing_before | {renamed(victim)}
    out = io.StringIO()
    assert pc.ensure_usable("onnx-studio gui", out, env, qt_dir=qt) == 2
    text = out.getvalue()
    assert text.strip() == problem.message().strip()
    assert text.startswith("onnx-studio: the window cannot open: Qt's X11 platform plugin (xcb) "
                           "needs system libraries that are missing:")
    assert f"  {renamed(victim)}" in text and "(needed by libqxcb.so)" in text
    apt = next(line for line in text.splitlines() if "apt-get" in line)
    assert "sudo apt-get install -y libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1" in apt
    for soname in pc.XCB_LIBRARIES:  # the whole set: one command fixes everything
        assert f" {pc.PACKAGES[soname][0]}" in apt
    dnf = next(line for line in text.splitlines() if "dnf" in line)
    assert "sudo dnf install -y xcb-util-cursor xcb-util-wm" in dnf
    assert "QT_QPA_PLATFORM=offscreen onnx-studio gui --exit-after-paint" in text
    assert "Aborted" not in text


def test_offscreen_passes_whatever_the_xcb_plugin_needs(tmp_path: Path) -> None:
    info = pc.read_elf(XCB)
    assert info is not None
    qt = fake_qt(tmp_path, {n: renamed(n) for n in info.needed if n in pc.XCB_LIBRARIES})
    offscreen = {"QT_QPA_PLATFORM": "offscreen"}  # and no display at all
    assert pc.check({"DISPLAY": ":0"}, qt_dir=qt) is not None, "the fake plugin is broken"
    assert pc.check(offscreen, qt_dir=qt) is None
    out = io.StringIO()
    assert pc.ensure_usable(stream=out, env=offscreen, qt_dir=qt) == 0
    assert out.getvalue() == ""
    assert pc.check(offscreen) is None, "this machine's real Qt, offscreen"
    assert pc.check({"QT_QPA_PLATFORM": "vnc"}, qt_dir=qt) is None, "a platform the user chose"
    assert pc.check({}, qt_dir=qt, system="darwin") is None, "Linux only"


def test_no_display_is_said_first(tmp_path: Path) -> None:
    qt = fake_qt(tmp_path)
    for env in ({}, {"QT_QPA_PLATFORM": "xcb", "WAYLAND_DISPLAY": "wayland-0"}):
        problem = pc.check(env, qt_dir=qt)
        assert problem is not None and problem.no_display, env
        text = problem.message("python -m app")
        assert text.startswith("onnx-studio: the window cannot open: there is no display "
                               "(neither DISPLAY nor WAYLAND_DISPLAY is set).")
        assert "QT_QPA_PLATFORM=offscreen python -m app --exit-after-paint" in text


def test_a_wayland_session_needs_the_wayland_plugin(tmp_path: Path) -> None:
    plugin = PLATFORMS / "libqwayland.so"
    info = pc.read_elf(plugin) if plugin.is_file() else None
    if info is None:
        pytest.skip("this PySide6 ships no Wayland plugin")
    env = {"WAYLAND_DISPLAY": "wayland-0"}  # Qt tries wayland first, and xcb needs DISPLAY
    good = pc.check(env, qt_dir=fake_qt(tmp_path / "good"))
    missing_before = set() if good is None else names(good.missing)
    victim = next(n for n in info.needed if n.startswith("libwayland-client"))
    problem = pc.check(env, qt_dir=fake_qt(tmp_path / "broken", {victim: renamed(victim)}))
    assert problem is not None and problem.platform == "wayland" and not problem.no_display
    assert names(problem.missing) == missing_before | {renamed(victim)}
    assert "libwayland-client0" in problem.message()


def test_package_names_for_libraries_not_in_the_table() -> None:
    debian, fedora = pc.install_packages("xcb", ["libfoo2.so.1", "libbar.so.3", "libxcb.so.1"])
    assert debian[:3] == ["libxcb-cursor0", "libxcb-icccm4", "libxcb-keysyms1"]
    assert debian[-2:] == ["libfoo2-1", "libbar3"] and debian.count("libxcb1") == 1
    assert fedora[0] == "xcb-util-cursor" and fedora[-1] == "'libbar.so.3()(64bit)'"


def _console_script() -> Path:
    script = Path(sys.executable).parent / "onnx-studio"
    if not script.is_file():
        pytest.skip("the onnx-studio console script is not installed beside this Python")
    return script


def _without_display(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DISPLAY_VARIABLES}
    return {**env, "PYTHONPATH": str(REPO), **extra}


@pytest.mark.parametrize("args", [[], ["gui"], ["-m", "onnx_studio.app"]],
                         ids=["onnx-studio", "onnx-studio gui", "python -m app"])
def test_no_display_through_the_real_entry_points(args: list[str]) -> None:
    command = [sys.executable, *args] if args[:1] == ["-m"] else [str(_console_script()), *args]
    result = subprocess.run(command, env=_without_display(), capture_output=True, text=True,
                            timeout=60, cwd=REPO)
    assert result.returncode == 2, result.stderr
    assert "there is no display (neither DISPLAY nor WAYLAND_DISPLAY is set)" in result.stderr
    assert "QT_QPA_PLATFORM=offscreen" in result.stderr
    assert "Aborted" not in result.stderr and "could not load the Qt platform" not in (
        result.stderr)
    assert result.stdout == ""


def test_the_offscreen_advice_works_without_a_display() -> None:
    result = subprocess.run([str(_console_script()), "gui", "--exit-after-paint"],
                            env=_without_display(QT_QPA_PLATFORM="offscreen"),
                            capture_output=True, text=True, timeout=60, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert set(json.loads(result.stdout.strip().splitlines()[-1])) == {
        "window_s", "graph_s", "nodes"}


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_the_documentation_gives_the_same_install_commands(page: str) -> None:
    text = (REPO / page).read_text(encoding="utf-8")
    debian, fedora = pc.install_packages("xcb")
    assert f"\nsudo apt-get install -y {' '.join(debian)}\n" in text
    assert f"\nsudo dnf install -y {' '.join(fedora)}\n" in text
