"""People's names as readers see them: "First Last", sorted by last name as in French (pure).

Order: last name, then first name, then username, each compared with the
Unicode Collation Algorithm (UTS #10, https://www.unicode.org/reports/tr10/)
and its default table (DUCET), through :mod:`pyuca`: a letter with an accent
sorts with its letter ("Émile" next to "Eve", "Çelik" among the C's, not after
"Z"), ligatures and "ß" as their letters ("Œ" as "OE", "ß" as "ss"), case only
breaks ties. CLDR's French collation is the root collation (only Canadian
French reverses accents), so DUCET is what a French reader expects.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def _collator() -> Any:
    from pyuca import Collator  # loads DUCET (allkeys.txt) once per process

    return Collator()


def collation_key(text: str) -> tuple[int, ...]:
    """Return the UCA sort key of ``text`` (DUCET): compare keys to sort as French readers do."""
    return tuple(_collator().sort_key(text))


def name_sort_key(last_name: str, first_name: str, username: str = "") -> tuple[Any, ...]:
    """Return the key sorting people by last name, first name, then username (UCA)."""
    return (collation_key(last_name), collation_key(first_name), collation_key(username))


def sort_by_name(items: list[Any]) -> list[Any]:
    """Return ``items`` (with ``last_name``, ``first_name``, ``username``) sorted by name."""
    return sorted(items, key=lambda i: name_sort_key(i.last_name, i.first_name, i.username))


def same_identifiers(pairs: list[tuple[str, str | None]]) -> bool:
    """Return whether every ``(username, student_number)`` pair has the two equal.

    A page then shows one column ("Student number") instead of two equal ones.
    An empty list counts as equal.
    """
    return all(username == number for username, number in pairs)
