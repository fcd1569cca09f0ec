"""Admin side of JupyterHub: REST client, catalog-to-hub sync, configuration rendering.

:mod:`coursehub.hub.hubclient` talks to the hub's REST API;
:mod:`coursehub.hub.sync` plans and applies the reconciliation of the catalog
into hub users, groups and group properties, and
:func:`coursehub.hub.sync.sync_catalog` is its one entry point (CLI, web app,
demo); :mod:`coursehub.hub.render` renders ``jupyterhub_config.py`` and
:mod:`coursehub.hub.config` is the ``coursehub hub config`` command;
:mod:`coursehub.hub.process` starts a hub subprocess (demo, tests);
:mod:`coursehub.hub.cli` is ``coursehub hub ...``. What the hub process itself
loads lives in :mod:`coursehub.spawn`. Nothing here but the CLI registration
and the config renderer is imported by ``coursehub --help``.
"""
