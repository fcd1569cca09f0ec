"""LTI 1.3 on the catalog's side, one module per step: see docs/architecture.md."""
