"""An exam's clock settings: when the exam clock warns, and whether full screen is required.

Stored on the exam (``exams.warn_before_min``, ``exams.fullscreen``,
migration ``0017``), given by ``coursehub exam create``/``update``, the API
(``POST``/``PATCH .../exams/{a}``) and the proctor's page, and sent with the
student's sitting (``GET .../exams/{a}/sittings/{u}``) to the exam server,
whose clock (:mod:`coursehub.examroom.clock`, ``labextension/``) applies them:

``warn_before_min``
    minutes before the student's end when the clock turns orange and raises
    its JupyterLab notification; 0: no warning; at most the exam's
    ``duration_min``. Default :data:`DEFAULT_WARN_BEFORE_MIN`.
``fullscreen``
    ``offered`` (a "Full screen" button in the clock) or ``required`` (the
    clock covers the workspace with an overlay until the student enters full
    screen, and again whenever they leave it: browsers enter full screen only
    from a user gesture, MDN "Element: requestFullscreen() method", so the
    overlay's button is that gesture). Leaving full screen is an exam event
    either way. Default ``offered``.
"""

from __future__ import annotations

from typing import Any

from coursehub.errors import UsageError

#: Minutes before the end when the clock warns, unless the exam says otherwise.
DEFAULT_WARN_BEFORE_MIN = 5
#: The values of ``fullscreen``; the first is the default.
FULLSCREEN_MODES = ("offered", "required")
DEFAULT_FULLSCREEN = FULLSCREEN_MODES[0]


def parse_warn_before(value: Any, duration_min: int) -> int:
    """Return ``warn_before_min`` (minutes, an int or its text) for an exam of ``duration_min``
    minutes; None: the default, 5 (the duration when shorter).

    Raises
    ------
    UsageError
        ``warn_before_min``: not a whole number, below 0, or more than the
        exam's ``duration_min`` (``warn_before_min: must be 0 to 120 minutes
        (the exam's duration; 0: no warning), got 150``).
    """
    if value is None:
        return min(DEFAULT_WARN_BEFORE_MIN, duration_min)
    try:
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise ValueError
        minutes = int(value.strip()) if isinstance(value, str) else value
    except ValueError:
        raise UsageError(
            f"warn_before_min: must be a whole number of minutes, got {value!r}"
        ) from None
    if not 0 <= minutes <= duration_min:
        raise UsageError(
            f"warn_before_min: must be 0 to {duration_min} minutes (the exam's duration; "
            f"0: no warning), got {minutes}"
        )
    return minutes


def parse_fullscreen(value: Any) -> str:
    """Return ``fullscreen``: ``offered`` or ``required`` (None: ``offered``; case and spaces
    ignored).

    Raises
    ------
    UsageError
        ``fullscreen``: any other value (``fullscreen: must be offered or required, got 'yes'``).
    """
    if value is None:
        return DEFAULT_FULLSCREEN
    mode = value.strip().lower() if isinstance(value, str) else value
    if mode not in FULLSCREEN_MODES:
        raise UsageError(f"fullscreen: must be {' or '.join(FULLSCREEN_MODES)}, got {value!r}")
    return str(mode)


def describe_settings(warn_before_min: int, fullscreen: str) -> str:
    """``warning 5 min before the end, full screen offered`` (``no warning`` for 0)."""
    warning = f"warning {warn_before_min} min before the end" if warn_before_min else "no warning"
    return f"{warning}, full screen {fullscreen}"


def settings_note(warn_before_min: int | None, fullscreen: str | None) -> str:
    """``", warning 10 min before the end, full screen required"`` for an exam's one-line
    summary; ``""`` when both are the defaults (or not set yet)."""
    if warn_before_min is None or fullscreen is None:
        return ""
    if (warn_before_min, fullscreen) == (DEFAULT_WARN_BEFORE_MIN, DEFAULT_FULLSCREEN):
        return ""
    return ", " + describe_settings(warn_before_min, fullscreen)
