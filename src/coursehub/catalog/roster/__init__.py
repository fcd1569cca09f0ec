"""The roster pipeline: decode, parse, plan, preview, apply; see docs/architecture.md."""
