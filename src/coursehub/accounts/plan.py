"""What ``coursehub accounts sync`` would do, planned from the rosters and the host (pure).

Design: an account is created for every roster username that has none; every
course's two Unix groups (:func:`coursehub.coursedata.folders.unix_group_name`)
get exactly the course's team and students as members. An account made by
coursehub carries :data:`ACCOUNT_COMMENT` in its GECOS field, so that one whose
owner left every course is recognised and *reported*, never removed: its home
may hold the only copy of a student's work (useradd(8), userdel(8)).

A catalog username is used as a Unix name only when it is a safe one
(:func:`unsafe_reason`): Debian's rule for user names (useradd(8), "CAVEATS":
lower-case letters, digits, ``_`` and ``-``, starting with a letter or ``_``,
at most 32 characters), and not an existing system account (uid below
:data:`FIRST_UID`, login.defs(5) ``UID_MIN``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from coursehub.coursedata.ensure import Roster
from coursehub.coursedata.folders import unix_group_name

#: GECOS comment of the accounts coursehub creates (``useradd --comment``).
ACCOUNT_COMMENT = "coursehub account"
#: Safe Unix user names: Debian's useradd(8) rule without the trailing ``$`` of machine accounts.
SAFE_NAME_RE = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
#: First uid of a person's account (Debian's login.defs ``UID_MIN``).
FIRST_UID = 1000


def unsafe_reason(username: str, existing_uid: int | None) -> str:
    """Return why ``username`` may not be a student's Unix account, or "" (pure).

    Parameters
    ----------
    username
        A catalog username (already lower case).
    existing_uid
        The uid of an existing account of that name, or None.
    """
    if not SAFE_NAME_RE.fullmatch(username):
        return "not a safe Unix name (useradd(8): 1-32 of a-z 0-9 _ -, starting with a letter or _)"
    if existing_uid is not None and existing_uid < FIRST_UID:
        return f"a system account (uid {existing_uid})"
    return ""


@dataclass(frozen=True)
class HostAccount:
    """An existing account as the plan needs it: uid, GECOS comment, home and its mode."""

    uid: int
    comment: str
    home: str
    home_mode: int | None


@dataclass(frozen=True)
class GroupChange:
    """A course group to create or whose members change: the full new list and the difference."""

    group: str
    create: bool
    members: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]


@dataclass(frozen=True)
class AccountPlan:
    """What ``accounts sync`` changes; empty lists: the host is in step with the catalog.

    Attributes
    ----------
    create
        Accounts to create (``useradd``).
    private_homes
        Homes of coursehub's accounts whose mode is not 0700 (``chmod``).
    groups
        Course groups to create or to give a new member list (``groupadd``, ``gpasswd -M``).
    refused
        ``(username, reason)`` of roster usernames that get no account.
    left
        coursehub's accounts in no roster any more: reported, kept with their home.
    """

    create: tuple[str, ...] = ()
    private_homes: tuple[str, ...] = ()
    groups: tuple[GroupChange, ...] = ()
    refused: tuple[tuple[str, str], ...] = ()
    left: tuple[str, ...] = field(default=())

    @property
    def changes(self) -> int:
        """Number of changes the plan makes (refusals and leavers are not changes)."""
        return len(self.create) + len(self.private_homes) + len(self.groups)


def _group_changes(
    rosters: Iterable[Roster], usable: set[str], groups: Mapping[str, tuple[str, ...]]
) -> list[GroupChange]:
    changes = []
    for roster in rosters:
        team = set(roster.team) & usable
        students = (set(roster.students) - set(roster.team)) & usable
        for role, members in (("team", team), ("students", students)):
            name = unix_group_name(roster.course_id, role)
            current = set(groups.get(name, ()))
            if name in groups and current == members:
                continue
            changes.append(
                GroupChange(
                    group=name,
                    create=name not in groups,
                    members=tuple(sorted(members)),
                    added=tuple(sorted(members - current)),
                    removed=tuple(sorted(current - members)),
                )
            )
    return changes


def plan_accounts(
    rosters: Iterable[Roster],
    accounts: Mapping[str, HostAccount],
    groups: Mapping[str, tuple[str, ...]],
) -> AccountPlan:
    """Return the plan that brings the host in step with ``rosters`` (pure).

    Parameters
    ----------
    rosters
        Every course's roster (usernames lower case).
    accounts
        The host's accounts by name (all of them, or at least those of the
        rosters and those carrying :data:`ACCOUNT_COMMENT`).
    groups
        The host's groups by name: their member lists (``/etc/group``).
    """
    rosters = list(rosters)
    wanted = sorted({u for r in rosters for u in r.team | r.students})
    refused = []
    usable: set[str] = set()
    for name in wanted:
        account = accounts.get(name)
        reason = unsafe_reason(name, account.uid if account else None)
        if reason:
            refused.append((name, reason))
        else:
            usable.add(name)
    return AccountPlan(
        create=tuple(sorted(u for u in usable if u not in accounts)),
        private_homes=tuple(
            sorted(
                u
                for u in usable
                if u in accounts
                and accounts[u].comment == ACCOUNT_COMMENT
                and accounts[u].home_mode not in (None, 0o700)
            )
        ),
        groups=tuple(_group_changes(rosters, usable, groups)),
        refused=tuple(refused),
        left=tuple(
            sorted(
                name
                for name, a in accounts.items()
                if a.comment == ACCOUNT_COMMENT and name not in wanted
            )
        ),
    )


def render_plan(plan: AccountPlan) -> str:
    """Return the plan as lines for a person (pure): counts first, then each change."""
    lines = [
        f"accounts to create: {len(plan.create)}; homes to make private: "
        f"{len(plan.private_homes)}; course groups to change: {len(plan.groups)}"
    ]
    lines += [f"  create {u} (locked password, home 0700)" for u in plan.create]
    lines += [f"  chmod 0700 the home of {u}" for u in plan.private_homes]
    for g in plan.groups:
        verb = "create" if g.create else "change"
        diff = [f"+{u}" for u in g.added] + [f"-{u}" for u in g.removed]
        lines.append(f"  {verb} group {g.group}: {' '.join(diff) if diff else '(no members)'}")
    for name, reason in plan.refused:
        lines.append(f"refused {name}: {reason}")
    if plan.left:
        lines.append(f"in no course any more (kept, with their homes): {', '.join(plan.left)}")
    if not plan.changes:
        lines.append("nothing to change")
    return "\n".join(lines)
