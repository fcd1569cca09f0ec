"""Names as people read them: French order, one identifier column, roster changes as old -> new."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from coursehub.catalog.names import collation_key, name_sort_key, same_identifiers, sort_by_name
from coursehub.catalog.roster.parse import RosterRow
from coursehub.catalog.roster.plan import IdentityChange, RosterPlan, RosterUpdate
from coursehub.catalog.roster.preview import FieldChange, plan_update_changes


def by_key(words):
    return sorted(words, key=collation_key)


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["Zola", "Çelik", "Cohen"], ["Çelik", "Cohen", "Zola"]),  # Ç with C, not after Z
        (["Eve", "Zadig", "Émile", "Ecole"], ["Ecole", "Émile", "Eve", "Zadig"]),
        (["Ozan", "Œuvray", "Odile"], ["Odile", "Œuvray", "Ozan"]),  # Œ as OE
        (["Strauss", "Straße", "Strasbourg"], ["Strasbourg", "Straße", "Strauss"]),  # ß as ss
        (["Ïsa", "Isaac", "Iris"], ["Iris", "Ïsa", "Isaac"]),
        (["durand", "Dupont", "dupont"], ["dupont", "Dupont", "durand"]),  # case breaks ties only
    ],
)
def test_names_sort_as_french_readers_expect(words, expected):
    assert by_key(words) == expected


def test_people_sort_by_last_name_then_first_name_then_username():
    people = [
        SimpleNamespace(username="p3", last_name="Érard", first_name="Zoé"),
        SimpleNamespace(username="p1", last_name="Zidane", first_name="Ali"),
        SimpleNamespace(username="p2", last_name="Erard", first_name="Anne"),
        SimpleNamespace(username="p0", last_name="Érard", first_name="Zoé"),
    ]
    assert [p.username for p in sort_by_name(people)] == ["p2", "p0", "p3", "p1"]
    assert name_sort_key("Çelik", "A") < name_sort_key("Dupont", "A")


def test_one_identifier_column_only_when_usernames_are_the_student_numbers():
    assert same_identifiers([("p2501001", "p2501001"), ("p2501002", "p2501002")])
    assert not same_identifiers([("p2501001", "p2501001"), ("jdupont", "p2501002")])


def row(n, username, last, first, email=None, group=None):
    return RosterRow(n, username, username, last, first, email, group)


def test_a_roster_update_shows_each_changed_field_as_old_to_new():
    plan = RosterPlan("mlmeca-2025", "add", None)
    plan.updates = [
        RosterUpdate(row(2, "p1", "Moreau-Durand", "Léa", group="G2"), ("last_name", "group")),
        RosterUpdate(row(3, "p2", "Petit", "Hugo", group="G1"), ("group",)),
    ]
    plan.identity_changes = [
        IdentityChange(2, "p1", (("last_name", "Moreau", "Moreau-Durand"),), True, True)
    ]
    changes = plan_update_changes(plan, {"p1": "G1", "p2": ""})
    assert changes[2] == [
        FieldChange("last_name", "Moreau", "Moreau-Durand"),
        FieldChange("group", "G1", "G2"),
    ]
    assert changes[3] == [FieldChange("group", None, "G1")]
    assert changes[2][0].label == "last name"


def test_an_old_value_the_importer_may_not_see_stays_hidden():
    plan = RosterPlan("mlmeca-2025", "add", None)
    plan.updates = [RosterUpdate(row(2, "p1", "Martin", "Léa"), ("last_name",))]
    plan.identity_changes = [
        IdentityChange(2, "p1", (("last_name", None, "Martin"),), False, False)
    ]
    assert plan_update_changes(plan, {}) == {2: [FieldChange("last_name", None, "Martin", False)]}
