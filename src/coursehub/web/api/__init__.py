"""The JSON API under ``/api/v1/``, one blueprint per subject; see ``docs/architecture.md``."""
