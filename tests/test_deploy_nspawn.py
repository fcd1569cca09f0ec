"""``coursehub deploy`` in a booted Debian 12: its units start and the hub answers over HTTPS.

The container (tests/nspawnbox.py) is a minimal bookworm booted with
``systemd-nspawn --boot --volatile=overlay``, this checkout bound read-only.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import pytest

from nspawnbox import (
    DEPLOY,
    MARKS,
    PYTHON,
    REPO,
    SETTINGS,
    START_UNITS,
    Container,
    boot,
    name_host,
    script,
)

pytestmark = MARKS


@pytest.fixture(scope="module")
def container(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Container]:
    """A Debian 12 container booted for these tests, powered off after them."""
    with boot(tmp_path_factory.mktemp("nspawn") / "console.log") as box:
        yield box


FETCH = """
import json, ssl, sys, time, urllib.error, urllib.request
ctx = ssl._create_unverified_context()
for _ in range(120):
    try:
        with urllib.request.urlopen("https://127.0.0.1:443" + sys.argv[1], context=ctx) as r:
            print(r.status, r.read().decode()[:200]); break
    except urllib.error.HTTPError as e:
        if e.code not in (404, 502, 503) or _ == 119:
            print(e.code, ""); break
        time.sleep(0.5)
    except OSError:
        time.sleep(0.5)
else:
    print("no answer")
"""


def test_deploy_in_a_booted_debian_starts_the_hub_and_the_course_app(container):
    python = PYTHON
    name_host(container)
    first = container.sh(DEPLOY)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "coursehub doctor:" in first.stdout
    second = container.sh(f"{DEPLOY} --dry-run")
    assert second.stdout.startswith("nothing to change"), second.stdout

    start = container.sh(
        f"{START_UNITS} coursehub-usage-ingest.timer coursehub-material-update.timer "
        "coursehub-backup.timer"
    )
    assert start.returncode == 0, start.stderr
    hub = container.sh(f"{python} -c '{FETCH}' /hub/api/", timeout=120)
    status = container.sh(
        "journalctl --no-pager -o cat -n 80 -u coursehub-hub -u coursehub-web"
    ).stdout
    assert hub.stdout.startswith("200 "), hub.stdout + hub.stderr + status
    assert '"version"' in hub.stdout
    app = container.sh(f"{python} -c '{FETCH}' /services/coursehub/", timeout=120)
    assert app.stdout.split()[0] in ("200", "302"), app.stdout + status
    active = container.sh("systemctl is-active coursehub-hub coursehub-web coursehub-backup.timer")
    assert active.stdout.split() == ["active"] * 3, active.stdout


START = """
import json, os, sys, time, urllib.request
api, user = "http://127.0.0.1:8081/hub/api", sys.argv[1]
headers = {"Authorization": "token " + os.environ["COURSEHUB_SERVICE_TOKEN"]}
def call(method, path):
    request = urllib.request.Request(api + path, method=method, headers=headers)
    with urllib.request.urlopen(request) as answer:
        body = answer.read().decode()
        return json.loads(body) if body else {}
call("POST", "/users/" + user + "/server")
for _ in range(240):
    server = call("GET", "/users/" + user).get("servers", {}).get("", {})
    if server.get("ready"):
        break
    time.sleep(0.5)
print(json.dumps(server))
"""


def test_a_students_server_runs_as_the_student_in_its_own_unit_with_the_course_limits(
    container,
):
    python = PYTHON
    coursehub = f"{SETTINGS}cd / && {python} -m coursehub"
    # the first test deployed and started the hub; the demo catalog's course, small profile
    seed = container.sh(
        f"{coursehub} db seed && {coursehub} course profile mlmeca-2025 "
        f"--profile small && {coursehub} accounts sync"
    )
    assert seed.returncode == 0, seed.stdout + seed.stderr
    assert "create p2500001 (locked password, home 0700)" in seed.stdout
    # the test's interpreter is bound below /root: students must reach it
    container.sh("chmod 0711 /root")
    sync = container.sh(
        f"{coursehub} hub sync --hub-url http://127.0.0.1:8081/hub/api "
        "--token-env COURSEHUB_SERVICE_TOKEN"
    )
    started = container.sh(f"{SETTINGS}{python} -c '{START}' p2500001", timeout=150)
    journal = container.sh("journalctl --no-pager -o cat -n 40 -u 'jupyter-*'").stdout
    assert '"ready": true' in started.stdout, (
        sync.stdout + started.stdout + started.stderr + journal
    )
    unit = container.sh("systemctl list-units --plain --no-legend 'jupyter-*'").stdout.split()[0]
    shown = container.sh(f"systemctl show {unit} -p User -p CPUQuotaPerSecUSec -p MemoryMax")
    properties = dict(line.split("=", 1) for line in shown.stdout.split())
    uid = container.sh("id -u p2500001").stdout.strip()
    assert properties == {
        "User": uid,  # SystemdSpawner gives the unit the account's uid
        "CPUQuotaPerSecUSec": "1s",  # the course's profile "small": 1 CPU, 2G
        "MemoryMax": str(2 * 1024**3),
    }
    main = container.sh(f"systemctl show {unit} -p MainPID --value").stdout.strip()
    owner = container.sh(f"stat -c %U /proc/{main}").stdout.strip()
    assert owner == "p2500001"


def test_the_backup_and_usage_services_of_the_timers_run_to_success(container):
    # after the tests above: a hub with a running server, a seeded catalog. Not the
    # material update: the demo course's repository (gitlab.example.org) is out of reach.
    run = container.sh(
        "systemctl start coursehub-backup.service coursehub-usage-ingest.service", timeout=300
    )
    journal = container.sh("journalctl --no-pager -o cat -n 30 -u 'coursehub-*'").stdout
    assert run.returncode == 0, run.stderr + journal
    shown = container.sh(
        "systemctl show -p Result --value coursehub-backup.service coursehub-usage-ingest.service"
    )
    assert shown.stdout.split() == ["success"] * 2, journal
    archives = container.sh("ls /var/lib/coursehub/backups").stdout.split()
    assert len(archives) == 1 and archives[0].endswith(".tar.gz"), archives


#: The hub's view of a user's default server, once the hub answers again (after a restart).
SERVER = """
import json, os, sys, time, urllib.error, urllib.request
api, user = "http://127.0.0.1:8081/hub/api", sys.argv[1]
headers = {"Authorization": "token " + os.environ["COURSEHUB_SERVICE_TOKEN"]}
for _ in range(240):
    try:
        request = urllib.request.Request(api + "/users/" + user, headers=headers)
        with urllib.request.urlopen(request) as answer:
            print(json.dumps(json.loads(answer.read()).get("servers", {}).get("", {})))
            break
    except (urllib.error.URLError, OSError):
        time.sleep(0.5)
else:
    print("no answer")
"""


#: A server's own token and kernels' URL, from its unit's environment file (SystemdSpawner).
SERVER_API = """
import json, os, pathlib, shlex, sys, time, urllib.request
envfile, user = sys.argv[1], sys.argv[2]
lines = pathlib.Path(envfile).read_text().splitlines()
env = {k: (shlex.split(v) or [""])[0] for k, v in (l.split("=", 1) for l in lines if "=" in l)}
headers = {"Authorization": "token " + env["JUPYTERHUB_API_TOKEN"]}
url = env["JUPYTERHUB_SERVICE_URL"].rstrip("/") + "/api/kernels"
"""
#: The execution state of each kernel of a server.
KERNEL_STATES = (
    SERVER_API
    + """
with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as answer:
    print(" ".join(k["execution_state"] for k in json.load(answer)))
"""
)
#: Start a kernel in a server, then keep it busy: it starts a runner job (`coursehub run`,
#: a script that sleeps in a loop) and runs a cell that never ends (sleeping, not spinning).
BUSY_KERNEL = (
    SERVER_API
    + """
from jupyter_client import BlockingKernelClient
request = urllib.request.Request(url, data=b"{}", method="POST", headers=headers)
kernel = json.load(urllib.request.urlopen(request))["id"]
runtime = env.get("JUPYTER_RUNTIME_DIR") or f"/home/{user}/.local/share/jupyter/runtime"
connection = pathlib.Path(runtime) / f"kernel-{kernel}.json"
for _ in range(120):
    if connection.exists():
        break
    time.sleep(0.5)
client = BlockingKernelClient(connection_file=str(connection))
client.load_connection_file()
client.start_channels()
client.wait_for_ready(timeout=60)
code = "import pathlib, subprocess, sys, time\\n"
if sys.argv[3:] == ["job"]:
    code += (
        "spin = pathlib.Path.home() / 'spin.py'\\n"
        "spin.write_text('import time\\\\nwhile True: time.sleep(1)\\\\n')\\n"
        "job = subprocess.Popen([sys.executable, '-m', 'coursehub', 'run', '--name', 'spin', "
        "'--', str(spin)])\\n"
    )
client.execute(code + "while True: time.sleep(0.2)\\n")
time.sleep(3)
client.stop_channels()
print(kernel)
"""
)


def _unit_state(container, unit: str) -> dict[str, str]:
    """The unit's state, main pid, and every process of its control group (systemd-cgls(1))."""
    shown = container.sh(f"systemctl show {unit} -p ActiveState -p MainPID")
    state = dict(line.split("=", 1) for line in shown.stdout.split())
    tree = container.sh(f"systemd-cgls --no-pager -u {unit}").stdout
    state["procs"] = " ".join(re.findall(r"─(\d+) ", tree))
    return state


def _unit_of(container, user: str) -> str:
    """The unit of ``user``'s default server."""
    units = container.sh(f"systemctl list-units --plain --no-legend 'jupyter-*-{user}-singleuser*'")
    return units.stdout.split()[0]


def _busy_kernel(container, user: str, *extra: str) -> str:
    """Start a busy kernel in ``user``'s server; return the server's environment file."""
    unit = _unit_of(container, user)
    envfile = container.sh(f"systemctl show {unit} -p EnvironmentFiles --value").stdout.split()[0]
    busy = script(container, BUSY_KERNEL, envfile, user, *extra)
    assert busy.returncode == 0, busy.stdout + busy.stderr
    return envfile


def test_an_upgrade_restarts_the_hub_and_keeps_the_students_servers_which_it_finds_again(
    container,
):
    # after the tests above: p2500001's server runs in its own unit; a second student's too
    python = PYTHON
    second = container.sh(f"{SETTINGS}{python} -c '{START}' p2500002", timeout=150)
    assert '"ready": true' in second.stdout, second.stdout + second.stderr
    users = ("p2500001", "p2500002")
    envfiles = {user: _busy_kernel(container, user, *extra) for user, extra in
                zip(users, (["job"], []), strict=True)}  # fmt: skip
    units = {user: _unit_of(container, user) for user in users}
    before = {user: _unit_state(container, unit) for user, unit in units.items()}
    commands = container.sh(
        f"for p in {before['p2500001']['procs']}; do tr '\\0' ' ' < /proc/$p/cmdline; echo; done"
    )
    assert "ipykernel" in commands.stdout and "spin.py" in commands.stdout, commands.stdout
    hub_before = container.sh("systemctl show coursehub-hub -p MainPID --value").stdout.strip()
    # a unit file that differs from the install's: the upgrade rewrites it and reloads systemd
    container.sh("sed -i s/RestartSec=5/RestartSec=4/ /etc/systemd/system/coursehub-hub.service")
    done = container.sh(f"cd / && {python} -m coursehub upgrade --hostname hub.test", timeout=300)
    journal = container.sh("journalctl --no-pager -o cat -n 60 -u coursehub-hub").stdout
    assert done.returncode == 0, done.stdout + done.stderr + journal
    assert "reloaded the unit files" in done.stdout
    assert "restarted coursehub-hub.service" in done.stdout
    assert "RestartSec=5" in container.sh("cat /etc/systemd/system/coursehub-hub.service").stdout
    for user in users:
        server = container.sh(f"{SETTINGS}{python} -c '{SERVER}' {user}", timeout=150)
        assert '"ready": true' in server.stdout, server.stdout + journal  # the hub found it
        assert _unit_state(container, units[user]) == before[user]  # same processes
        states = script(container, KERNEL_STATES, envfiles[user], user)
        assert states.stdout.split() == ["busy"], states.stdout + states.stderr  # its cell runs
    hub_after = container.sh("systemctl show coursehub-hub -p MainPID --value").stdout.strip()
    assert hub_after not in (hub_before, "0"), journal  # the hub did restart
    archives = container.sh("ls /var/lib/coursehub/backups").stdout.split()
    assert len(archives) == 2, archives  # the timer's and the upgrade's


def test_a_server_killed_with_its_unit_left_failed_starts_again(container):
    python = PYTHON
    unit = _unit_of(container, "p2500001")
    container.sh(f"systemctl kill --signal=KILL {unit}")
    for _ in range(60):
        state = container.sh(f"systemctl show {unit} -p ActiveState --value").stdout.strip()
        if state == "failed":
            break
        time.sleep(0.5)
    assert state == "failed"
    for _ in range(60):  # the hub notices at its next poll (a few seconds)
        server = container.sh(f"{SETTINGS}{python} -c '{SERVER}' p2500001").stdout
        if '"ready": true' not in server:
            break
        time.sleep(1)
    started = container.sh(f"{SETTINGS}{python} -c '{START}' p2500001", timeout=150)
    journal = container.sh("journalctl --no-pager -o cat -n 40 -u coursehub-hub").stdout
    assert '"ready": true' in started.stdout, started.stdout + started.stderr + journal
    assert container.sh(f"systemctl is-active {unit}").stdout.strip() == "active"


#: Start a named server of a user through the hub's API; print the hub's view once ready.
START_NAMED = START.replace('"/server"', '"/servers/" + sys.argv[2]').replace(
    '.get("", {})', ".get(sys.argv[2], {})"
)


def test_a_named_server_runs_in_its_own_unit_beside_the_default_one(container):
    # after the tests above: p2500001's default server runs; named servers allowed (a later
    # assignment wins in the configuration file), then a second course's server started
    python = PYTHON
    default = _unit_of(container, "p2500001")
    pid = container.sh(f"systemctl show {default} -p MainPID --value").stdout.strip()
    config = "/etc/coursehub/jupyterhub_config.py"
    container.sh(f"echo 'c.JupyterHub.allow_named_servers = True' >> {config}")
    container.sh("systemctl restart coursehub-hub")
    again = container.sh(f"{SETTINGS}{python} -c '{SERVER}' p2500001", timeout=150)
    assert '"ready": true' in again.stdout, again.stdout  # the hub answers, the server kept
    started = container.sh(f"{SETTINGS}{python} -c '{START_NAMED}' p2500001 tp-2", timeout=150)
    journal = container.sh(
        "journalctl --no-pager -o cat -n 30 -u 'jupyter-*'; systemctl list-units --all "
        "--plain --no-legend 'jupyter-*'; journalctl --no-pager -o cat -u coursehub-hub "
        "| grep -v 'GET /hub/api' | tail -n 30"
    ).stdout
    assert '"ready": true' in started.stdout, started.stdout + started.stderr + journal
    listed = container.sh("systemctl list-units --plain --no-legend 'jupyter-*-p2500001-*'")
    names = {line.split()[0] for line in listed.stdout.splitlines()}
    assert names == {default, default.removesuffix(".service") + "-tp:2d2.service"}, names
    assert container.sh(f"systemctl show {default} -p MainPID --value").stdout.strip() == pid
    server = container.sh(f"{SETTINGS}{python} -c '{SERVER}' p2500001", timeout=150)
    assert '"ready": true' in server.stdout, server.stdout  # the default one still runs


#: As a browser does: the hub's login page, its form posted with the ``_xsrf`` field (and the
#: cookie it came with), the redirects followed to the student's running server; then, with
#: the server's cookies, a kernel started (``X-XSRFToken``, jupyter_server's rule for a
#: cookie-authenticated POST) and a cell executed over the kernel's websocket (Jupyter
#: messaging protocol 5.3: ``execute_request`` on the shell channel, output on iopub).
SIGN_IN_AND_RUN = """
import asyncio, http.cookiejar, json, re, ssl, sys, urllib.parse, urllib.request, uuid
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect
user, password, code = sys.argv[1], sys.argv[2], sys.argv[3]
# "@FILE": a JSON list of cells, run one after another in the same kernel
cells = json.load(open(code[1:])) if code.startswith("@") else [code]
base = "https://127.0.0.1:443"
ctx = ssl._create_unverified_context()
jar = http.cookiejar.CookieJar()
web = urllib.request.build_opener(
    urllib.request.HTTPSHandler(context=ctx), urllib.request.HTTPCookieProcessor(jar))
page = web.open(base + "/hub/login").read().decode()
xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page).group(1)
form = {"_xsrf": xsrf, "username": user, "password": password}
landed = web.open(base + "/hub/login", data=urllib.parse.urlencode(form).encode())
print("landed", landed.status, landed.url)
prefix = f"/user/{user}/"
cookies = {c.name: c.value for c in jar if c.path.startswith(prefix.rstrip("/"))}
server_xsrf = cookies.get("_xsrf") or next(c.value for c in jar if c.name == "_xsrf")
request = urllib.request.Request(base + prefix + "api/kernels", data=b"{}", method="POST",
                                 headers={"X-XSRFToken": server_xsrf})
kernel = json.load(web.open(request))["id"]
cookie = "; ".join(f"{c.name}={c.value}" for c in jar)
async def run(ws, code):
    msg_id = uuid.uuid4().hex
    header = {"msg_id": msg_id, "msg_type": "execute_request", "username": user,
              "session": uuid.uuid4().hex, "date": "", "version": "5.3"}
    content = {"code": code, "silent": False, "store_history": False,
               "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}
    await ws.write_message(json.dumps({"header": header, "parent_header": {}, "metadata": {},
                                       "content": content, "channel": "shell"}))
    out = []
    while True:
        msg = json.loads(await asyncio.wait_for(ws.read_message(), 240))
        if msg.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        if msg["msg_type"] == "error":
            out.append("error: " + msg["content"]["ename"])
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return "".join(out)
async def run_all():
    url = f"wss://127.0.0.1:443{prefix}api/kernels/{kernel}/channels?_xsrf={server_xsrf}"
    ws = await websocket_connect(HTTPRequest(url, headers={"Cookie": cookie},
                                             validate_cert=False))
    for code in cells:
        print("cell", json.dumps(await run(ws, code)), flush=True)
asyncio.run(run_all())
"""


def test_a_student_signs_in_on_the_login_page_and_runs_a_cell_as_their_own_account(container):
    # after the tests above: p2500002's server runs; its account gets a password for PAM
    # (accounts sync locks it: a department signs in through its own authenticator)
    container.sh("echo 'p2500002:Pendulum-2025' | chpasswd")
    code = "import os, pwd; print(pwd.getpwuid(os.getuid()).pw_name, os.getcwd())"
    done = script(container, SIGN_IN_AND_RUN, "p2500002", "Pendulum-2025", f'"{code}"')
    journal = container.sh("journalctl --no-pager -o cat -n 30 -u coursehub-hub").stdout
    assert done.returncode == 0, done.stdout + done.stderr + journal
    assert "landed 200 https://127.0.0.1:443/user/p2500002/" in done.stdout, done.stdout
    assert 'cell "p2500002 ' in done.stdout, done.stdout  # the kernel runs as the student


#: The teaching notebook's cells at the size of ``tests/test_notebook.py``'s tiny run.
TINY = {
    "PENDULUM_N_TRAJECTORIES": "20",
    "PENDULUM_DURATION_S": "11",
    "PENDULUM_EPOCHS": "1",
    "PENDULUM_MAX_WINDOWS": "300",
}


def test_the_pendulum_notebooks_training_cell_runs_in_the_students_server_at_its_cpu_limit(
    container,
):
    # after the sign-in above: the student's own server, its kernel, the notebook's cells
    notebook = json.loads((REPO / "examples/pendulum/double_pendulum.ipynb").read_text())
    sources = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    train = next(i for i, code in enumerate(sources) if "%coursehub_run" in code)
    cells = [f"import os; os.environ.update({TINY!r})", *sources[: train + 3]]
    container.path("/root/cells.json").write_text(json.dumps(cells))
    done = script(container, SIGN_IN_AND_RUN, "p2500002", "Pendulum-2025", "@/root/cells.json",
                  timeout=600)  # fmt: skip
    journal = container.sh("journalctl --no-pager -o cat -n 30 -u coursehub-hub").stdout
    assert done.returncode == 0, done.stdout + done.stderr + journal
    said = "".join(json.loads(line[5:]) for line in done.stdout.splitlines()
                   if line.startswith("cell "))  # fmt: skip
    assert "error:" not in said, said
    # the runner's line: a fresh interpreter with the server's threads (profile small: 1 CPU)
    assert "[coursehub] exit 0 | elapsed " in said and " | 1 thread | " in said, said
    assert "ridge_ar10" in said, said  # the evaluation read the trained checkpoint
    owner = container.sh("stat -c %U /home/p2500002/pendulum-work/model.pt").stdout.strip()
    assert owner == "p2500002"
