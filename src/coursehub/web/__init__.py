"""The course web app: Flask pages, a JSON API and JupyterHub sign-in over the catalog.

:func:`coursehub.web.app.create_app` builds the app. See docs/architecture.md.
"""
