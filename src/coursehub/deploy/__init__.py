"""``coursehub deploy``: a Debian 12 host made into a department hub, idempotently.

:mod:`coursehub.deploy.layout` says where everything goes (every path below
``--root``); :mod:`coursehub.deploy.units` renders the systemd units (pure);
:mod:`coursehub.deploy.files` plans and writes files, secrets once;
:mod:`coursehub.deploy.host` holds the steps that run commands (TLS pair,
PostgreSQL role and database, catalog migration, ``coursehub doctor``);
:mod:`coursehub.deploy.cli` is the command. See docs/deploy.md.
"""
