"""Which years a course may be copied to, or a year rolled over to, and why not (pure).

A copy or a rollover goes forward: to an open year, later than the source,
that exists. The pages offer only those targets, nearest first, and when
there is none they say why (the next year does not exist yet, or is
archived) instead of offering a button that fails.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from coursehub.catalog.courses import parse_year_label


@dataclass(frozen=True)
class YearOffer:
    """The years a copy from ``source`` may go to (nearest first), else why there is none."""

    source: str
    targets: tuple[str, ...]
    reason: str = ""

    @property
    def next_year(self) -> str:
        """The label of the year after :attr:`source` (``"2025-2026"`` -> ``"2026-2027"``)."""
        start = parse_year_label(self.source) + 1
        return f"{start}-{start + 1}"


def plan_year_offer(source: str, years: Iterable[tuple[str, bool]]) -> YearOffer:
    """Return the targets of a copy or rollover from the year ``source`` (pure).

    Parameters
    ----------
    source
        The label of the year copied from, e.g. ``"2025-2026"``.
    years
        ``(label, is_active)`` of every academic year of the catalog.

    Returns
    -------
    YearOffer
        The open years later than ``source``, nearest first; with none, a
        ``reason`` that names the next year and what to do first.
    """
    start = parse_year_label(source)
    known = {label: active for label, active in years}
    targets = tuple(
        sorted(
            (
                label
                for label, active in known.items()
                if active and parse_year_label(label) > start
            ),
            key=parse_year_label,
        )
    )
    offer = YearOffer(source, targets)
    if targets:
        return offer
    following = offer.next_year
    if following in known:
        why = f"{following} is archived: an admin restores it first (Administration)"
    else:
        why = f"{following} does not exist yet: an admin creates {following} first (Administration)"
    return YearOffer(source, targets, f"no copy of {source} to a later year: {why}")


def plan_year_offers(years: Iterable[tuple[str, bool]]) -> dict[str, YearOffer]:
    """Return :func:`plan_year_offer` for every year of ``(label, is_active)`` (pure)."""
    years = list(years)
    return {label: plan_year_offer(label, years) for label, _ in years}
