"""coursehub's settings for every single-user server (see coursehub.spawn.jupytertools).

JupyterLab reads its setting overrides (``overrides.json``) from
``LabApp.app_settings_dir``: this one holds the File menu's "Courses" entry.
It replaces ``<sys.prefix>/share/jupyter/lab/settings``; a site's own
overrides go into ``lab-settings/overrides.json`` next to this file.
"""

import os

c = get_config()  # type: ignore[name-defined]  # noqa: F821
c.LabApp.app_settings_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lab-settings")
