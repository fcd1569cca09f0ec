"""Errors that users can meet, shown by the CLI and the web app without a traceback."""


class CoursehubError(Exception):
    """A problem caused by the user's input or environment, with a message that says what to fix.

    The command line prints ``coursehub: error: <message>`` and exits with
    status 2; nothing on disk has been changed when it is raised.
    """


class UsageError(CoursehubError):
    """A command-line argument, file or parameter that is out of range or malformed."""
