"""A course's material from git: a mirror per course on the course app's host, pulled by students.

See docs/material.md; its modules and what each holds: docs/architecture.md.
"""
