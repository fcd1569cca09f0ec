"""At the bell: stop the exam server of each student whose work the bell submitted.

The issue's rule is that at a student's end the exam server "becomes
read-only or stops": once the bell has submitted the work, the hub stops
every server of the student (JupyterHub's ``DELETE /users/{name}/server``,
:meth:`coursehub.hub.hubclient.HubClient.stop_servers`), as an exam start
does (:func:`coursehub.web.api.exams.stop_student_servers`). A start after
that is no longer an exam server (the sitting has ended:
:func:`coursehub.spawn.examserver.running_sitting`), and the exam's work
stays in the exam home, as submitted.

Best effort: the submission is what counts, so a hub that is not
configured, refuses, or does not answer is one line each and never fails
the bell. The hub's URL and token are those of ``coursehub hub sync``
(:func:`coursehub.hub.hubclient.client_from_env`); the token needs
``admin:servers``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from coursehub.errors import CoursehubError, UsageError


def stop_exam_servers(
    usernames: Sequence[str],
    hub_url: str | None = None,
    token_env: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[str]:
    """Stop every server of each of ``usernames`` on the hub; return one line per event.

    A line per student whose servers were stopped (``p2500001: exam server
    stopped``), per student the hub did not stop (with the hub's words), or
    one line when no hub is configured. Nothing for a student with no server.
    Raises nothing: see the module's note.
    """
    if not usernames:
        return []
    from coursehub.hub.hubclient import client_from_env

    try:
        client = client_from_env(hub_url, token_env, environ)
    except UsageError as exc:
        return [f"exam servers not stopped: {exc}"]
    lines = []
    with client:
        for name in usernames:
            try:
                stopped = client.stop_servers(name)
            except CoursehubError as exc:
                lines.append(f"{name}: exam server not stopped: {exc}")
                continue
            if stopped:
                named = ", ".join(f"'{s}'" if s else "default" for s in stopped)
                lines.append(f"{name}: exam server stopped ({named})")
    return lines
