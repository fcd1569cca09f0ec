"""Benchmark ``coursehub env build``: time to build a course environment and its size.

Declares a course's requirements in a temporary shared root and runs
:func:`coursehub.courseenv.build.build_environment` ``--repeat`` times (each a
full build aside: ``python -m venv``, ``pip install --only-binary=:all:`` of
the requirements and ipykernel, kernel spec, atomic switch; the previous build
is kept, older ones removed), then prints per run the wall-clock seconds and
the disk usage of the build (allocated blocks, as ``du``), and the median
and range (min-max) of each.

The packages come from the site's pip configuration (here a local mirror);
with a remote index the download time adds to these figures, and pip's
cache (``~/.cache/pip``, kept between runs) makes the later runs faster
than a first build on a fresh host: run 1 is reported apart.

Run: ``.venv/bin/python benchmarks/bench_course_env.py [--requirements numpy pandas] [--repeat 3]``
(about a minute per build of numpy + ipykernel on 2 CPUs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from coursehub.courseenv.build import build_environment
from coursehub.courseenv.layout import env_paths
from coursehub.courseenv.requirements import parse_requirements, render_requirements

COURSE_ID = "bench-2025"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requirements", nargs="+", default=["numpy"], metavar="REQ")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    lines = parse_requirements("\n".join(args.requirements), "--requirements")
    with tempfile.TemporaryDirectory(prefix="bench-course-env-") as root:
        os.chmod(root, 0o755)  # as root the build runs as the sandbox account, which enters it
        paths = env_paths(root, COURSE_ID)
        paths.home.mkdir(parents=True)
        paths.requirements.write_text(render_requirements(lines))
        times, sizes = [], []
        for run in range(1, args.repeat + 1):
            t0 = time.perf_counter()
            state = build_environment(root, COURSE_ID)
            elapsed = time.perf_counter() - t0
            times.append(elapsed)
            sizes.append(state["size_bytes"] / 2**20)
            print(
                f"run {run}: {elapsed:6.1f} s, {sizes[-1]:6.1f} MiB "
                f"({', '.join(lines)} + ipykernel)"
            )
    print(
        f"build time: median {statistics.median(times):.1f} s, "
        f"range {min(times):.1f}-{max(times):.1f} s"
        f" (n={len(times)}; run 1 {times[0]:.1f} s)"
    )
    print(
        f"size: median {statistics.median(sizes):.1f} MiB, "
        f"range {min(sizes):.1f}-{max(sizes):.1f} MiB"
    )


if __name__ == "__main__":
    main()
