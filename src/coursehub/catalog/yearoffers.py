"""Which years a course may be copied to, or a year rolled over to, and why not (pure).

A copy or a rollover goes forward: to an open year, later than the source,
that exists, and that does not hold the copy already (a course of the same
UE code; for a rollover, every course of the source year). The pages offer
only those targets, nearest first, and when there is none they say why (the
next year does not exist yet, is archived, or already holds the copy) instead
of offering a button that fails or copies nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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


def plan_year_offer(
    source: str,
    years: Iterable[tuple[str, bool]],
    codes: Iterable[str] = (),
    held: Mapping[str, set[str]] | None = None,
) -> YearOffer:
    """Return the targets of a copy or rollover from the year ``source`` (pure).

    Parameters
    ----------
    source
        The label of the year copied from, e.g. ``"2025-2026"``.
    years
        ``(label, is_active)`` of every academic year of the catalog.
    codes
        The UE codes copied: one course's, or every course of ``source`` for a
        rollover (none: nothing is left out for being there already).
    held
        The UE codes each year holds, by label
        (:func:`coursehub.catalog.queries.codes_by_year`).

    Returns
    -------
    YearOffer
        The open years later than ``source``, nearest first; with none, a
        ``reason`` that names the next year and what to do first.
    """
    start = parse_year_label(source)
    known = {label: active for label, active in years}
    later = sorted(
        (label for label, active in known.items() if active and parse_year_label(label) > start),
        key=parse_year_label,
    )
    wanted, held = set(codes), held or {}
    done = [label for label in later if wanted and wanted <= held.get(label, set())]
    targets = tuple(label for label in later if label not in done)
    offer = YearOffer(source, targets)
    if targets:
        return offer
    following = offer.next_year
    if done:
        why = f"{', '.join(done)} already {'has' if len(done) == 1 else 'have'} it"
    elif following in known:
        why = f"{following} is archived: an admin restores it first"
    else:
        why = f"{following} does not exist yet: an admin creates {following} first"
    return YearOffer(source, targets, f"no copy of {source} to a later year: {why}")


def plan_year_offers(
    years: Iterable[tuple[str, bool]], held: Mapping[str, set[str]] | None = None
) -> dict[str, YearOffer]:
    """Return the rollover offer of every year of ``(label, is_active)`` (pure).

    A rollover copies every course of its year, so a later year that holds
    all their codes (``held``, as in :func:`plan_year_offer`) is not offered.
    """
    years, held = list(years), held or {}
    return {
        label: plan_year_offer(label, years, held.get(label, set()), held) for label, _ in years
    }
