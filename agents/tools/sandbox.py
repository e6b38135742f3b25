"""Running untrusted Python in a bubblewrap sandbox (the ``python`` tool's engine room).

What the code gets (docs/architecture.md, "The python tool's sandbox"):

- no network: an empty network namespace (``--unshare-net``), loopback only, and nothing
  listens there;
- a read-only root made only of ``/usr`` (and the ``/bin``, ``/lib`` links into it), a few
  files of ``/etc`` the loader and fonts read, the sandbox's virtualenv at ``/venv`` and this
  module's launcher; nothing of the project, its ``var/``, ``/home`` or ``/root``;
- its own scratch folder at ``/scratch`` (the working directory and ``HOME``), the only
  writable place besides a private, size-capped ``/tmp``; the run's input files read-only in
  ``/data``;
- its own user, PID, IPC, UTS and cgroup namespaces; as an unprivileged user
  (``SANDBOX_RUN_AS_UID``) when the worker runs as root;
- resource limits the launcher sets before the code runs (CPU seconds, address space,
  processes, file size, open files), a wall-clock limit after which the whole process group
  is killed, and output read only up to a cap.

Where bubblewrap or the sandbox's virtualenv is missing, ``unavailable_reason()`` says so
and ``run_sandboxed`` refuses: nothing ever runs outside the sandbox.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from django.conf import settings

LAUNCHER = Path(__file__).with_name("sandbox_launcher.py")
# The launcher's exit status when the code ran out of memory (sandbox_launcher.MEMORY_EXIT).
MEMORY_EXIT = 86
# bubblewrap exits with 128 + the signal that ended the code.
_SIGNALLED = 128
SCRATCH = "/scratch"
# How long a killed sandbox may take to go before bubblewrap itself is killed.
_KILL_GRACE_SECONDS = 10
DATA = "/data"

InputFile = tuple[str, "str | os.PathLike[str] | bytes"]
Ending = Literal[
    "exit", "error", "cpu", "memory", "file_size", "time", "interrupted", "signal", "no_sandbox"
]


class SandboxUnavailable(RuntimeError):
    """bubblewrap or the sandbox's virtualenv is missing: the code was not run."""


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int
    memory_bytes: int
    processes: int
    file_bytes: int
    wall_seconds: float
    output_chars: int
    tmp_bytes: int = 64 * 1024 * 1024
    open_files: int = 256


@dataclass
class SandboxResult:
    ending: Ending
    exit_code: int
    stdout: str
    stderr: str
    stdout_cut: bool
    stderr_cut: bool
    # The regular files the code left in its scratch folder, largest last; they are deleted
    # when ``run_sandboxed``'s block ends.
    files: list[Path] = field(default_factory=list)


def bwrap_path() -> str | None:
    configured = settings.SANDBOX_BWRAP
    return shutil.which(configured) if configured else None


def sandbox_python() -> Path:
    return Path(settings.SANDBOX_VENV) / "bin" / "python"


def unavailable_reason() -> str:
    """Why the sandbox cannot run code here, or "" when it can."""
    if bwrap_path() is None:
        return (
            f"bubblewrap ({settings.SANDBOX_BWRAP or 'SANDBOX_BWRAP is empty'}) is not "
            "installed on this server"
        )
    if not sandbox_python().exists():
        return f"the sandbox's virtualenv ({settings.SANDBOX_VENV}) is missing: make sandbox-venv"
    return _namespaces_refused(str(bwrap_path()), _run_as())


@functools.cache
def _namespaces_refused(bwrap: str, run_as: tuple[int, int] | None) -> str:
    """Why bubblewrap cannot make namespaces here ("" when it can), tried once per process:
    a container without user namespaces has the binary but no sandbox."""
    try:
        probe = subprocess.run(  # noqa: S603 (a fixed command)
            [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--ro-bind", "/", "/",
             "--proc", "/proc", "--dev", "/dev", "--", "true"],
            capture_output=True,
            timeout=30,
            user=run_as[0] if run_as else None,
            group=run_as[1] if run_as else None,
            extra_groups=[] if run_as else None,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap could not be started ({exc})"
    if probe.returncode != 0:
        said = probe.stderr.decode(errors="replace").strip().splitlines()
        return f"bubblewrap cannot make a sandbox here ({said[-1] if said else probe.returncode})"
    return ""


def safe_file_name(name: str) -> str:
    """``name`` as one plain file name, or ValueError: no folders, no hidden names, no
    control characters (a name is shown on one line of the observation)."""
    cleaned = name.strip()
    if (
        not cleaned
        or cleaned.startswith(".")
        or "/" in cleaned
        or "\\" in cleaned
        or any(character < " " or character == "\x7f" for character in cleaned)
        or len(cleaned) > 200
    ):
        raise ValueError(f"not a plain file name: {name!r}")
    return cleaned


def _run_as() -> tuple[int, int] | None:
    """The unprivileged user the sandbox runs as when the worker is root: a process limit
    does not bind root, nor do file permissions."""
    if os.geteuid() != 0:
        return None
    uid = settings.SANDBOX_RUN_AS_UID
    return uid, uid


def _base_prefix(venv: Path) -> str:
    """The folder of the interpreter the virtualenv was made from (``home`` in its
    ``pyvenv.cfg`` names its bin folder)."""
    for line in (venv / "pyvenv.cfg").read_text().splitlines():
        key, _sep, value = line.partition("=")
        if key.strip() == "home":
            return str(Path(value.strip()).parent)
    return "/usr"


def _root_file_system() -> list[str]:
    arguments = ["--ro-bind", "/usr", "/usr"]
    prefix = _base_prefix(Path(settings.SANDBOX_VENV))
    if prefix != "/usr" and not prefix.startswith("/usr/"):
        # An interpreter outside /usr (pyenv, a container's /usr/local is inside): its
        # install, read-only, where the virtualenv expects it.
        arguments += ["--ro-bind", prefix, prefix]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            arguments += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            arguments += ["--ro-bind", top, top]
    for wanted in ("/etc/ld.so.cache", "/etc/localtime", "/etc/fonts"):
        if os.path.exists(wanted):
            arguments += ["--ro-bind", wanted, wanted]
    return arguments


def _command(
    bwrap: str, run_dir: Path, inputs: Sequence[tuple[str, Path]], limits: Limits
) -> list[str]:
    command = [
        bwrap,
        "--unshare-all",  # user, PID, network, IPC, UTS and cgroup namespaces
        "--unshare-user",  # named again: --unshare-all alone only tries for a user namespace
        "--unshare-net",  # named again: never share the network, whatever --unshare-all becomes
        "--die-with-parent",
        "--new-session",
        "--disable-userns",
        "--clearenv",
        "--hostname",
        "sandbox",
        *_root_file_system(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(limits.tmp_bytes),
        "--tmpfs",
        "/tmp",  # noqa: S108 (the sandbox's own, private /tmp)
        "--ro-bind",
        str(Path(settings.SANDBOX_VENV)),
        "/venv",
        "--ro-bind",
        str(LAUNCHER),
        "/sandbox/launcher.py",
        "--ro-bind",
        str(run_dir / "code.py"),
        "/sandbox/code.py",
        "--bind",
        str(run_dir / "scratch"),
        SCRATCH,
        "--tmpfs",
        DATA,
    ]
    for name, source in inputs:
        command += ["--ro-bind", str(source), f"{DATA}/{name}"]
    # The root bubblewrap builds (a tmpfs holding the mount points: /etc, /sandbox, ...) is
    # made read-only last; /scratch and /tmp are mounts of their own and stay writable.
    command += ["--remount-ro", DATA, "--remount-ro", "/", "--chdir", SCRATCH]
    environment = {
        "HOME": SCRATCH,
        "PATH": "/venv/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": "/tmp/matplotlib",  # noqa: S108
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        # One thread each: numerical libraries would start one per core, each counted as a
        # process and each reserving address space.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    for name, value in environment.items():
        command += ["--setenv", name, value]
    rlimits = {
        "cpu_seconds": limits.cpu_seconds,
        "memory_bytes": limits.memory_bytes,
        "processes": limits.processes,
        "file_bytes": limits.file_bytes,
        "open_files": limits.open_files,
    }
    command += [
        "--",
        "/venv/bin/python",
        "-I",  # no PYTHON* variables, no user site-packages, no script folder on sys.path
        "/sandbox/launcher.py",
        "/sandbox/code.py",
        json.dumps(rlimits),
    ]
    return command


def _child_pid(info: int, timeout: float) -> int | None:
    """The ``child-pid`` bubblewrap writes on its info descriptor; None if it wrote none
    (it failed before starting the sandbox, or took longer than ``timeout``)."""
    received = b""
    deadline = time.monotonic() + timeout
    while (remaining := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([info], [], [], remaining)
        if not readable:
            break
        chunk = os.read(info, 4096)
        if not chunk:
            break
        received += chunk
    try:
        pid = json.loads(received)["child-pid"]
    except (ValueError, KeyError, TypeError):
        return None
    return pid if isinstance(pid, int) and pid > 1 else None


def _read_capped(path: Path, limit: int) -> tuple[str, bool]:
    """The first ``limit`` characters of a file the code wrote, and whether there was more."""
    with path.open("rb") as stream:
        head = stream.read(limit * 4 + 4)
    text = head.decode("utf-8", errors="replace")
    cut = len(text) > limit or path.stat().st_size > len(head)
    return text[:limit], cut


def _ending(return_code: int, killed_for: Ending | None) -> Ending:
    if killed_for is not None:
        return killed_for
    if return_code == 0:
        return "exit"
    if return_code == MEMORY_EXIT:
        return "memory"
    if return_code == _SIGNALLED + signal.SIGXCPU:
        return "cpu"
    if return_code == _SIGNALLED + signal.SIGXFSZ:
        return "file_size"
    if return_code == _SIGNALLED + signal.SIGKILL:
        # The hard CPU limit (code that ignored SIGXCPU) or the kernel's OOM killer.
        return "signal"
    return "error"


def _stage_inputs(run_dir: Path, files: Sequence[InputFile]) -> list[tuple[str, Path]]:
    """Each input as a file in the run's folder (not the scratch one), to bind read-only.

    A path is copied: the sandbox's user cannot reach the worker's folders (var/), and must
    not; the copy is deleted with the run's folder."""
    staged: list[tuple[str, Path]] = []
    seen: set[str] = set()
    inputs = run_dir / "inputs"
    inputs.mkdir(mode=0o755)
    for raw_name, content in files:
        name = safe_file_name(raw_name)
        if name in seen:
            raise ValueError(f"two input files are named {name!r}")
        seen.add(name)
        target = inputs / name
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            source = Path(content)
            if not source.is_file():
                raise ValueError(f"input file {name!r} is not a file on this server")
            shutil.copyfile(source, target)
        target.chmod(0o644)
        staged.append((name, target))
    return staged


@contextlib.contextmanager
def run_sandboxed(
    code: str,
    *,
    limits: Limits,
    files: Sequence[InputFile] = (),
    on_start: Callable[[Callable[[], None]], Callable[[], None]] | None = None,
) -> Iterator[SandboxResult]:
    """Run ``code`` in the sandbox; the result is valid inside the ``with`` block, whose end
    deletes the scratch folder.

    ``on_start`` receives a function that kills the sandbox at once (the tool's interrupt
    registers it) and returns one that unregisters it. Raises ``SandboxUnavailable`` when the
    sandbox cannot be made: then nothing ran.
    """
    reason = unavailable_reason()
    bwrap = bwrap_path()
    if reason or bwrap is None:
        raise SandboxUnavailable(reason or "bubblewrap is not installed on this server")
    base = settings.SANDBOX_SCRATCH_DIR or None
    run_dir = Path(tempfile.mkdtemp(prefix="chatsite-sandbox-", dir=base))
    try:
        (run_dir / "code.py").write_text(code, encoding="utf-8")
        (run_dir / "code.py").chmod(0o644)
        scratch = run_dir / "scratch"
        scratch.mkdir(mode=0o700)
        run_as = _run_as()
        if run_as is not None:
            os.chown(scratch, *run_as)
            # The run's folder stays root's, but the unprivileged bubblewrap must reach
            # what it binds inside it.
            run_dir.chmod(0o711)
        inputs = _stage_inputs(run_dir, files)
        result = _run(bwrap, run_dir, inputs, limits, run_as, on_start)
        yield result
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def _run(
    bwrap: str,
    run_dir: Path,
    inputs: Sequence[tuple[str, Path]],
    limits: Limits,
    run_as: tuple[int, int] | None,
    on_start: Callable[[Callable[[], None]], Callable[[], None]] | None,
) -> SandboxResult:
    stdout_path, stderr_path = run_dir / "stdout", run_dir / "stderr"
    killed_for: list[Ending] = []
    info_read, info_write = os.pipe()
    command = _command(bwrap, run_dir, inputs, limits)
    # bubblewrap tells the host pid of the sandbox's first process (its PID namespace's
    # init) on this descriptor, then closes it.
    command[1:1] = ["--info-fd", str(info_write)]
    try:
        with stdout_path.open("wb") as stdout, stderr_path.open("wb") as stderr:
            process = subprocess.Popen(  # noqa: S603 (a fixed command; the code is a file)
                command,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,  # its own process group
                close_fds=True,
                pass_fds=[info_write],
                user=run_as[0] if run_as else None,
                group=run_as[1] if run_as else None,
                extra_groups=[] if run_as else None,
            )
    finally:
        os.close(info_write)
    try:
        sandbox_init = _child_pid(info_read, limits.wall_seconds)
    finally:
        os.close(info_read)

    def kill(reason: Ending = "interrupted") -> None:
        if not killed_for:
            killed_for.append(reason)
        # Killing the PID namespace's init kills every process the code started, and
        # bubblewrap exits only once they are all gone. Killing bubblewrap instead would
        # leave them to die a moment later, after the call has returned.
        with contextlib.suppress(ProcessLookupError):
            if sandbox_init:
                os.kill(sandbox_init, signal.SIGKILL)
            else:
                os.killpg(process.pid, signal.SIGKILL)

    forget = on_start(kill) if on_start else (lambda: None)
    try:
        try:
            process.wait(timeout=limits.wall_seconds)
        except subprocess.TimeoutExpired:
            kill("time")
            try:
                process.wait(timeout=_KILL_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    finally:
        forget()
    scratch = run_dir / "scratch"
    # The code may have left links pointing anywhere: only regular files count, never
    # followed, and only at the top of the scratch folder.
    files = sorted(
        (path for path in scratch.iterdir() if stat.S_ISREG(path.lstat().st_mode)),
        key=lambda path: path.lstat().st_size,
    )
    out, out_cut = _read_capped(stdout_path, limits.output_chars)
    err, err_cut = _read_capped(stderr_path, limits.output_chars)
    ending = _ending(process.returncode, killed_for[0] if killed_for else None)
    if ending == "error" and err.startswith("bwrap: ") and process.returncode == 1:
        ending = "no_sandbox"  # bubblewrap could not make the sandbox: nothing ran
    return SandboxResult(
        ending=ending,
        exit_code=process.returncode,
        stdout=out,
        stderr=err,
        stdout_cut=out_cut,
        stderr_cut=err_cut,
        files=files,
    )
