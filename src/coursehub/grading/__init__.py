"""nbgrader per course: courses, exchange, gradebooks, autograde; see docs/architecture.md."""
