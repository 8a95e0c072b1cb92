"""Processes and their descendants, portably (psutil): find them, end them, say how one ended.

The worker ends its job's children with itself; the window's client and the CLI end a worker
together with the processes it started. psutil walks the tree on Linux, macOS and Windows
alike, so no caller needs a POSIX process group or `taskkill`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import uuid

import psutil

FAMILY_ENV = "ONNX_STUDIO_FAMILY"  # inherited by a worker's every descendant

_SIGNAL_CAUSES = {
    "SIGKILL": "killed from outside, often because the machine ran out of memory",
    "SIGSEGV": "a crash inside native code (segmentation fault)",
    "SIGABRT": "a native library aborted",
    "SIGBUS": "a crash inside native code (bus error)",
}
# Windows reports a crash as the exception's NTSTATUS code instead of a signal
_EXCEPTION_CAUSES = {
    0xC0000005: "access violation: a crash inside native code",
    0xC00000FD: "stack overflow: a crash inside native code",
    0xC0000409: "a native library aborted",
    0xC0000017: "the machine ran out of memory",
}


def descendants(pid: int) -> list[psutil.Process]:
    """Every live process below `pid` (children, grandchildren, ...); [] when `pid` is gone."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def new_family_token() -> str:
    """A token to put in a worker's environment under FAMILY_ENV: every process it starts
    inherits it, so `family` finds them even after the worker is gone."""
    return uuid.uuid4().hex


def family(token: str) -> list[psutil.Process]:
    """Every live process whose environment carries FAMILY_ENV=`token`: a worker's children
    and grandchildren, found even once re-parented (their parent killed), where a walk of the
    tree no longer reaches. Portable (psutil reads the environment on Linux, macOS and
    Windows); a process whose environment cannot be read is passed over."""
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if process.pid != os.getpid() and process.environ().get(FAMILY_ENV) == token:
                found.append(process)
    return found


def kill_processes(processes: list[psutil.Process]) -> None:
    """Kill each process that still runs (a snapshot taken earlier: `descendants`).

    psutil checks a process's start time before it signals it, so a pid that has been given to
    another process since the snapshot is left alone.
    """
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.kill()


def kill_tree(pid: int, include_self: bool = True) -> None:
    """Kill the processes below `pid` and, with `include_self`, `pid` itself (last).

    Children first, so none of them is re-parented away from the walk while it runs. When
    `pid` is this process, `include_self` ends it without returning.
    """
    kill_processes(descendants(pid))
    if not include_self:
        return
    if pid == os.getpid():
        os._exit(1)  # SIGKILL to oneself is POSIX-only; this is as abrupt, and portable
    with contextlib.suppress(psutil.Error):
        psutil.Process(pid).kill()


def alive(pid: int) -> bool:
    """True while a process with this id runs (a zombie, which holds nothing, counts as gone)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:  # exists, but is not ours to look at
        return True


def exit_description(code: int, crashed: bool = False) -> str:
    """'exit status 3' or 'signal 9 (SIGKILL: ...)': how a process ended, with the likely cause.

    `code` and `crashed` are QProcess's `exitCode()` and `exitStatus() == CrashExit`, or a
    `subprocess` return code alone (negative: "signal -code"). On POSIX the code of a crash is
    the signal's number; on Windows it is the exception code (0xC0000005).
    """
    if not crashed and code >= 0:
        if code > 255 and (code & 0xFFFFFFFF) in _EXCEPTION_CAUSES:  # Windows, via subprocess
            return exit_description(code, crashed=True)
        return f"exit status {code}"
    unsigned = code & 0xFFFFFFFF
    if crashed and unsigned > 255:
        cause = _EXCEPTION_CAUSES.get(unsigned)
        return f"exception 0x{unsigned:08X}" + (f" ({cause})" if cause else "")
    number = abs(code)
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = "unknown signal"
    cause = _SIGNAL_CAUSES.get(name)
    return f"signal {number} ({name}" + (f": {cause})" if cause else ")")
