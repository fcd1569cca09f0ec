"""Find a person across courses: admins search everyone, team members their own courses."""

from __future__ import annotations

from flask import Blueprint, abort, g, render_template, request
from sqlalchemy import select
from sqlalchemy.orm import Session

from coursehub.catalog.models import TEAM_ROLES, Membership, Person
from coursehub.catalog.people import PersonCourse, courses_of, search_people
from coursehub.web.database import get_session
from coursehub.web.forms import SearchForm
from coursehub.web.identity import Identity
from coursehub.web.views import form_status

bp = Blueprint("people", __name__)


def team_course_pks(session: Session, identity: Identity) -> set[int]:
    """Return the ids of the courses where ``identity`` is lead, teacher or grader."""
    query = (
        select(Membership.course_pk)
        .join(Membership.person)
        .where(Person.username == identity.name, Membership.role.in_(list(TEAM_ROLES)))
    )
    return set(session.scalars(query))


def plan_results(
    people: list[Person], courses: dict[int, list[PersonCourse]], course_pks: set[int] | None
) -> list[tuple[Person, list[PersonCourse]]]:
    """Keep each person's courses (``courses`` by person id) in ``course_pks`` (None: all);
    drop the people left with none."""
    results = []
    for person in people:
        mine = courses.get(person.id, [])
        kept = [c for c in mine if course_pks is None or c.course_pk in course_pks]
        if kept:
            results.append((person, kept))
    return results


@bp.get("/people/")
def search() -> tuple[str, int]:
    """Search form and results; only memberships in courses the user manages or grades."""
    session = get_session()
    identity: Identity = g.identity
    scope = None if identity.admin else team_course_pks(session, identity)
    if scope is not None and not scope:
        abort(403, description="only admins and teaching teams may search for people")
    form = SearchForm(request.args)
    results = None
    if request.args.get("q") is not None and form.validate():
        people = search_people(session, form.q.data or "", limit=200 if scope is None else 1000)
        results = plan_results(people, courses_of(session, people), scope)[:50]
    return render_template("people/search.html", form=form, results=results), form_status(form)
