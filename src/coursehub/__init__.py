"""coursehub: a self-hosted JupyterHub course environment for teaching computational AI.

The package is cut into parts (see ``docs/architecture.md``): ``resources`` (CPU, memory,
thread and GPU facts of the running process), ``pendulum`` (the reference
teaching workload), and the command line in ``coursehub.cli``. Heavy libraries
(torch, scipy, matplotlib) are imported only inside the parts that need them,
so that ``import coursehub`` and ``coursehub --help`` stay fast.
"""

__version__ = "0.1.0"
