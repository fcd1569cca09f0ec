"""Per-student home quotas enforced by the file system (docs/homes.md).

Its modules and what each holds: docs/architecture.md.
"""
