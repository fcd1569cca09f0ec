"""The HTML pages, one blueprint per subject; see ``docs/architecture.md``."""
