"""CPU seconds of one Jupyter server start: every configured server extension, or an exam's.

Each start is a ``jupyter lab`` subprocess (jupyter-server with JupyterLab,
what a single-user server runs) on a free local port, in a fresh empty root
folder, polled on ``GET /api/status`` until it answers; its CPU time (user
+ system, psutil) is read then, and the server is stopped. Two variants,
interleaved start by start so that the machine's load falls on both alike:

- ``all extensions``: every server extension this environment's Jupyter
  configuration enables (``jupyter server extension list``);
- ``exam extensions``: the same with the options an exam server gets,
  :func:`coursehub.examroom.server.plan_extension_switches` over
  :func:`coursehub.examroom.server.configured_server_extensions`
  (JupyterLab, the exam clock and JupyterHub's extension only).

Also printed, once: whether importing jsonschema here builds rfc3987-syntax's
IRI parsers (``coursehub doctor``'s ``jupyter start`` check), and the CPU
seconds of that import (median of the repeats, each a fresh interpreter).

Printed: the medians over ``--repeats`` starts of each variant with a 95 %
interval (:func:`coursehub.bench.stats.describe_median`).

Run: ``.venv/bin/python benchmarks/bench_server_start.py [--repeats 7]``.

Measured (2026-12-06, 2 CPUs, load average about 1, ``--repeats 7``; medians
with 95 % intervals), as ``make setup`` leaves the environment (no
rfc3987-syntax): import jsonschema 0.0655 s [0.0647, 0.0657]; all extensions
0.64 s [0.63, 0.64], exam extensions 0.32 s [0.31, 0.33] of CPU. The same
with rfc3987-syntax 1.1.0 installed again for the run: import jsonschema
0.721 s [0.707, 0.75]; all extensions 1.44 s [1.39, 1.55], exam extensions
1.00 s [0.98, 1.01].
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil
from jupyter_core.paths import jupyter_config_path

from coursehub.bench.stats import describe_median
from coursehub.examroom.server import configured_server_extensions, plan_extension_switches

IMPORT = (
    "import sys, time; t = time.process_time(); import jsonschema; "
    "print(time.process_time() - t, 'rfc3987_syntax' in sys.modules)"
)


def free_port() -> int:
    """An unused local TCP port (bound once, then released)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_cpu_s(extra: list[str], timeout_s: float = 120.0) -> float:
    """Start ``jupyter lab`` with ``extra`` options; return its CPU seconds once it answers.

    Raises
    ------
    RuntimeError
        If the server exits or does not answer within ``timeout_s``.
    """
    port = free_port()
    with tempfile.TemporaryDirectory() as root:
        argv = [str(Path(sys.executable).parent / "jupyter-lab"), "--no-browser",
                f"--port={port}", "--ServerApp.token=", f"--ServerApp.root_dir={root}",
                "--allow-root", *extra]  # fmt: skip
        server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if server.poll() is not None:
                    raise RuntimeError(f"jupyter lab exited with status {server.returncode}")
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=1)
                    times = psutil.Process(server.pid).cpu_times()
                    return times.user + times.system
                except OSError:
                    time.sleep(0.02)
            raise RuntimeError(f"jupyter lab did not answer within {timeout_s:.0f} s")
        finally:
            server.terminate()
            server.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="starts per variant")
    args = parser.parse_args()
    switches = plan_extension_switches(configured_server_extensions(jupyter_config_path()))
    variants = {"all extensions": [], "exam extensions": switches}
    print(f"server start: {args.repeats} starts per variant, interleaved; "
          f"the exam variant turns off {len(switches)} server extensions")  # fmt: skip
    imports = []
    for _ in range(args.repeats):
        said = subprocess.run([sys.executable, "-c", IMPORT], capture_output=True, text=True)
        cpu, built = said.stdout.split()
        imports.append(float(cpu))
    print(f"importing jsonschema builds rfc3987-syntax's parsers: {built == 'True'}")
    print(describe_median("import jsonschema, CPU", imports, " s"))
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, extra in variants.items():
            cpu[name].append(start_cpu_s(extra))
    for name, values in cpu.items():
        print(describe_median(f"{name}, CPU to answer", values, " s"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
