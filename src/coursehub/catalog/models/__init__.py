"""The catalog's tables, one module per subject: see docs/architecture.md."""
