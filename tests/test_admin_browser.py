"""Real Chromium: an admin creates a year, a portal with a manager and a course; the course's
lead copies it to the next year; the manager rolls the portal over (nothing left to copy)."""

from __future__ import annotations

from appbrowser import BROWSER_MARKS

pytestmark = BROWSER_MARKS


def test_admin_sets_up_a_year_portal_and_course_then_the_lead_and_manager_roll_it_over(
    serve, browser
):
    with serve("root", admin=True) as base:
        page = browser.new_page()
        page.goto(base + "/")
        page.get_by_role("link", name="Administration").click()
        page.get_by_label("New academic year").fill("2026-2028")
        page.get_by_role("button", name="Create year").click()
        page.get_by_text("must be YYYY-YYYY with the second year the first + 1").wait_for()
        page.get_by_label("New academic year").fill("2026-2027")
        page.get_by_role("button", name="Create year").click()
        page.get_by_text("Academic year 2026-2027 created.").wait_for()
        page.get_by_label("Portal code").fill("PHYS")
        page.get_by_label("Portal title").fill("Physique")
        page.get_by_label("Manager (hub username, optional)").fill("gmartin")
        page.get_by_role("button", name="Create portal").click()
        page.get_by_text("Portal PHYS created.").wait_for()
        page.get_by_role("link", name="PHYS").click()
        page.get_by_role("link", name="New course in PHYS").click()
        page.get_by_label("UE code").fill("WAVES")
        page.get_by_label("Academic year").select_option("2025-2026")
        page.get_by_label("Title").fill("Waves")
        page.get_by_label("Lead (hub username)").fill("mbuffat")
        page.get_by_role("button", name="Create course").click()
        page.get_by_text("Course waves-2025 created.").wait_for()
        page.close()

    with serve("mbuffat") as base:
        page = browser.new_page()
        page.goto(base + "/courses/waves-2025/")
        page.get_by_role("button", name="Copy to next year (2026-2027)").click()
        page.get_by_text("Course waves-2025 copied to waves-2026.").wait_for()
        assert "mbuffat" in page.inner_text("section[aria-labelledby=team-title]")
        page.close()

    with serve("gmartin") as base:
        page = browser.new_page()
        page.goto(base + "/")
        page.get_by_role("link", name="My portals").click()
        page.get_by_role("link", name="Physique").click()
        page.get_by_label("Roll PHYS 2025-2026 over to").select_option("2026-2027")
        page.get_by_role("button", name="Preview rollover of PHYS 2025-2026").click()
        page.get_by_text("Nothing to copy.").wait_for()
        assert "waves-2026" in page.inner_text("ul.rollover-steps")
        response = page.goto(base + "/admin/")
        assert response is not None and response.status == 403
        assert "only a hub admin can administer academic years and portals" in page.inner_text(
            "main"
        )
        page.close()
