"""Usage in the catalog: trust, rollup, ingest and retention; see docs/architecture.md."""
