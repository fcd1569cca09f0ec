"""An exam's allowed imports: the top-level modules its exam kernels may import.

Stored on the exam (``exams.allowed_imports``, migration ``0014``) as
comma-separated top-level names, read by the hub at spawn and given to the
exam kernels (``coursehub.examroom.guard``), which add the standard library.
"""

from __future__ import annotations

from coursehub.errors import UsageError


def parse_import_list(text: str | None) -> str | None:
    """Return ``"numpy, pandas.core"`` as ``"numpy,pandas"`` (top-level names); None for none.

    Raises
    ------
    UsageError
        A name that is not a dotted Python identifier, named (``allowed_imports: 'sci-py' ...``).
    """
    names = [name.strip() for name in (text or "").split(",") if name.strip()]
    for name in names:
        if not all(part.isidentifier() for part in name.split(".")):
            raise UsageError(f"allowed_imports: {name!r} is not a module name")
    tops = dict.fromkeys(name.split(".")[0] for name in names)
    return ",".join(tops) or None
