"""Each course's formgrader, a JupyterHub service; see docs/architecture.md."""
