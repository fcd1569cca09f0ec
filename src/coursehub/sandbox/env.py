"""The environment a sandboxed job gets: an allow-list, never a credential."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping

#: Variables passed on as they are (locale, paths, time zone, Python and Jupyter set-up).
ALLOWED_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "TMPDIR",
        "PYTHONPATH",
        "PYTHONHASHSEED",
        "PYTHONUNBUFFERED",
        "PYTHONIOENCODING",
        "PYTHONDONTWRITEBYTECODE",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "CONDA_DEFAULT_ENV",
        "JUPYTER_CONFIG_DIR",
        "JUPYTER_CONFIG_PATH",
        "JUPYTER_DATA_DIR",
        "JUPYTER_PATH",
        "JUPYTER_PLATFORM_DIRS",
        "MPLBACKEND",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "NVIDIA_VISIBLE_DEVICES",
        "COURSEHUB_N_THREADS",
        "COURSEHUB_GPU_MEM_FRACTION",
        "NBGRADER_EXECUTION",
        "JPY_SESSION_NAME",
    }
)
#: Prefixes passed on: locale categories, thread counts of the numeric libraries
#: (OpenMP API specification ``OMP_*``; MKL, OpenBLAS, numexpr, Accelerate and BLIS
#: documentation), coursehub's grading paths.
ALLOWED_PREFIXES = (
    "LC_",
    "OMP_",
    "MKL_",
    "OPENBLAS_",
    "NUMEXPR_",
    "VECLIB_",
    "BLIS_",
    "COURSEHUB_GRADING_",
)
#: Name patterns never passed on, even when allowed above (``fnmatch``, upper case).
SECRET_PATTERNS = (
    "*TOKEN*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*CREDENTIAL*",
    "*PRIVATE*",
    "*API_KEY*",
    "*ACCESS_KEY*",
    "*AUTH*",
    "*COOKIE*",
    "*DATABASE_URL*",
    "*_DSN",
)
#: Set to ``1`` in a process whose sandboxed jobs must get their own namespaces (a
#: course's formgrader run as its own account: a job with its uid and no namespaces
#: could rewrite the course's gradebook); mode ``none`` is then refused.
SANDBOX_REQUIRED_VAR = "COURSEHUB_SANDBOX_REQUIRED"


def sandbox_required(environ: Mapping[str, str]) -> bool:
    """Return whether ``environ`` asks for namespaces (:data:`SANDBOX_REQUIRED_VAR` is ``1``)."""
    return environ.get(SANDBOX_REQUIRED_VAR, "") == "1"


#: Variables the course app's ``coursehub grading autograde`` process needs to open the
#: catalog (:func:`coursehub.catalog.db.database_url`); never passed further down.
CATALOG_NAMES = ("COURSEHUB_DATABASE_URL", "COURSEHUB_DATA_DIR", "XDG_DATA_HOME")


def is_secret_name(name: str) -> bool:
    """Return True if the variable ``name`` looks like a credential (:data:`SECRET_PATTERNS`)."""
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in SECRET_PATTERNS)


def plan_sandbox_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Return the allow-listed part of ``environ`` for a sandboxed job (pure).

    Parameters
    ----------
    environ
        The environment of the process that starts the job.

    Returns
    -------
    dict
        The variables of :data:`ALLOWED_NAMES` or with a prefix of
        :data:`ALLOWED_PREFIXES`, minus any whose name matches
        :data:`SECRET_PATTERNS`. Everything else (``JUPYTERHUB_API_TOKEN``,
        ``JPY_API_TOKEN``, ``COURSEHUB_DATABASE_URL``, ``COURSEHUB_SECRET_KEY``,
        ``PGPASSWORD``, ``AWS_SECRET_ACCESS_KEY``, ...) is left out.
    """
    return {
        name: value
        for name, value in environ.items()
        if (name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)) and not is_secret_name(name)
    }


#: Variables naming the runner backend and the Slurm cluster of the course app's
#: ``coursehub grading autograde`` process (with Slurm, a batch is one job array that
#: this process submits and follows); never passed further down.
RUNNER_NAMES = (
    "COURSEHUB_RUNNER_BACKEND",
    "COURSEHUB_SLURM_PARTITION",
    "COURSEHUB_SLURM_ACCOUNT",
    "COURSEHUB_SLURM_QOS",
    "SLURM_CONF",
)


def plan_launch_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Return the environment of a ``coursehub grading autograde`` process started by the app.

    :func:`plan_sandbox_env` plus :data:`CATALOG_NAMES` (it reads the roster
    and profile from the catalog) and :data:`RUNNER_NAMES` (it submits the
    batch's job array on Slurm); it passes neither on to nbgrader.
    """
    env = plan_sandbox_env(environ)
    names = (*CATALOG_NAMES, *RUNNER_NAMES)
    env.update({name: environ[name] for name in names if name in environ})
    return env
