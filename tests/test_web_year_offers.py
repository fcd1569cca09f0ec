"""Years, copies and rollovers offer only what can succeed and say why the rest is missing;
a web rollover is previewed before it runs; a portal manager is a known person, as a lead;
the header names the signed-in person."""

from __future__ import annotations

import html
import re

from coursehub.catalog.yearoffers import plan_year_offer, plan_year_offers

LEAD_PAGE = "/courses/mlmeca-2025/"


def text_of(response) -> str:
    return html.unescape(response.get_data(as_text=True))


def words(response) -> str:
    """The page's text without tags, one space between words."""
    return " ".join(re.sub(r"<[^>]+>", " ", text_of(response)).split()).replace(" :", ":")


def create_year(pages, label: str, current: bool = False) -> None:
    data = {"label": label, **({"current": "1"} if current else {})}
    response = pages.post_form("/admin/years", "admin", data, form_page="/admin/")
    assert response.status_code == 302


def test_a_year_offers_the_later_open_years_nearest_first_else_says_why():
    years = [("2024-2025", True), ("2025-2026", True), ("2027-2028", True), ("2026-2027", True)]
    assert plan_year_offer("2025-2026", years).targets == ("2026-2027", "2027-2028")
    last = plan_year_offer("2027-2028", years)
    assert last.targets == () and "2028-2029 does not exist yet" in last.reason
    archived = plan_year_offer("2025-2026", [("2025-2026", True), ("2026-2027", False)])
    assert archived.targets == () and "2026-2027 is archived" in archived.reason
    assert set(plan_year_offers(years)) == {label for label, _ in years}


def test_a_year_that_holds_the_copy_already_is_not_offered_and_the_reason_says_so():
    years = [("2025-2026", True), ("2026-2027", True), ("2027-2028", True)]
    held = {"2025-2026": {"MLMECA", "NUMFLU"}, "2026-2027": {"MLMECA"}}
    assert plan_year_offer("2025-2026", years, ["MLMECA"], held).targets == ("2027-2028",)
    assert plan_year_offer("2025-2026", years, ["NUMFLU"], held).targets == (
        "2026-2027",
        "2027-2028",
    )
    rollover = plan_year_offers(years, held)["2025-2026"]  # NUMFLU is not in 2026-2027 yet
    assert rollover.targets == ("2026-2027", "2027-2028")
    both = {**held, "2026-2027": {"MLMECA", "NUMFLU"}, "2027-2028": {"MLMECA", "NUMFLU", "X"}}
    done = plan_year_offers(years, both)["2025-2026"]
    assert done.targets == ()
    assert (
        done.reason == "no copy of 2025-2026 to a later year: 2026-2027, 2027-2028 already have it"
    )


def test_copy_to_next_year_waits_for_that_year_and_the_page_says_so(pages):
    page = pages.text(LEAD_PAGE, "lead")
    assert "Copy to next year" not in html.unescape(page).split("No ")[0]
    assert "2026-2027 does not exist yet" in html.unescape(page)
    create_year(pages, "2026-2027")
    assert "Copy to next year (2026-2027)" in pages.text(LEAD_PAGE, "lead")


def test_administration_and_portal_offer_only_later_years(pages):
    admin = html.unescape(pages.text("/admin/", "admin"))
    assert "No rollover of 2025-2026: 2026-2027 does not exist yet" in admin
    create_year(pages, "2024-2025")
    create_year(pages, "2026-2027")
    admin = html.unescape(pages.text("/admin/", "admin"))
    assert "Roll 2025-2026 over to" in admin and "Roll 2026-2027 over to" not in admin
    assert "No rollover of 2026-2027: 2027-2028 does not exist yet" in admin
    row = admin.split('id="to-2025-2026"')[1].split("</select>")[0]
    assert "2026-2027" in row and "2024-2025" not in row
    portal = html.unescape(pages.text("/portals/MECA/", "admin"))
    copy = portal.split('id="copy-mlmeca-2025"')[1].split("</select>")[0]
    assert "2026-2027" in copy and "2024-2025" not in copy
    assert "Preview rollover of MECA 2025-2026" in portal
    assert "Preview rollover of MECA 2026-2027" not in portal


def test_a_rollover_to_an_earlier_year_is_refused(pages):
    create_year(pages, "2026-2027")
    response = pages.post_form(
        "/admin/years/2026-2027/rollover",
        "admin",
        {"to": "2025-2026", "confirm": "1"},
        form_page="/admin/",
    )
    shown = text_of(pages.get("/admin/", "admin"))
    assert response.status_code == 302
    assert "2025-2026 is before 2026-2027: courses are copied to a later year only" in shown


def test_a_web_rollover_is_previewed_then_confirmed(pages):
    create_year(pages, "2026-2027")
    preview = pages.post_form(
        "/admin/years/2025-2026/rollover", "admin", {"to": "2026-2027"}, form_page="/admin/"
    )
    shown = words(preview)
    assert preview.status_code == 200
    assert "Nothing is copied yet" in shown and "would copy: mlmeca-2025" in shown
    assert "Confirm: roll over 2025-2026 to 2026-2027" in shown
    assert pages.get("/courses/mlmeca-2026/", "admin").status_code == 404
    done = pages.post_form(
        "/admin/years/2025-2026/rollover",
        "admin",
        {"to": "2026-2027", "confirm": "1"},
        form_page="/admin/",
    )
    assert done.status_code == 302
    assert pages.get("/courses/mlmeca-2026/", "admin").status_code == 200
    portal = pages.post_form(
        "/portals/MECA/rollover",
        "admin",
        {"from": "2025-2026", "to": "2026-2027"},
        form_page="/portals/MECA/",
    )
    assert "already there: mlmeca-2025" in words(portal)
    assert "Nothing to copy." in text_of(portal)
    # once copied, neither the rollover nor the course's copy is offered again
    admin = html.unescape(pages.text("/admin/", "admin"))
    assert "Roll 2025-2026 over to" not in admin
    assert "No rollover of 2025-2026: 2026-2027 already has it" in admin
    lead = html.unescape(pages.text(LEAD_PAGE, "lead"))
    assert "Copy to next year" not in lead.split("No ")[0]
    assert "no copy of 2025-2026 to a later year: 2026-2027 already has it" in lead


def test_a_portal_manager_must_be_a_known_person_as_a_lead(pages, client):
    created = pages.post_form(
        "/admin/portals",
        "admin",
        {"code": "PHYS", "title": "Physique", "manager": "jdoe"},
        form_page="/admin/",
    )
    assert created.status_code == 400
    assert re.search(
        r'<input id="portal-manager"[^>]*value="jdoe" aria-invalid="true" '
        r'aria-describedby="portal-manager-error">'
        r'<p class="field-error" id="portal-manager-error">portal manager &#39;jdoe&#39; '
        r"is not a known person",
        created.get_data(as_text=True),
    )
    assert 'value="Physique"' in created.get_data(as_text=True)  # the typed title is kept
    shown = text_of(pages.get("/admin/", "admin"))
    assert "PHYS" not in shown and "Portal PHYS created." not in shown  # nothing half-made
    again = pages.post_form(
        "/admin/portals", "admin", {"code": "MECA", "title": ""}, form_page="/admin/"
    )
    assert again.status_code == 400
    assert 'id="portal-code-error">portal MECA already exists' in again.get_data(as_text=True)
    refused = pages.post_form(
        "/portals/MECA/managers", "admin", {"username": "jdoe"}, form_page="/portals/MECA/"
    )
    assert refused.status_code == 400
    assert re.search(
        r'<input id="manager-username"[^>]*value="jdoe" aria-invalid="true" '
        r'aria-describedby="manager-username-error">\s*<button[^>]*>Add manager</button>\s*'
        r'<p class="field-error" id="manager-username-error">portal manager &#39;jdoe&#39; '
        r"is not a known person",
        refused.get_data(as_text=True),
    )
    assert "jdoe manages" not in text_of(refused)
    api = client.put(
        "/api/v1/portals/MECA/managers/jdoe", headers={"Authorization": "token tok-admin"}
    )
    assert api.status_code == 404 and "portal manager 'jdoe'" in api.get_data(as_text=True)
    pages.post_form(
        "/portals/MECA/managers", "admin", {"username": "tdupont"}, form_page="/portals/MECA/"
    )
    assert "tdupont manages portal MECA." in text_of(pages.get("/portals/MECA/", "admin"))


def test_the_header_names_the_person_not_the_username_twice(pages):
    header = text_of(pages.get(LEAD_PAGE, "lead")).split('class="user-name"')[1].split("</span>")[0]
    assert "Marc Buffat" in header
    admin = text_of(pages.get("/admin/", "admin")).split('class="user-name"')[1]
    assert admin.split("<span")[0].split(">", 1)[1].strip() == "root"


def test_usage_marks_the_current_year(pages):
    create_year(pages, "2026-2027")
    pages.post_form("/admin/years/2025-2026/current", "admin", {}, form_page="/admin/")
    usage = " ".join(text_of(pages.get("/usage/", "admin")).split())
    assert "in 2025-2026" in usage and "2025-2026</strong> (current)" in usage
