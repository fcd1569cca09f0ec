"""What the JupyterHub process loads: course profiles at spawn, spawners, GPUs, devices.

Loaded by ``jupyterhub`` (through the rendered ``jupyterhub_config.py``) and,
for :mod:`coursehub.spawn.busyactivity`, by each single-user server; never by
the course app or the command line. Imports only the small packages below it
(no Flask, SQLAlchemy or torch; the list is ``tests/test_import_arrows.py``'s).

Its modules and what each holds: docs/architecture.md.
"""
