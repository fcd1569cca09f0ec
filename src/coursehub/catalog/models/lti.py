"""LTI 1.3 in the catalog: LMS course contexts linked to courses, LMS accounts, used nonces.

An LMS (Moodle, Canvas...) launches the hub with an ``id_token`` whose
context claim names the LMS course (IMS LTI 1.3, section 5.4.1,
https://www.imsglobal.org/spec/lti/v1p3/#context-claim). Five tables:

``lti_links`` (:class:`LtiLink`)
    One row per LMS context (``issuer``, ``deployment_id``, ``context_id``).
    The first launch from an unknown context records it *pending*
    (``course_pk`` None) with the context's title and a random
    :attr:`LtiLink.code`. The code belongs to the newest Instructor who
    launched from the context (``instructor_subject``, ``instructor_username``):
    only that launch shows it, and only that person, as lead of a course,
    links the context with it (:func:`coursehub.catalog.lti.confirm.confirm_link_as_lead`);
    a hub admin links any pending context
    (:func:`coursehub.catalog.lti.links.confirm_link`). After that,
    launches from the context enrol people in that course. A context is
    linked to one course.
``lti_accounts`` (:class:`LtiAccount`)
    The LMS user (``issuer``, ``subject``: the ``sub`` claim, stable in the
    LMS) bound to a catalog person: a launch signs in as an existing account
    only through this binding (:mod:`coursehub.catalog.lti.identity`).
``lti_account_requests`` (:class:`LtiAccountRequest`)
    A launch refused because its username is an existing account that is
    not bound to the LMS user: kept (one per LMS user) until a hub admin or
    the lead of the course confirms the binding
    (:func:`coursehub.catalog.lti.confirm.confirm_account_request`).
``lti_nonces`` (:class:`LtiNonce`)
    Every launch's ``nonce``, until its ``id_token`` expires: a second
    launch with the same one is a replay (OpenID Connect Core 1.0, section
    15.5.2, https://openid.net/specs/openid-connect-core-1_0.html#NonceNotes).
``lti_grade_services`` (:class:`LtiGradeService`)
    A link's grade service (LTI Advantage AGS) as its newest launch names
    it, for grade passback (:mod:`coursehub.catalog.lti.ags`).

The functions on these tables: the modules of :mod:`coursehub.catalog.lti`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from coursehub.catalog.models.base import Base, UTCDateTime, utcnow
from coursehub.catalog.models.courses import Course, Person

#: Longest issuer, client, deployment and context identifier kept (LTI sets no bound;
#: Moodle's are URLs and small integers).
MAX_ID = 255


class LtiLink(Base):
    """An LMS course context and the course it is linked to (None while pending)."""

    __tablename__ = "lti_links"
    __table_args__ = (UniqueConstraint("issuer", "deployment_id", "context_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    issuer: Mapped[str] = mapped_column(String(MAX_ID))
    deployment_id: Mapped[str] = mapped_column(String(MAX_ID))
    context_id: Mapped[str] = mapped_column(String(MAX_ID))
    context_title: Mapped[str] = mapped_column(String(300), default="")
    code: Mapped[str] = mapped_column(String(16), unique=True)
    course_pk: Mapped[int | None] = mapped_column(
        ForeignKey("courses.id", ondelete="CASCADE"), index=True
    )
    first_launch_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    first_launch_by: Mapped[str] = mapped_column(String(128), default="")
    confirmed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    confirmed_by: Mapped[str | None] = mapped_column(String(128))
    #: The LMS user (``sub``) of the Instructor whose launch shows the code; None: no
    #: Instructor launched yet, only a hub admin links the context.
    instructor_subject: Mapped[str | None] = mapped_column(String(MAX_ID))
    #: The username that Instructor's launch named, and their name from the LMS.
    instructor_username: Mapped[str] = mapped_column(String(128), default="")
    instructor_name: Mapped[str] = mapped_column(String(300), default="")

    course: Mapped[Course | None] = relationship()

    @property
    def pending(self) -> bool:
        """Whether no course is linked yet."""
        return self.course_pk is None

    def __repr__(self) -> str:
        return f"LtiLink({self.context_title!r}, {self.code!r})"


class LtiAccount(Base):
    """The LMS user ``subject`` of ``issuer`` behind a catalog person."""

    __tablename__ = "lti_accounts"
    __table_args__ = (UniqueConstraint("issuer", "subject"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    issuer: Mapped[str] = mapped_column(String(MAX_ID))
    subject: Mapped[str] = mapped_column(String(MAX_ID))
    person_pk: Mapped[int] = mapped_column(ForeignKey("people.id", ondelete="CASCADE"), index=True)

    person: Mapped[Person] = relationship()


class LtiAccountRequest(Base):
    """A refused launch of LMS user ``subject`` as the existing account ``username``."""

    __tablename__ = "lti_account_requests"
    __table_args__ = (UniqueConstraint("issuer", "subject"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    issuer: Mapped[str] = mapped_column(String(MAX_ID))
    subject: Mapped[str] = mapped_column(String(MAX_ID))
    username: Mapped[str] = mapped_column(String(128))
    link_pk: Mapped[int | None] = mapped_column(
        ForeignKey("lti_links.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(300), default="")
    email: Mapped[str] = mapped_column(String(320), default="")
    requested_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    link: Mapped[LtiLink | None] = relationship()


class LtiNonce(Base):
    """A launch's nonce, kept until its ``id_token`` expires."""

    __tablename__ = "lti_nonces"
    __table_args__ = (UniqueConstraint("issuer", "nonce"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    issuer: Mapped[str] = mapped_column(String(MAX_ID))
    nonce: Mapped[str] = mapped_column(String(MAX_ID))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)


class LtiGradeService(Base):
    """The Assignment and Grade Services endpoint an LMS context's launches carry.

    Recorded at launch (:mod:`coursehub.catalog.lti.ags`) from the
    ``https://purl.imsglobal.org/spec/lti-ags/claim/endpoint`` claim (IMS
    LTI AGS 2.0, section 3.1): ``scopes`` space-separated, ``lineitems_url``
    the context's line items, ``lineitem_url`` the resource link's own (or
    ``""``); ``client_id`` the tool's at the platform (the launch's ``aud``)
    and ``token_url`` the platform's OAuth 2.0 token endpoint (``""`` when
    the registration names none).
    """

    __tablename__ = "lti_grade_services"

    id: Mapped[int] = mapped_column(primary_key=True)
    link_pk: Mapped[int] = mapped_column(
        ForeignKey("lti_links.id", ondelete="CASCADE"), unique=True
    )
    client_id: Mapped[str] = mapped_column(String(MAX_ID))
    token_url: Mapped[str] = mapped_column(String(1000), default="")
    lineitems_url: Mapped[str] = mapped_column(String(1000))
    lineitem_url: Mapped[str] = mapped_column(String(1000), default="")
    scopes: Mapped[str] = mapped_column(String(1000), default="")
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    link: Mapped[LtiLink] = relationship()
