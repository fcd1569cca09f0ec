"""Time from "Update now" to a student's pull, for a generated 50 MB private repository.

A private repository (incompressible random files, ``--size-mb`` in all, in
a ``notebooks`` folder) is served by ``git http-backend`` behind basic auth
(tests/material_gitserver.py). Each repetition: the teacher pushes a new
commit that changes one file, then we time ``run_update`` (fetch with the
token, checks, publish) plus a student's ``gitpuller`` into a home that
already holds the previous version (the usual case), and once a first
pull (a new server). Afterwards the student's environment and home, and the
whole published folder, are searched for the token.

Prints the median and a bootstrap 95 % interval of the median
(``numpy``, 2000 resamples).

Run: ``.venv/bin/python benchmarks/bench_material.py [--size-mb 50] [--repeat 7]``
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from coursehub.catalog.db import make_engine, session_factory
from coursehub.catalog.readmodel import load_course
from coursehub.catalog.schema import upgrade_database
from coursehub.material.credential import parse_credential
from coursehub.material.layout import MaterialLayout
from coursehub.material.service import run_update, set_course_material
from coursehub.spawn.material import plan_material_env
from coursehub.web.testing import seed_web_catalog
from material_gitserver import allow_loopback, commit_files, git, serve_git, teacher_repo

COURSE = "mlmeca-2025"


def interval(values: list[float]) -> tuple[float, float, float]:
    data = np.asarray(values)
    rng = np.random.default_rng(0)
    medians = np.median(rng.choice(data, size=(2000, data.size)), axis=1)
    return (
        float(np.median(data)),
        float(np.quantile(medians, 0.025)),
        float(np.quantile(medians, 0.975)),
    )


def pull(layout: MaterialLayout, home: Path) -> dict[str, str]:
    materials = {COURSE: {"repo": layout.pull_url(COURSE), "branch": "main", "target": "x"}}
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), **plan_material_env(materials)}
    target = home / f"{COURSE}-material"
    url = layout.pull_url(COURSE)
    cmd = [sys.executable, "-m", "nbgitpuller.pull", url, "main", str(target)]
    subprocess.run(cmd, env=env, cwd=home, check=True, capture_output=True)
    return env


def make_big_repository(root: Path, size_mb: int) -> tuple[Path, int, int]:
    """Serve a teacher's repository of ``size_mb`` random MiB under ``root``.

    Returns the teacher's clone, the number of files, and the bytes the bare
    repository takes on the server.
    """
    n_files = max(1, size_mb // 5)
    files = {f"notebooks/data{i}.bin": "" for i in range(n_files)}
    teacher = teacher_repo(root, "big", {"README.md": "x\n"})
    for name in files:
        path = teacher / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size_mb * 2**20 // n_files))
    git("add", "--all", cwd=teacher)
    git("commit", "--quiet", "-m", "data", cwd=teacher)
    git("push", "--quiet", "origin", "main", cwd=teacher)
    size = sum(p.stat().st_size for p in (root / "big.git").rglob("*") if p.is_file())
    return teacher, n_files, size


def time_updates(
    sessions: Any, layout: MaterialLayout, teacher: Path, home: Path, repeat: int
) -> tuple[float, float, list[float], dict[str, str]]:
    """Time the first update and pull, then ``repeat`` push-update-pull rounds (seconds).

    Returns the first update's and first pull's seconds, each round's, and
    the student's environment.
    """
    start = time.perf_counter()
    assert run_update(sessions, COURSE, layout).ok
    first_update = time.perf_counter() - start
    start = time.perf_counter()
    env = pull(layout, home)
    first_pull = time.perf_counter() - start
    times = []
    for i in range(repeat):
        commit_files(teacher, {"notebooks/tp.py": f"print({i})\n"}, f"tp {i}")
        git("push", "--quiet", "origin", "main", cwd=teacher)
        start = time.perf_counter()
        outcome = run_update(sessions, COURSE, layout)
        pull(layout, home)
        times.append(time.perf_counter() - start)
        assert outcome.ok and (home / f"{COURSE}-material" / "tp.py").read_text() == f"print({i})\n"
    return first_update, first_pull, times, env


def token_leaks(home: Path, layout: MaterialLayout, env: dict[str, str], token: str) -> list[str]:
    """Return the files of the student's home and of the published folder, and the
    variables of the student's environment, that hold ``token``."""
    found = [
        str(p)
        for folder in (home, layout.published)
        for p in folder.rglob("*")
        if p.is_file() and token.encode() in p.read_bytes()
    ]
    return found + [k for k, v in env.items() if token in v]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-material-"))
    try:
        root = work / "server"
        root.mkdir()
        teacher, n_files, size = make_big_repository(root, args.size_mb)
        token = "glpat-" + secrets.token_hex(16)
        url_db = f"sqlite:///{work / 'catalog.sqlite'}"
        engine = make_engine(url_db)
        upgrade_database(engine)
        seed_web_catalog(url_db)
        sessions = session_factory(engine)
        layout = MaterialLayout(work / "material")
        home = work / "student"
        home.mkdir()
        with allow_loopback(), serve_git(root, "deploy", token) as base:
            with sessions() as session:
                course = load_course(session, COURSE)
                credential = parse_credential(f"deploy:{token}".encode(), "bench")
                set_course_material(
                    session,
                    course,
                    layout,
                    f"{base}/big.git",
                    subdir="notebooks",
                    credential=credential,
                )
                session.commit()
            first_update, first_pull, times, env = time_updates(
                sessions, layout, teacher, home, args.repeat
            )
        found = token_leaks(home, layout, env, token)
        engine.dispose()
        median, low, high = interval(times)
        print(f"repository: {size / 2**20:.1f} MiB on the server ({n_files} random files)")
        print(
            f"first update (fetch + publish): {first_update:.2f} s; "
            f"first pull (new server): {first_pull:.2f} s"
        )
        print(
            f"update now -> student's pull, {args.repeat} runs: median {median:.2f} s "
            f"(95 % interval {low:.2f}-{high:.2f} s), "
            f"min {min(times):.2f} s, max {max(times):.2f} s"
        )
        print(
            "token found in the student's environment, home or the published folder: "
            f"{found or 'nothing'}"
        )
        return 1 if found else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
