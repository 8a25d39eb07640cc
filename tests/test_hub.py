"""The class hub end to end: `./course hub`, then two learners and the instructor in a real browser.

The instructor releases module 01 from the formgrader; each learner fetches it in the Assignments
tab; Ada fills in the solutions, runs `./learn export/check/status` in a JupyterLab terminal,
validates and submits; the instructor moves the due date to "now"; Blaise submits the untouched
release (late); the instructor collects, autogrades each submission, generates and releases
feedback; both learners fetch their feedback. Grades: Ada 100%, Blaise 0, Blaise late. Stopping
the hub leaves no process of its accounts and no proxy. Screenshots land in artifacts/hub/.

Needs root (it makes system accounts, removed afterwards), Debian's chromium, and npm.
"""
import contextlib
import csv
import datetime
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import types
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tinytorch_course import notebooks
from tinytorch_course.hub.hub import closed_folder, read_roster
from tinytorch_course.nbgrader_api import CourseError
from test_browser import CHROMIUM, browser  # noqa: F401  (browser: the fixture, shared)
from conftest import REPO

SHOTS = REPO / "artifacts" / "hub"
# One worker runs this file and tests/test_exchange.py: a hub here closes the checkout to other accounts
# until its test ends, and the exchange's accounts run this checkout's Python.
pytestmark = pytest.mark.xdist_group("accounts")
MODULE = "01_tensor"


def needs_root_chromium_and_npm(test):
    for condition, reason in [
            (os.geteuid() != 0, "the hub makes system accounts: needs root"),
            (not os.access(CHROMIUM, os.X_OK), "no chromium: install Debian's package (apt-get install chromium)"),
            (shutil.which("npm") is None, "no npm for JupyterHub's proxy (apt-get install nodejs npm)")]:
        test = pytest.mark.skipif(condition, reason=reason)(test)
    return test


def free_ports(count=3):
    """A port p with p..p+count-1 all free on 127.0.0.1 (the hub, its proxy's API, the hub's API)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            for offset in range(count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port + offset))
            return port
        except OSError:
            continue
    raise RuntimeError("no free ports")


def processes_of(uids):
    """PIDs of the running processes owned by any of `uids`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid in uids:
                    found.append(int(entry.name))
            except FileNotFoundError:
                pass
    return found


def descendants(pid):
    """PIDs of the processes started (directly or not) by `pid` that still run."""
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class Hub:
    """`./course hub` for a fresh class (`learners` names its learners), in a folder of its own (the
    hub's state folder too, unless `state` names one to reuse)."""

    def __init__(self, folder, learners=("ada", "blaise"), state=None):
        self.folder = folder
        tag = secrets.token_hex(2)
        self.instructor = f"tth{tag}-teacher"
        self.learners = [f"tth{tag}-{name}" for name in learners]
        roster = folder / "roster.csv"
        with open(roster, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["id", "first_name", "last_name", "email"])
            for account, name in zip(self.learners, learners):
                writer.writerow([account, name.capitalize(), "Learner", f"{name}@example.invalid"])
        self.port = free_ports()
        self.url = f"http://127.0.0.1:{self.port}"
        self.state, homes = state or folder / "state", folder / "homes"
        homes.mkdir()
        self.log = open(folder / "hub.log", "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tinytorch_course", "hub", "--roster", str(roster), "--instructor",
             self.instructor, "--state", str(self.state), "--homes", str(homes), "--port", str(self.port)],
            cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_until_up(self, seconds=1500):
        deadline = time.monotonic() + seconds
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/hub/api/", timeout=2)
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the hub did not start:\n" + (self.folder / "hub.log").read_text())
                time.sleep(1)

    def password(self, account):
        with open(self.state / "accounts.csv", newline="") as f:
            return {row["account"]: row["password"] for row in csv.DictReader(f)}[account]

    def home(self, account):
        return Path(pwd.getpwnam(account).pw_dir)

    def course(self):
        return self.home(self.instructor) / "tinytorch-course"

    def uid(self, account):
        return pwd.getpwnam(account).pw_uid

    def uids(self):
        return {self.uid(a) for a in self.accounts()}

    def accounts(self):
        return [self.instructor, *self.learners]

    def stop(self):
        """Ctrl-C, as an instructor stops it; returns the hub's exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def remove(self):
        """Stop anything left, delete the accounts and the folder."""
        self.stop()
        for pid in processes_of(self.uids()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for account in self.accounts():
            subprocess.run(["userdel", "--remove", account], capture_output=True)
        self.log.close()
        SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(self.folder / "hub.log", SHOTS / "hub.log")  # the servers' log, kept for a failed run
        shutil.rmtree(self.folder, ignore_errors=True)


@contextlib.contextmanager
def python_open_to_all():
    """Let every account pass through the folders on the way to this Python (a pyenv under /root,
    as on the course's machines), as docs/hub.md tells an instructor; put them back afterwards."""
    opened = []
    try:
        while closed_folder(sys._base_executable):
            folder = closed_folder(sys._base_executable)
            opened.append((folder, folder.stat().st_mode))
            folder.chmod(folder.stat().st_mode | 0o001)
        yield
    finally:
        for folder, mode in reversed(opened):
            folder.chmod(mode)


def hub_folder():
    """A folder for a hub's state and homes that the accounts can reach (pytest's tmp is root's only)."""
    folder = Path(tempfile.mkdtemp(prefix="tinytorch-hub-"))
    folder.chmod(0o755)
    return folder


@pytest.fixture
def hub():
    # TINYTORCH_HUB_STATE names a hub state folder to reuse (its env/ and proxy/), for a quicker rerun.
    state = os.environ.get("TINYTORCH_HUB_STATE")
    if state:
        shutil.rmtree(Path(state) / "exchange", ignore_errors=True)  # what an earlier class handed in
    repo_mode = REPO.stat().st_mode  # ./course hub closes the course folder to other accounts
    with python_open_to_all():
        made = Hub(hub_folder(), state=Path(state) if state else None)
        made.ada, made.blaise = made.learners
        try:
            yield made
        finally:
            made.remove()
            REPO.chmod(repo_mode)  # as it was: tests/test_exchange.py's accounts run this checkout's Python


def shot(page, name):
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def log_in(browser, hub, account):
    """A browser of its own for `account`, logged in, with its JupyterLab open."""
    page = browser.new_context(viewport={"width": 1400, "height": 950}).new_page()
    page.set_default_timeout(180_000)
    page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", account)
    page.fill("#password_input", hub.password(account))
    page.click("#login_submit")
    page.wait_for_url(re.compile(rf".*/user/{account}/lab.*"))
    page.locator(".jp-Launcher").first.wait_for()
    return page


def close_modal(page, title):
    """Wait for the formgrader's dialog titled `title`, then close it (a dialog with another title
    fails the test with its text)."""
    shown = page.locator(".modal.in, .modal.show")
    shown.wait_for()
    got = shown.locator(".modal-title").inner_text()
    text = shown.inner_text()  # its end holds the error, after nbgrader's log
    assert title in got, f"the formgrader said {got!r}: {text[:500]} [...] {text[-3000:]}"
    modal = shown.filter(has=page.locator(".modal-title", has_text=title))
    modal.locator(".modal-footer button").last.click()
    modal.wait_for(state="hidden")
    page.locator(".modal-backdrop").wait_for(state="detached")


def formgrader_row(page, module_id):
    return page.locator("tr").filter(has=page.locator("td.name", has_text=module_id))


def assignments_tab(page):
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Nbgrader$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Assignment List$")).click()
    page.locator("#released_assignments_list").wait_for()


def assignment_item(page, listing, module_id):
    """The module's entry in the Assignments tab's list `listing` (released, fetched or submitted)."""
    return page.locator(f"#{listing}_assignments_list > .list_item").filter(has_text=module_id).first


def fill_in_solutions(hub, account, module_id):
    """Ada's work: every solution cell of the fetched notebook holds the reference answer."""
    path = hub.home(account) / "tinytorch-workspace" / "modules" / module_id / f"{module_id}.ipynb"
    notebook = notebooks.read(path)
    sources = notebooks.cells_by_id(notebooks.read(notebooks.notebook_path(REPO, "modules", module_id)))
    for cell in notebook.cells:
        if notebooks.is_solution(cell):
            cell.source = notebooks.without_markers(sources[notebooks.grade_id(cell)].source)
    notebooks.write(notebook, path)
    os.chown(path, pwd.getpwnam(account).pw_uid, pwd.getpwnam(account).pw_gid)


def feedback_file(hub, learner):
    """The feedback page the learner fetched, relative to their workspace."""
    workspace = hub.home(learner) / "tinytorch-workspace"
    return next((workspace / "modules" / MODULE / "feedback").rglob("*.html")).relative_to(workspace)


def run_in_terminal(page, command, done_file):
    """Type `command` in a new JupyterLab terminal; wait until it has written `done_file`."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^File$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile("^New$")).hover()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Terminal$")).click()
    page.locator(".jp-Terminal .xterm-helper-textarea").first.wait_for(state="attached")
    page.locator(".jp-Terminal").first.click()
    page.keyboard.type(command + "\n")
    deadline = time.monotonic() + 300
    while not done_file.exists():
        assert time.monotonic() < deadline, f"{command!r} did not finish in the terminal"
        time.sleep(1)


def test_roster_ids_must_be_usable_account_names(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("id,first_name\nada-1,Ada\nBlaise_P,Blaise\n9lives,Cat\n")
    with pytest.raises(CourseError, match="Blaise_P, 9lives"):
        read_roster(roster)
    roster.write_text("id,first_name\nada-1,Ada\n")
    assert read_roster(roster) == ["ada-1"]


def test_the_first_folder_others_cannot_enter_is_found():
    folder = hub_folder()  # open to all, as are /tmp and /
    try:
        python = folder / "a" / "b" / "python"
        python.parent.mkdir(parents=True)
        python.write_text("")
        assert closed_folder(python) is None
        (folder / "a" / "b").chmod(0o700)
        (folder / "a").chmod(0o700)
        assert closed_folder(python) == folder / "a"
    finally:
        shutil.rmtree(folder)


def test_each_role_gets_its_folder_and_configuration(tmp_path):
    """The hub's configuration, loaded as JupyterHub loads it: learners start in their workspace
    and import their own package; the instructor starts at home with the instructor's configuration."""
    from traitlets.config.loader import PyFileConfigLoader

    shutil.copy(REPO / "tinytorch_course" / "hub" / "hub_files" / "jupyterhub_config.py", tmp_path)
    learner = pwd.getpwuid(os.geteuid()).pw_name  # any two accounts that exist
    instructor = next(p.pw_name for p in pwd.getpwall() if p.pw_name != learner)
    (tmp_path / "hub.json").write_text(json.dumps({
        "state": str(tmp_path), "port": 8123, "env": "/srv/env", "proxy": "/srv/chp", "instructor": instructor,
        "learners": [learner], "workspace": "tinytorch-workspace"}))
    config = PyFileConfigLoader("jupyterhub_config.py", path=str(tmp_path)).load_config()
    assert config.Authenticator.allowed_users == {learner, instructor}
    assert config.Authenticator.admin_users == {instructor}
    assert config.Spawner.cmd == ["/srv/env/bin/jupyterhub-singleuser"]
    spawners = {}
    for account in (learner, instructor):
        spawner = types.SimpleNamespace(user=types.SimpleNamespace(name=account), environment={"KEEP": "1"})
        config.Spawner.pre_spawn_hook(spawner)
        spawners[account] = spawner
    home = Path(pwd.getpwnam(learner).pw_dir)
    assert spawners[learner].notebook_dir == str(home / "tinytorch-workspace")
    assert spawners[learner].environment["PYTHONPATH"] == str(home / "tinytorch-workspace")
    assert spawners[learner].environment["JUPYTER_CONFIG_PATH"] == str(tmp_path / "config" / "learner")
    assert spawners[instructor].notebook_dir == pwd.getpwnam(instructor).pw_dir
    assert "PYTHONPATH" not in spawners[instructor].environment
    assert spawners[instructor].environment["JUPYTER_CONFIG_PATH"] == str(tmp_path / "config" / "instructor")
    assert all(s.environment["KEEP"] == "1" and s.environment["PATH"].startswith("/srv/env/bin:")
               for s in spawners.values())


@needs_root_chromium_and_npm
def test_a_class_round_trip_on_the_hub(hub, browser):
    SHOTS.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    hub.wait_until_up()
    up = time.monotonic()

    # The instructor releases module 01 from the formgrader.
    teacher = log_in(browser, hub, hub.instructor)
    teacher.goto(f"{hub.url}/user/{hub.instructor}/formgrader")
    row = formgrader_row(teacher, MODULE)
    row.locator("td.release a").click()
    close_modal(teacher, "Success")
    formgrader_row(teacher, MODULE).locator("td.status", has_text="released").wait_for()
    shot(teacher, "1-instructor-released")

    # Ada fetches it, does the work, checks it with ./learn in a terminal, validates and submits.
    ada = log_in(browser, hub, hub.ada)
    assignments_tab(ada)
    assignment_item(ada, "released", MODULE).get_by_role("button", name="Fetch").click()
    assignment_item(ada, "fetched", MODULE).wait_for()
    workspace = hub.home(hub.ada) / "tinytorch-workspace"
    assert (workspace / "modules" / MODULE / f"{MODULE}.ipynb").is_file(), "fetched into the workspace"
    fill_in_solutions(hub, hub.ada, MODULE)
    output = workspace / "learn-output.txt"
    run_in_terminal(ada, "cd ~/tinytorch-workspace && { ./learn export 01 && ./learn check 01 && ./learn status "
                         "&& ./learn milestone 01; echo learn exit $?; "
                         f"ls {hub.course()} {REPO / 'solutions'}; python -c 'import tinytorch_course'; }} 2>&1 "
                         f"| tee {output.name}; touch learn-done", workspace / "learn-done")
    learned = output.read_text()
    assert "learn exit 0" in learned, learned
    assert "all visible tests pass" in learned and re.search(r"01_tensor\s+checks pass", learned), learned
    # Neither the instructor's course nor the course folder is open to a learner, nor the course's code.
    assert learned.count("Permission denied") == 2, learned
    assert "No module named 'tinytorch_course'" in learned, learned
    assert (workspace / "tinytorch" / "tensor_base.py").is_file(), "./learn export wrote the learner's package"
    shot(ada, "2-learner-learn-check")
    assignments_tab(ada)
    fetched = assignment_item(ada, "fetched", MODULE)
    fetched.locator("a.assignment-notebooks-link").click()
    fetched.locator(".nested_list_item").get_by_role("button", name="Validate").click()
    ada.get_by_text("Success! Your notebook passes all the tests.").wait_for()
    shot(ada, "3-learner-validated")
    ada.keyboard.press("Escape")
    fetched.get_by_role("button", name="Submit").click()
    assignment_item(ada, "submitted", MODULE).wait_for()

    # The instructor sets the due date to now: Ada was on time, Blaise will be late.
    teacher.reload()
    formgrader_row(teacher, MODULE).locator("td.edit a").click()
    # (rounded up: the field takes whole seconds, and Ada may have submitted within this one)
    due = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=1)).replace(microsecond=0)
    teacher.locator("input.modal-duedate").evaluate("(input, value) => { input.value = value; }",
                                                    due.strftime("%Y-%m-%dT%H:%M:%S"))
    teacher.locator("input.modal-timezone").fill("UTC")
    teacher.locator(".modal button.save").click()
    teacher.locator(".modal.in, .modal.show").wait_for(state="hidden")
    time.sleep(max(0.0, (due - datetime.datetime.now(datetime.timezone.utc)).total_seconds()) + 1)

    blaise = log_in(browser, hub, hub.blaise)
    assignments_tab(blaise)
    assignment_item(blaise, "released", MODULE).get_by_role("button", name="Fetch").click()
    assignment_item(blaise, "fetched", MODULE).get_by_role("button", name="Submit").click()
    assignment_item(blaise, "submitted", MODULE).wait_for()

    # The instructor collects, autogrades each submission, generates and releases feedback.
    teacher.reload()
    formgrader_row(teacher, MODULE).locator("td.collect a").click()
    close_modal(teacher, "Success")
    teacher.goto(f"{hub.url}/user/{hub.instructor}/formgrader/manage_submissions/{MODULE}")
    for account in (hub.ada, hub.blaise):
        submission = teacher.locator("tr").filter(has=teacher.locator("td.student-id", has_text=account))
        submission.locator("td.autograde a").click()
        close_modal(teacher, "Success")
    shot(teacher, "4-instructor-autograded")
    teacher.goto(f"{hub.url}/user/{hub.instructor}/formgrader")
    formgrader_row(teacher, MODULE).locator("td.generate-feedback a").click()
    close_modal(teacher, "Success")
    formgrader_row(teacher, MODULE).locator("td.release-feedback a").click()
    close_modal(teacher, "Success")

    # Each learner fetches their feedback in the Assignments tab.
    for learner, page in ((hub.ada, ada), (hub.blaise, blaise)):
        assignments_tab(page)
        assignment_item(page, "submitted", MODULE).get_by_role("button", name="Fetch Feedback").click()
        page.get_by_text("(view feedback)").first.wait_for()
        shot(page, f"5-feedback-{learner.split('-')[1]}")
        assert feedback_file(hub, learner).name == f"{MODULE}.html"
    # Ada reads her feedback: every test passed, and no hidden test's source is shown.
    ada.goto(f"{hub.url}/user/{hub.ada}/files/{urllib.parse.quote(str(feedback_file(hub, hub.ada)))}")
    ada.get_by_text(re.compile(r"Score: (\d+\.\d) / \1")).first.wait_for()
    assert "BEGIN HIDDEN TESTS" not in ada.content()
    shot(ada, "6-learner-feedback")
    round_trip = time.monotonic() - up

    # Grades, read back from the instructor's gradebook and the formgrader.
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{hub.course() / 'gradebook.db'}") as gradebook:
        graded = {a: gradebook.find_submission(MODULE, a) for a in (hub.ada, hub.blaise)}
        scores = {a: (s.score, s.max_score, s.total_seconds_late) for a, s in graded.items()}
    assert scores[hub.ada][0] == scores[hub.ada][1] > 0, scores
    assert scores[hub.blaise][0] == 0, scores
    assert scores[hub.ada][2] == 0 and scores[hub.blaise][2] > 0, f"only Blaise is late: {scores}"
    maximum = f"{scores[hub.ada][1]:g}"
    for account, score in ((hub.ada, f"{maximum} / {maximum}"), (hub.blaise, f"0 / {maximum}")):
        teacher.goto(f"{hub.url}/user/{hub.instructor}/formgrader/manage_students/{account}")
        formgrader_row(teacher, MODULE).locator("td.score", has_text=score).wait_for()
        shot(teacher, f"7-instructor-grades-{account.split('-')[1]}")

    # Ctrl-C stops the hub, every server it started, their kernels and the proxy.
    children = descendants(hub.process.pid)
    assert hub.stop() == 0, (hub.folder / "hub.log").read_text()[-3000:]
    time.sleep(2)
    assert processes_of(hub.uids()) == [], "the learners' and instructor's processes must stop with the hub"
    assert [pid for pid in children if Path(f"/proc/{pid}").exists()] == [], "the proxy must stop too"
    (SHOTS / "timing.txt").write_text(f"hub up {up - started:.0f} s after ./course hub; "
                                      f"round trip, release to feedback read: {round_trip:.0f} s\n")
