"""The course catalog: years, portals, courses, people, roles; see docs/architecture.md."""
