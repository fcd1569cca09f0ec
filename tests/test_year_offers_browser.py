"""Real Chromium: copy and rollover offer only later, existing, open years and say why the
rest is missing; a web rollover is previewed, then confirmed; an unknown portal manager or
course lead is reported under its own field; the header and the years table read well."""

from __future__ import annotations

import re

from appbrowser import BROWSER_MARKS

pytestmark = BROWSER_MARKS
NOT_KNOWN = "is not a known person"


def year_row(page, label: str):
    """The row of the Administration's years table whose Year cell reads ``label``."""
    table = page.get_by_role("region", name="Academic years").get_by_role("table")
    return table.get_by_role("row").filter(has=page.get_by_role("cell", name=label, exact=True))


def test_years_offer_only_later_existing_years_and_a_rollover_is_previewed_then_confirmed(
    serve, browser, sync_api
):
    expect = sync_api.expect
    with serve("root", admin=True) as base:
        page = browser.new_page()
        page.goto(base + "/courses/mlmeca-2025/")
        expect(page.get_by_role("button", name="Copy to next year")).to_have_count(0)
        expect(page.get_by_text('No "Copy to next year"')).to_contain_text(
            "2026-2027 does not exist yet: an admin creates 2026-2027 first"
        )

        page.get_by_role("link", name="Administration").click()
        year_row(page, "2025-2026").get_by_role("button", name="Make 2025-2026 current").click()
        page.get_by_text("2025-2026 is the current academic year.").wait_for()
        expect(
            year_row(page, "2025-2026").get_by_role("cell", name="current", exact=True)
        ).to_be_visible()
        page.get_by_label("New academic year").fill("2026-2027")
        page.get_by_role("button", name="Create year").click()
        page.get_by_text("Academic year 2026-2027 created.").wait_for()
        expect(
            year_row(page, "2026-2027").get_by_role("cell", name="open", exact=True)
        ).to_be_visible()
        expect(
            year_row(page, "2026-2027").get_by_role("cell", name="current", exact=True)
        ).to_have_count(0)

        expect(page.get_by_label("Roll 2025-2026 over to").locator("option")).to_have_text(
            ["2026-2027"]
        )
        expect(page.get_by_label("Roll 2026-2027 over to")).to_have_count(0)
        expect(page.get_by_role("button", name="Preview rollover of 2026-2027")).to_have_count(0)
        expect(year_row(page, "2026-2027")).to_contain_text(
            "No rollover of 2026-2027: 2027-2028 does not exist yet: "
            "an admin creates 2027-2028 first"
        )

        year_row(page, "2025-2026").get_by_role(
            "button", name="Preview rollover of 2025-2026"
        ).click()
        expect(page.get_by_role("heading", name="Roll over 2025-2026 to 2026-2027")).to_be_visible()
        expect(page.get_by_text("Nothing is copied yet")).to_be_visible()
        steps = page.get_by_role("listitem").filter(has_text="would copy")
        expect(steps).to_have_count(2)
        expect(steps.filter(has_text="mlmeca-2025")).to_contain_text("mlmeca-2026")
        expect(steps.filter(has_text="other-2025")).to_contain_text("other-2026")
        elsewhere = browser.new_page()
        response = elsewhere.goto(base + "/courses/mlmeca-2026/")
        assert response is not None and response.status == 404
        elsewhere.close()

        page.get_by_role("button", name="Confirm: roll over 2025-2026 to 2026-2027").click()
        page.get_by_text("Rolled over 2025-2026 to 2026-2027: copied").wait_for()
        expect(page.get_by_role("heading", name="Administration")).to_be_visible()
        expect(
            year_row(page, "2026-2027").get_by_role("cell", name="2", exact=True)
        ).to_be_visible()
        page.goto(base + "/courses/mlmeca-2026/")
        expect(page.get_by_role("heading", name="MLMECA · Machine learning")).to_be_visible()
        expect(page.get_by_role("button", name="Copy to next year")).to_have_count(0)
        expect(page.get_by_text('No "Copy to next year"')).to_contain_text(
            "2027-2028 does not exist yet: an admin creates 2027-2028 first"
        )
        page.close()

    with serve("mbuffat") as base:
        page = browser.new_page()
        page.goto(base + "/courses/mlmeca-2025/")
        expect(page.locator(".user-box")).to_contain_text("Marc Buffat")
        # the rollover copied it already: no button that would copy nothing
        expect(page.get_by_role("button", name="Copy to next year")).to_have_count(0)
        expect(page.get_by_text('No "Copy to next year"')).to_contain_text(
            "2026-2027 already has it"
        )
        page.close()


def test_an_unknown_portal_manager_or_lead_is_shown_under_its_own_field(serve, browser, sync_api):
    expect = sync_api.expect
    with serve("root", admin=True) as base:
        page = browser.new_page()
        page.goto(base + "/")
        page.get_by_role("link", name="Administration").click()
        page.get_by_role("link", name="MECA").click()

        manager = page.get_by_label("Add a manager (hub username)")
        expect(manager).not_to_have_attribute("aria-invalid", "true")
        manager.fill("jdoe")
        page.get_by_role("button", name="Add manager").click()
        manager = page.get_by_label("Add a manager (hub username)")
        expect(manager).to_have_attribute("aria-invalid", "true")
        expect(manager).to_have_accessible_description(
            re.compile(f"portal manager 'jdoe' {NOT_KNOWN}")
        )
        expect(manager).to_have_value("jdoe")
        expect(page.get_by_role("region", name="Managers")).to_contain_text(NOT_KNOWN)
        expect(page.get_by_text("jdoe manages portal MECA.")).to_have_count(0)

        page.get_by_role("link", name="New course in MECA").click()
        page.get_by_label("UE code").fill("WAVES")
        page.get_by_label("Academic year").select_option("2025-2026")
        page.get_by_label("Title").fill("Waves")
        page.get_by_label("Lead (hub username)").fill("jdoe")
        page.get_by_role("button", name="Create course").click()
        page.get_by_text("Please correct the fields marked below.").wait_for()
        lead = page.get_by_label("Lead (hub username)")
        code = page.get_by_label("UE code")
        expect(lead).to_have_attribute("aria-invalid", "true")
        expect(lead).to_have_accessible_description(re.compile(f"lead 'jdoe' {NOT_KNOWN}"))
        expect(code).not_to_have_attribute("aria-invalid", "true")
        expect(code).not_to_have_accessible_description(re.compile(NOT_KNOWN))
        expect(code).to_have_value("WAVES")
        page.close()
