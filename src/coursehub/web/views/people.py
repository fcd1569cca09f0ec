"""Find a person across courses: admins search everyone, the others within a scope.

A teaching-team member (lead, teacher, grader) sees every membership of
their own courses. A portal's manager sees every membership of the portal's
courses, and the teaching-team memberships of every course: they name the
leads of the portal's courses, who may teach elsewhere. Students never search.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import Blueprint, abort, g, render_template, request
from sqlalchemy.orm import Session

from coursehub.catalog.models.courses import TEAM_ROLES, Person
from coursehub.catalog.people import PersonCourse, courses_of, search_people
from coursehub.catalog.queries import managed_course_pks, team_course_pks
from coursehub.web.database import get_session
from coursehub.web.forms import SearchForm
from coursehub.web.identity import Identity
from coursehub.web.views.base import form_status

bp = Blueprint("people", __name__)

#: Shown to those who may not search.
REFUSAL = (
    "only admins, portal managers and teaching teams (lead, teacher, grader) may search for people"
)


@dataclass(frozen=True)
class SearchScope:
    """What a non-admin searcher sees: every membership in ``course_pks``, and with
    ``team_anywhere`` (a portal manager) the teaching-team memberships of every course."""

    course_pks: frozenset[int]
    team_anywhere: bool = False

    @property
    def empty(self) -> bool:
        """Whether the searcher sees nothing (then the page is refused)."""
        return not self.course_pks and not self.team_anywhere

    def keeps(self, membership: PersonCourse) -> bool:
        """Whether the searcher sees ``membership``."""
        if membership.course_pk in self.course_pks:
            return True
        return self.team_anywhere and membership.role in TEAM_ROLES


def load_scope(session: Session, identity: Identity) -> SearchScope | None:
    """Return what ``identity`` sees in a search (None: everything, for admins); two queries."""
    if identity.admin:
        return None
    portal_courses = managed_course_pks(session, identity.name)
    own = team_course_pks(session, identity.name)
    return SearchScope(frozenset(own | (portal_courses or set())), portal_courses is not None)


def plan_results(
    people: list[Person], courses: dict[int, list[PersonCourse]], scope: SearchScope | None
) -> list[tuple[Person, list[PersonCourse]]]:
    """Keep each person's courses (``courses`` by person id) that ``scope`` shows (None: all);
    drop the people left with none (pure)."""
    results = []
    for person in people:
        mine = courses.get(person.id, [])
        kept = [c for c in mine if scope is None or scope.keeps(c)]
        if kept:
            results.append((person, kept))
    return results


@bp.get("/people/")
def search() -> tuple[str, int]:
    """Search form and results, limited to what :func:`load_scope` shows the user."""
    session = get_session()
    identity: Identity = g.identity
    scope = load_scope(session, identity)
    if scope is not None and scope.empty:
        abort(403, description=REFUSAL)
    form = SearchForm(request.args)
    results = None
    if request.args.get("q") is not None and form.validate():
        people = search_people(session, form.q.data or "", limit=200 if scope is None else 1000)
        results = plan_results(people, courses_of(session, people), scope)[:50]
    return render_template("people/search.html", form=form, results=results), form_status(form)
