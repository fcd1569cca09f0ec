"""The formgrader's lock-down and the sanitising of students' HTML (pure parts, a feedback)."""

from __future__ import annotations

import nbformat
import pytest

from coursehub.contract import SANDBOX_CSP
from coursehub.grading.formgrader.guard import (
    is_submission_file,
    plan_request,
    with_sandbox,
)
from coursehub.grading.formgrader.service import (
    DISABLED_EXTENSIONS,
    formgrader_command,
    full_server_enabled,
)
from coursehub.grading.studenthtml import sanitizing_config

BASE = "/services/ml-2025/"


@pytest.mark.parametrize(
    ("path", "query", "expected"),
    [
        ("/services/ml-2025/", "", "allow"),
        ("/services/ml-2025/formgrader", "", "allow"),
        ("/services/ml-2025/formgrader/submissions/abc/", "", "allow"),
        ("/services/ml-2025/formgrader/api/assignments", "", "allow"),
        ("/services/ml-2025/oauth_callback", "code=x", "allow"),
        ("/services/ml-2025/logout", "", "allow"),
        ("/services/ml-2025/static/favicon.ico", "", "allow"),
        ("/services/ml-2025/api/kernels", "", "refuse"),
        ("/services/ml-2025/api/kernels/1/channels", "", "refuse"),
        ("/services/ml-2025/api/sessions", "", "refuse"),
        ("/services/ml-2025/api/terminals", "", "refuse"),
        ("/services/ml-2025/api/contents/gradebook.db", "", "refuse"),
        ("/services/ml-2025/files/nbgrader_config.py", "", "refuse"),
        ("/services/ml-2025/terminals/1", "", "refuse"),
        ("/services/ml-2025/tree", "", "refuse"),
        ("/services/ml-2025/lab", "", "refuse"),
        ("/services/ml-2025/lab/tree/x.ipynb", "formgrader=true", "refuse"),
        ("/services/ml-2025/lab", "formgrader=true", "formgrader"),
        ("/services/ml-2025/assignments/validate", "", "refuse"),
        ("/services/ml-2025/formgraderx", "", "refuse"),
        ("/services/other/api/kernels", "", "allow"),
    ],
)
def test_the_formgrader_answers_its_own_paths_only(path, query, expected):
    assert plan_request(path, BASE, query) == expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/services/ml-2025/formgrader/submissions/abc/page.html", True),
        ("/services/ml-2025/formgrader/submissions/abc/img/plot.svg", True),
        ("/services/ml-2025/formgrader/submissions/abc/", False),
        ("/services/ml-2025/formgrader/submissions/abc", False),
        ("/services/ml-2025/formgrader/submissions/components/MathJax/x.js", False),
        ("/services/ml-2025/formgrader/gradebook", False),
        ("/services/other/formgrader/submissions/abc/page.html", False),
    ],
)
def test_a_submissions_files_are_sent_in_the_sandbox_but_not_the_grading_page(path, expected):
    assert is_submission_file(path, BASE) is expected


def test_the_sandbox_comes_first_and_keeps_the_hubs_frame_ancestors():
    assert with_sandbox(None) == SANDBOX_CSP
    assert with_sandbox("frame-ancestors 'none'") == f"{SANDBOX_CSP}; frame-ancestors 'none'"
    assert "allow-same-origin" not in SANDBOX_CSP


def test_the_formgrader_command_turns_kernels_terminals_and_lab_off():
    command = formgrader_command("python3")
    assert command[:4] == [
        "python3",
        "-m",
        "jupyterhub.singleuser",
        "--ServerApp.default_url=/formgrader",
    ]
    assert "--ServerApp.terminals_enabled=False" in command
    assert (
        "--ServerApp.kernel_manager_class="
        "coursehub.grading.formgrader.guard.RefusingKernelManager" in command
    )
    assert "--ServerApp.jpserver_extensions=coursehub.grading.formgrader.guard=True" in command
    for name in ("jupyterlab", "notebook", "nbgrader.server_extensions.validate_assignment"):
        assert name in DISABLED_EXTENSIONS
        assert f"--ServerApp.jpserver_extensions={name}=False" in command
    assert formgrader_command("python3", allow_root=True)[-1] == "--allow-root"


def test_a_site_may_turn_the_whole_jupyter_server_back_on():
    assert formgrader_command("python3", full_server=True) == [
        "python3",
        "-m",
        "jupyterhub.singleuser",
        "--ServerApp.default_url=/formgrader",
        # still sanitising and sandboxing, refusing nothing
        "--ServerApp.jpserver_extensions=coursehub.grading.formgrader.guard=True",
        "--ServerApp.tornado_settings=coursehub_formgrader_full_server=True",
    ]
    assert full_server_enabled({"COURSEHUB_FORMGRADER_FULL_SERVER": "1"})
    assert full_server_enabled({"COURSEHUB_FORMGRADER_FULL_SERVER": "Yes"})
    assert not full_server_enabled({"COURSEHUB_FORMGRADER_FULL_SERVER": "0"})
    assert not full_server_enabled({})


def evil_notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell("x", execution_count=1)
    code.outputs = [
        nbformat.v4.new_output(
            "display_data", data={"text/html": "<b>shown</b><script>alert('html')</script>"}
        ),
        nbformat.v4.new_output("display_data", data={"application/javascript": "alert('js')"}),
        nbformat.v4.new_output(
            "display_data", data={"text/markdown": "<img src=x onerror=alert('mdout')>"}
        ),
        nbformat.v4.new_output(
            "display_data",
            data={"image/svg+xml": "<svg><script>alert('svg')</script></svg>"},
        ),
        nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo="}),
    ]
    nb.cells = [nbformat.v4.new_markdown_cell("answer <script>alert('md')</script>"), code]
    return nb


# outputs emptied by the sanitiser (javascript, svg): nbconvert warns that it shows nothing
@pytest.mark.filterwarnings("ignore:Your element with mimetype")
def test_nbgraders_grading_page_shows_a_students_scripts_as_text_once_sanitised():
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers

    config = sanitizing_config()
    config.HTMLExporter.template_name = "formgrade"  # as nbgrader's formgrader sets it
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    resources = {
        "base_url": "/services/ml-2025",
        "index": 0,
        "total": 1,
        "notebook_id": "ps1",
        "submission_id": "abc",
        "assignment_id": "ps1",
        "student": "ana",
        "first_name": "Ana<script>alert('name')</script>",
        "last_name": "<img src=x onerror=alert('last')>",
        "notebook_path": "autograded/ana/ps1/ps1.ipynb",
    }
    html, _ = HTMLExporter(config=config).from_notebook_node(evil_notebook(), resources=resources)
    for payload in ("alert('html')", "alert('svg')", "alert('md')"):
        assert f"<script>{payload}" not in html
    assert "alert('js')" not in html  # application/javascript: removed
    assert "<img src=x onerror" not in html.replace('"', "")  # escaped into text
    assert "&lt;img src=x onerror" in html.replace('"', "")
    assert "<b>shown</b>" in html and "answer" in html
    assert "&lt;script&gt;alert('html')&lt;/script&gt;" in html
    assert "data:image/png;base64,iVBORw0KGgo=" in html
    # the roster's names in the page's header: escaped
    assert "alert('name')" not in html.replace("&lt;script&gt;alert('name')", "")
    assert "&lt;img src=x onerror=alert('last')&gt;" in html


@pytest.mark.filterwarnings("ignore")  # nbgrader's own SQLAlchemy and nbconvert warnings
def test_the_feedback_shows_a_students_scripts_as_text(tmp_path):
    from nbgrader.api import Gradebook

    from coursehub.grading.assignments import generate_feedback
    from coursehub.grading.layout import ensure_course, make_layout

    layout = make_layout("ml-2025", tmp_path / "courses", tmp_path / "exchange", single_user=True)
    ensure_course(layout)
    with Gradebook(layout.db_url) as gradebook:
        gradebook.add_assignment("ps1")
        gradebook.add_notebook("ps1", "ps1")
        gradebook.add_grade_cell("q1", "ps1", "ps1", max_score=1, cell_type="code")
        gradebook.add_student("ana", first_name="Ana", last_name="Lyse")
        gradebook.add_submission("ps1", "ana")
    folder = layout.course_dir / "autograded" / "ana" / "ps1"
    folder.mkdir(parents=True)
    nbformat.write(evil_notebook(), folder / "ps1.ipynb")
    generate_feedback(layout, "ps1")
    feedback = (layout.course_dir / "feedback" / "ana" / "ps1" / "ps1.html").read_text()
    assert "<script>alert(" not in feedback and "alert('js')" not in feedback
    assert "&lt;script&gt;alert('html')&lt;/script&gt;" in feedback
    assert "<b>shown</b>" in feedback
