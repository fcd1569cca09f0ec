"""Roster import through the pages and the API: refused files, identity changes, confirmation."""

from __future__ import annotations

import html
import io
import re

from coursehub.web.rosterflow import RosterRequest, sign_preview
from coursehub.web.testing import IDENTITIES, identity_headers
from helpers import csrf_token

C = "/courses/mlmeca-2025"
TEACHER = identity_headers(IDENTITIES["teacher"])
ADMIN = identity_headers(IDENTITIES["admin"])
HEADER = "N° étudiant;Nom;Prénom;Courriel;Groupe\r\n"
#: p2509001 is Inès Garnier, a student of other-2025 (coursehub.web.testing.seed_web_catalog).
CROSS = HEADER + "p2509001;Garnier-Roux;Inès;ines@evil.example;G1\r\n"
NUL = HEADER + "p2600001;Mar\x00tin;Léa;lea@example.org;G1\r\n"


def upload(client, text: str, headers=TEACHER):
    page = client.get(f"{C}/roster", headers=headers).get_data(as_text=True)
    data = {
        "csrf_token": csrf_token(page),
        "mode": "add",
        "username_rule": "student_id",
        "roster": (io.BytesIO(text.encode("utf-8")), "roster.csv"),
    }
    return client.post(f"{C}/roster", data=data, headers=headers)


def confirm(client, preview_page: str, headers=TEACHER):
    payload = re.search(r'name="payload" type="hidden" value="([^"]+)"', preview_page)
    assert payload
    data = {"payload": payload.group(1), "csrf_token": csrf_token(preview_page)}
    return client.post(f"{C}/roster/confirm", data=data, headers=headers, follow_redirects=True)


def student(client, username: str) -> dict:
    members = client.get(f"/api/v1{C}/members", headers={"Authorization": "token tok-admin"})
    return next(m for m in members.get_json()["members"] if m["username"] == username)


def other_student(app) -> tuple[str, str, str]:
    from coursehub.catalog.models.courses import Person
    from coursehub.web.database import ENGINE_KEY

    with app.extensions[ENGINE_KEY].connect() as db:
        row = db.execute(
            Person.__table__.select().where(Person.__table__.c.username == "p2509001")
        ).one()
    return row.first_name, row.last_name, row.email


def test_a_nul_byte_is_refused_at_preview_with_its_row_and_column(client):
    response = upload(client, NUL)
    body = html.unescape(response.get_data(as_text=True))
    assert response.status_code == 400
    assert "row 2, column B (Nom): contains a control character (U+0000)" in body
    assert "Mar" not in body.split("contains a control character")[0][-200:]


def test_a_confirm_carrying_a_nul_byte_is_refused_not_a_500(client, app):
    page = client.get(f"{C}/roster", headers=TEACHER).get_data(as_text=True)
    req = RosterRequest(data=NUL.encode())
    token = sign_preview(app.config["SECRET_KEY"], "mlmeca-2025", req, "digest")
    data = {"payload": token, "csrf_token": csrf_token(page)}
    response = client.post(f"{C}/roster/confirm", data=data, headers=TEACHER)
    assert response.status_code == 400
    assert "contains a control character (U+0000)" in response.get_data(as_text=True)


def test_a_teacher_sees_the_rename_of_another_courses_student_marked_not_applied(client, app):
    preview = upload(client, CROSS)
    body = html.unescape(preview.get_data(as_text=True))
    assert preview.status_code == 200
    assert "last name: (not shown) → Garnier-Roux" in body  # another course's data stays hidden
    assert "Garnier →" not in body and "ines.garnier" not in body
    assert "not applied (hub admins only)" in body
    confirm(client, preview.get_data(as_text=True))
    assert other_student(app) == ("Inès", "Garnier", "ines.garnier@etu.example.org")
    assert student(client, "p2509001")["last_name"] == "Garnier"  # enrolled, identity kept


def test_an_admin_confirms_the_rename_on_the_preview(client, app):
    preview = upload(client, CROSS, headers=ADMIN)
    body = html.unescape(preview.get_data(as_text=True))
    assert "e-mail: ines.garnier@etu.example.org → ines@evil.example" in body
    assert "<td>applied</td>" in body
    confirm(client, preview.get_data(as_text=True), headers=ADMIN)
    assert other_student(app) == ("Inès", "Garnier-Roux", "ines@evil.example")


def test_the_api_keeps_identity_for_a_teacher_and_asks_an_admin_to_confirm(client, app):
    teacher = {"Authorization": "token tok-teacher"}
    admin = {"Authorization": "token tok-admin"}
    answer = client.post(f"/api/v1{C}/roster", json={"csv": CROSS}, headers=teacher)
    assert answer.status_code == 200
    assert answer.get_json()["identity_changes"] == [
        {
            "row": 2,
            "username": "p2509001",
            "changes": [
                {"field": "last_name", "old": None, "new": "Garnier-Roux"},
                {"field": "email", "old": None, "new": "ines@evil.example"},
            ],
            "applied": False,
            "old_shown": False,  # another course's student: their stored values are not shown
        }
    ]
    assert other_student(app)[1] == "Garnier"
    refused = client.post(f"/api/v1{C}/roster", json={"csv": CROSS}, headers=admin)
    assert refused.status_code == 409 and refused.get_json()["applied"] is False
    assert "confirm_identity_changes" in refused.get_json()["error"]
    assert other_student(app)[1] == "Garnier"
    body = {"csv": CROSS, "confirm_identity_changes": True}
    done = client.post(f"/api/v1{C}/roster", json=body, headers=admin)
    assert done.status_code == 200 and done.get_json()["applied"] is True
    assert other_student(app)[1] == "Garnier-Roux"


def test_the_api_refuses_a_roster_with_a_control_character_as_a_400(client):
    teacher = {"Authorization": "token tok-teacher"}
    answer = client.post(f"/api/v1{C}/roster", json={"csv": NUL}, headers=teacher)
    assert answer.status_code == 400
    assert answer.get_json()["problems"] == [
        "row 2, column B (Nom): contains a control character (U+0000)"
    ]


def test_the_members_api_refuses_a_name_with_a_control_character(client):
    teacher = {"Authorization": "token tok-teacher"}
    body = {"username": "p2600002", "first_name": "Jo\x00"}
    answer = client.post(f"/api/v1{C}/members", json=body, headers=teacher)
    assert answer.status_code == 400
    assert answer.get_json()["error"] == "the first name contains a control character (U+0000)"


def test_an_e_mail_change_of_a_course_member_is_shown_once(client, app):
    added = upload(client, HEADER + "p2600002;Martin;Léa;lea@example.org;G1\r\n")
    confirm(client, added.get_data(as_text=True))
    preview = upload(client, HEADER + "p2600002;Martin;Léa;lea.martin@example.org;G1\r\n")
    body = html.unescape(preview.get_data(as_text=True))
    assert preview.status_code == 200
    assert body.count("lea@example.org → lea.martin@example.org") == 1, body
    assert "e-mail: lea@example.org → lea.martin@example.org" in body
    assert "email:" not in body
