"""nbgrader per course: its modules and their public names are in docs/assignments.md."""
