"""The class hub's nbgrader exchange, tried by real learner accounts (no JupyterHub, no browser).

`hub.prepare_exchange` lays out the exchange as `./course hub` does; an instructor and two learners
(system accounts, removed afterwards) then run nbgrader's own release, fetch, submit and collect
with the servers' configuration (`hub.exchange_config`), while learner ada tries to take over the
exchange and blaise's submission. Needs root.
"""
import json
import os
import pwd
import secrets
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tinytorch_course.hub import hub
from tinytorch_course.nbgrader_api import CourseError

from conftest import REPO
from test_hub import hub_folder, python_open_to_all

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="makes system accounts (useradd) and runs "
                                                           "commands as them: needs root"),
              pytest.mark.xdist_group("accounts")]  # never beside tests/test_hub.py's hub (see there)
COURSE_ID, ASSIGNMENT = "tinytorch", "ps1"
HUB_FILES = REPO / "tinytorch_course" / "hub" / "hub_files"


class Class:
    """An instructor and two learners, with homes in a folder of their own."""

    def __init__(self, folder):
        self.folder, tag = folder, secrets.token_hex(2)
        self.instructor, self.ada, self.blaise = (f"ttx{tag}-{name}" for name in ("teacher", "ada", "blaise"))
        (folder / "homes").mkdir()
        for account in self.accounts():
            hub.ensure_account(account, folder / "homes", log=lambda message: None)

    def accounts(self):
        return [self.instructor, self.ada, self.blaise]

    def home(self, account):
        return pwd.getpwnam(account).pw_dir

    def run(self, account, args, cwd=None, pythonpath=(HUB_FILES,)):
        """`python ARGS` as `account` (its own user, groups and home); returns its stdout."""
        user = pwd.getpwnam(account)
        result = subprocess.run(
            ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups", "--",
             sys.executable, *args], cwd=cwd or user.pw_dir, capture_output=True, text=True,
            env={"HOME": user.pw_dir, "USER": account, "LOGNAME": account, "PATH": os.environ["PATH"],
                 "LANG": "C.UTF-8", "PYTHONPATH": os.pathsep.join(map(str, pythonpath))})
        assert result.returncode == 0, f"{account}: {args}\n{result.stdout}\n{result.stderr}"
        return result.stdout

    def nbgrader(self, account, *args, cwd=None, pythonpath=(HUB_FILES,)):
        return self.run(account, ["-m", "nbgrader", *args], cwd=cwd, pythonpath=pythonpath)

    def remove(self):
        for account in self.accounts():
            subprocess.run(["userdel", "--remove", account], capture_output=True)


@pytest.fixture(scope="module")
def people():
    with python_open_to_all():
        made = Class(hub_folder())
        try:
            yield made
        finally:
            made.remove()
            subprocess.run(["rm", "-rf", str(made.folder)])


ATTACKS = """
import json, os, shutil, sys
exchange, submission = sys.argv[1], sys.argv[2]
course = os.path.join(exchange, 'tinytorch')
attacks = {
    'rename the course folder aside': lambda: os.rename(course, os.path.join(exchange, 'aside')),
    'make the course folder anew': lambda: os.mkdir(course),
    'rename inbound aside': lambda: os.rename(os.path.join(course, 'inbound'), os.path.join(course, 'in2')),
    'pre-create the next release': lambda: os.mkdir(os.path.join(course, 'outbound', 'ps2')),
    'pre-create a feedback folder': lambda: os.mkdir(os.path.join(course, 'feedback', 'ps1')),
    'add a folder to the course': lambda: os.mkdir(os.path.join(course, 'extra')),
    'replace the released notebook': lambda: open(os.path.join(course, 'outbound', 'ps1', 'ps1.ipynb'), 'w'),
    'rename the release aside': lambda: os.rename(os.path.join(course, 'outbound', 'ps1'),
                                                  os.path.join(course, 'outbound', 'old')),
    'list the submissions': lambda: os.listdir(os.path.join(course, 'inbound')),
    "list blaise's submission": lambda: os.listdir(submission),
    "read blaise's notebook": lambda: open(os.path.join(submission, 'ps1.ipynb')).read(),
    "read blaise's submission secret": lambda: open(os.path.join(submission, 'submission_secret.txt')).read(),
    "replace blaise's notebook": lambda: open(os.path.join(submission, 'ps1.ipynb'), 'w'),
    "remove blaise's notebook": lambda: os.unlink(os.path.join(submission, 'ps1.ipynb')),
    "rename blaise's submission": lambda: os.rename(submission, submission.replace('blaise', 'ada')),
    "remove blaise's submission": lambda: shutil.rmtree(submission),
}
outcome = {}
for name, attack in attacks.items():
    try:
        attack()
        outcome[name] = 'done'
    except OSError as error:
        outcome[name] = type(error).__name__
print(json.dumps(outcome))
"""


def write_notebook(path, answer):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"answer = {answer!r}")]), str(path))


def test_a_learner_cannot_take_over_the_exchange_and_nbgrader_still_works(people):
    state = people.folder / "state"
    state.mkdir(mode=0o755)
    exchange = hub.prepare_exchange(state, COURSE_ID, people.instructor)
    config = hub.exchange_config(exchange, COURSE_ID)
    for account in [people.ada, people.blaise]:  # what the learners' servers read from env/etc/jupyter
        people.run(account, ["-c", f"open('nbgrader_config.py', 'w').write({config!r})"])
    course = Path(people.home(people.instructor)) / "course"
    write_notebook(course / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", None)
    (course / "nbgrader_config.py").write_text(
        config + f"c.CourseDirectory.root = {str(course)!r}\n"
        'c.ExchangeFactory.collect = "tinytorch_course.grading.intake.TrustedExchangeCollect"\n')
    hub.give_to(course, people.instructor)
    people.nbgrader(people.instructor, "release_assignment", ASSIGNMENT, cwd=course)
    assert hub.prepare_exchange(state, COURSE_ID, people.instructor) == exchange  # ./course hub again
    modes = {name: oct((exchange / COURSE_ID / name).stat().st_mode & 0o7777) for name in hub.EXCHANGE_FOLDERS}
    assert oct(exchange.stat().st_mode & 0o7777) == "0o1777" and modes == {
        "": "0o755", "outbound": "0o755", "inbound": "0o3733", "feedback": "0o711"}, modes

    submissions = {}
    for account in [people.ada, people.blaise]:
        people.nbgrader(account, "fetch_assignment", ASSIGNMENT)
        fetched = Path(people.home(account)) / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
        write_notebook(fetched, f"work of {account}")  # the learner's file, written in place
        before = set(os.listdir(exchange / COURSE_ID / "inbound"))
        people.nbgrader(account, "submit", ASSIGNMENT)
        submissions[account], = set(os.listdir(exchange / COURSE_ID / "inbound")) - before
    theirs = exchange / COURSE_ID / "inbound" / submissions[people.blaise]
    assert oct(theirs.stat().st_mode & 0o7777) == oct(0o770)
    assert theirs.stat().st_gid == pwd.getpwnam(people.instructor).pw_gid

    # ada knows everything, even the name of blaise's submission (72 random bits in nbgrader)
    outcome = json.loads(people.run(people.ada, ["-c", ATTACKS, str(exchange), str(theirs)]))
    assert "done" not in outcome.values(), outcome
    assert len(outcome) == 16

    people.nbgrader(people.instructor, "collect", ASSIGNMENT, cwd=course, pythonpath=(REPO, HUB_FILES))
    for account in [people.ada, people.blaise]:
        collected = nbformat.read(f"{course}/submitted/{account}/{ASSIGNMENT}/{ASSIGNMENT}.ipynb", 4)
        assert collected.cells[0].source == f"answer = {'work of ' + account!r}"

    # the control: on nbgrader's plain `chmod ugo+rw` root (no sticky bit) the first attack succeeds
    exchange.chmod(0o777)
    people.run(people.ada, ["-c", f"import os\nos.rename({str(exchange / COURSE_ID)!r}, {str(exchange / 'aside')!r})"])
    assert (exchange / "aside" / "inbound").is_dir()


def test_a_course_folder_that_a_learner_made_first_is_refused(people):
    state = people.folder / "early"
    (state / "exchange").mkdir(parents=True, mode=0o755)
    (state / "exchange").chmod(0o1777)
    people.run(people.ada, ["-c", f"import os\nos.mkdir({str(state / 'exchange' / COURSE_ID)!r})"])
    with pytest.raises(CourseError, match=f"not a folder of the instructor.*owner: {people.ada}"):
        hub.prepare_exchange(state, COURSE_ID, people.instructor)
