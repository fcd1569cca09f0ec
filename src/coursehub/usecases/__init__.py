"""Commands that join several parts: a sync and its shares, an update and its book, a pipeline.

Each module declares one command row of :data:`coursehub.cli.COMMANDS`; see
docs/architecture.md.
"""
