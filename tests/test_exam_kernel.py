"""The exam kernel: shell escapes and unlisted imports refused with one line, no network at all.

The refusal rules are pure (:mod:`coursehub.examroom.guard`); the rest runs a
real ipykernel through :class:`coursehub.examroom.kernelmanager.ExamKernelManager`
(jupyter_client), in its own user, network, mount and PID namespaces, where
this host allows user namespaces.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from coursehub.examroom.guard import (
    REFUSAL,
    event_refused,
    import_refused,
    parse_allowed_imports,
    refusal_line,
)
from coursehub.examroom.kernelmanager import (
    GUARD_EXTENSION,
    ExamKernelError,
    is_ipykernel,
    plan_exam_kernel_command,
    plan_ipc_prefix,
)
from coursehub.sandbox.command import sandbox_mode

RUNNER = Path(__file__).with_name("examkernelrun.py")
KERNEL = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]

needs_namespaces = pytest.mark.skipif(
    sandbox_mode() not in ("root", "userns"),
    reason="this host allows no user namespaces (unshare --user --net fails)",
)


def run_cells(
    cells: list[str],
    runtime: Path,
    cwd: Path,
    allowed: str = "",
    user: str = "",
    python: tuple[list[str], dict[str, str]] = ([sys.executable], {}),
    hidden: tuple[str, ...] = (),
) -> list:
    """Run ``cells`` in an exam kernel (as ``user``, when given); each cell's status and text.

    ``python``: the interpreter command and the variables it needs (:func:`student_python`).
    """
    as_user = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"]
    prefix = as_user if user else []
    interpreter, env = python
    done = subprocess.run(
        [*prefix, *interpreter, str(RUNNER), str(runtime), str(cwd), allowed, ",".join(hidden)],
        input=json.dumps(cells),
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def student_python(user: str) -> tuple[list[str], dict[str, str]] | None:
    """An interpreter with this installation that ``user`` can run inside a user namespace.

    This interpreter, else (a virtualenv under a folder students cannot enter,
    such as ``/root``) the system's of the same version with this
    installation's import path; None when neither runs.
    """
    probe = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"]
    probe += ["unshare", "--user", "--map-root-user", "--"]
    system = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    path = os.pathsep.join(p for p in sys.path[1:] if p and Path(p).is_dir())
    for python in (([sys.executable], {}), ([system], {"PYTHONPATH": path})):
        check = [*probe, *python[0], "-c", "import ipykernel, coursehub.examroom.guard"]
        env = {**os.environ, **python[1]}
        if subprocess.run(check, capture_output=True, env=env, timeout=60).returncode == 0:
            return python
    return None


def test_process_starting_events_are_refused_and_others_pass():
    assert event_refused("subprocess.Popen", ("ls", ["ls"], None, None)) == "subprocess.Popen"
    assert event_refused("os.system", (b"ls",)) == "os.system"
    assert event_refused("os.exec", ("/bin/sh", ["sh"], None)) == "os.exec"
    assert event_refused("os.posix_spawn", ("/bin/sh", ["sh"], None)) == "os.posix_spawn"
    assert event_refused("ctypes.dlsym", (None, "system")) == "ctypes system"
    assert event_refused("ctypes.dlsym", (None, "cos")) is None
    assert event_refused("open", ("notebook.ipynb", "r", 0)) is None


def test_only_the_students_imports_outside_the_list_are_refused():
    allowed = parse_allowed_imports("numpy, pandas")
    assert allowed == {"numpy", "pandas"}
    assert import_refused("sklearn.linear_model", allowed, "__main__")
    assert import_refused("requests", allowed, "exam-home")
    assert not import_refused("numpy.linalg", allowed, "__main__")
    assert not import_refused("json", allowed, "__main__")  # the standard library
    assert not import_refused("dateutil", allowed, "pandas.core.tools")  # pandas' own needs
    assert not import_refused("zmq", allowed, "__main__", preloaded={"zmq"})
    assert not import_refused("sklearn", None, "__main__")  # no list: all allowed


def test_a_bad_import_list_names_the_bad_name():
    assert parse_allowed_imports("") is None
    with pytest.raises(ValueError, match="'sci-py' is not a module name"):
        parse_allowed_imports("numpy, sci-py")


def test_the_refusal_is_one_line_saying_it_is_the_exam():
    line = refusal_line("os.system")
    assert line.startswith(REFUSAL) and "\n" not in line and "os.system" in line


def test_the_kernel_command_loads_the_refusals_and_cuts_the_network():
    cmd = plan_exam_kernel_command(KERNEL, [], "userns")
    assert is_ipykernel(KERNEL)
    assert cmd[-1] == f"--IPKernelApp.extensions={GUARD_EXTENSION}"
    assert "--net" in cmd and "--user" in cmd and "--pid" in cmd
    assert not is_ipykernel(["R", "--slave", "-e", "IRkernel::main()"])


def test_kernel_sockets_lie_beside_the_connection_file_unless_the_path_is_too_long():
    assert plan_ipc_prefix("/run/user/1001/jupyter/runtime/kernel-1.json") == (
        "/run/user/1001/jupyter/runtime/kernel-1-ipc"
    )
    assert plan_ipc_prefix("/" + "x" * 120 + "/kernel-1.json") is None


def test_an_exam_kernel_is_refused_where_its_network_cannot_be_cut():
    with pytest.raises(ExamKernelError, match="cannot be cut from the network"):
        plan_exam_kernel_command(KERNEL, [], "none")


@pytest.fixture
def listener():
    """A TCP server on 127.0.0.1 (another student's server on this host): its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()


@needs_namespaces
@pytest.mark.slow
def test_a_real_exam_kernel_refuses_escapes_and_reaches_no_address(tmp_path, listener):
    cells = [
        "!id",
        "%%bash\nid",
        "%system id",
        "import subprocess; subprocess.run(['id'])",
        "import os; os.system('id')",
        "import os; os.execv('/bin/sh', ['sh'])",
        "import pty; pty.spawn('/bin/sh')",
        "import socket\n"
        f"for address in [('1.1.1.1', 80), ('127.0.0.1', {listener})]:\n"
        "    try:\n"
        "        socket.create_connection(address, timeout=3)\n"
        "        print('connected', address)\n"
        "    except OSError as exc:\n"
        "        print('refused', exc.errno)",
        "import numpy; print(numpy.ones(2).sum())",
        "import sklearn",
        "print(6 * 7)",
    ]
    results = run_cells(cells, tmp_path, tmp_path, allowed="numpy")
    for result in results[:7]:
        assert result["status"] == "error" and REFUSAL in result["text"], result
        assert len(result["text"].strip().splitlines()) == 1, result
    assert results[7]["text"].count("refused") == 2 and "connected" not in results[7]["text"]
    assert results[8] == {"status": "ok", "text": "2.0\n"}
    assert results[9]["status"] == "error" and "import sklearn" in results[9]["text"]
    assert results[10] == {"status": "ok", "text": "42\n"}


@needs_namespaces
def test_a_hidden_folder_is_unreadable_from_an_exam_kernel(tmp_path):
    homes = tmp_path / "homes"
    (homes / "alice").mkdir(parents=True)
    (homes / "alice" / "course.ipynb").write_text("course work")
    work = tmp_path / "exam"
    work.mkdir()
    cells = [f"import os; os.listdir({str(homes)!r})", "print(os.readlink('/proc/self/ns/pid'))"]
    listed, pid = run_cells(cells, work, work, hidden=(str(homes),))
    # hidden (an empty folder of mode 000), or, under /tmp as here, not there at all
    assert listed["status"] == "error", listed
    assert "PermissionError" in listed["text"] or "FileNotFoundError" in listed["text"], listed
    assert pid["status"] == "ok" and pid["text"].startswith("pid:[")
    assert pid["text"].strip() != os.readlink("/proc/self/ns/pid")  # its own PID namespace
    # a folder hidden inside one the kernel works in stays hidden there
    (work / "others").mkdir()
    (work / "others" / "bob.ipynb").write_text("bob's work")
    [inside] = run_cells([f"import os; os.listdir({str(work / 'others')!r})"], work, work,
                         hidden=(str(work / "others"),))  # fmt: skip
    assert inside["status"] == "error" and "PermissionError" in inside["text"], inside


@needs_namespaces
def test_two_exam_kernels_share_nothing_in_tmp_var_tmp_or_dev_shm(tmp_path):
    token = f"chtest-{uuid.uuid4().hex[:12]}"
    shared = ("/tmp", "/var/tmp", "/dev/shm")
    write = f"import pathlib\nfor f in {shared!r}:\n    pathlib.Path(f, {token!r}).write_text('x')"
    look = f"import pathlib; print([f for f in {shared!r} if pathlib.Path(f, {token!r}).exists()])"
    for student in ("alice", "bob"):
        (tmp_path / student).mkdir()
    wrote, seen = run_cells([write, look], tmp_path / "alice", tmp_path / "alice")
    assert wrote["status"] == "ok", wrote
    assert seen["text"] == "['/tmp', '/var/tmp', '/dev/shm']\n"  # its own, writable
    [other] = run_cells([look], tmp_path / "bob", tmp_path / "bob")
    assert other == {"status": "ok", "text": "[]\n"}
    assert not [f for f in shared if Path(f, token).exists()]  # nor on the host
