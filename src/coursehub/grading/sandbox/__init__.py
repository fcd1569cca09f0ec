"""The sandbox of a student's kernel when nbgrader autogrades; see docs/architecture.md."""
