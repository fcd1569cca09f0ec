"""JupyterHub side of coursehub: REST client, catalog-to-hub sync, course profiles for spawners.

:mod:`coursehub.hub.hubclient` talks to the hub's REST API;
:mod:`coursehub.hub.sync` reconciles the catalog into hub users, groups and
group properties; :mod:`coursehub.hub.cli` is ``coursehub hub ...``. Nothing
here is imported by ``coursehub --help``.
"""
