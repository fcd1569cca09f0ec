"""Backups of an installation: ``coursehub backup`` and ``coursehub restore`` (docs/backup.md)."""
