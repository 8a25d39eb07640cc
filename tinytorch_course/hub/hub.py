"""`hub`: a class server on this machine: JupyterHub, nbgrader's exchange, and one account per person.

`prepare` lays out (or brings up to date) everything the hub needs, then `serve` runs JupyterHub in
the foreground until Ctrl-C, which stops every server it started and its proxy. Run as root: it
creates system accounts and each server runs as its account. The state folder holds:

    env/                  the servers' Python: the learner kit's requirements.lock (JupyterHub
                          included), plus the grader kernels and nbgrader's private submit
                          (hub_files/tinytorch_exchange.py); the course's own code reaches it only
                          through a path in the instructor's home (tinytorch-course.pth)
    proxy/                configurable-http-proxy from npm, pinned by hub_files/package-lock.json
    exchange/             nbgrader's exchange (c.Exchange.root): open to all with the sticky bit, and
                          the course's folder in it made here for the instructor (`prepare_exchange`)
    config/learner/       Jupyter configuration of the learners' servers (JUPYTER_CONFIG_PATH):
                          no formgrader, no Create Assignment, only the Python 3 kernel
    config/instructor/    the instructor's: nbgrader reads the course's own nbgrader_config.py
    kit/                  the learner kit (`./course workspace`), copied into each learner's home
    roster.csv, accounts.csv (passwords of the accounts made here, root only), hub.json,
    jupyterhub_config.py (hub_files/), and JupyterHub's database, cookie secret and pid file

Homes: a learner's `~/tinytorch-workspace` is the kit with `modules/` empty (the Assignments tab
fetches each module into it as the instructor releases it) and `.venv` pointing at env/, so
`./learn export/check/status/milestone` work there as in the zip; the instructor's
`~/tinytorch-course` is a copy of the course (sources, release, solutions, reference package,
course tooling, nbgrader_config.py) with its gradebook.
"""
import csv
import hashlib
import json
import os
from pathlib import Path
import pwd
import re
import secrets
import shutil
import stat
import subprocess
import sys

from .. import notebooks
from ..grading.grading import import_roster
from ..nbgrader_api import CourseError, api, check, load_config
from ..kit.workspace import KIT_NAME, learner_lock, make_workspace

FILES = Path(__file__).resolve().parent / "hub_files"
COURSE_FOLDER = "tinytorch-course"  # in the instructor's home
# What the instructor's copy of the course holds (runtime state, such as the gradebook, is made there).
COURSE_FILES = ["modules", "mistakes", "tinytorch", "tinytorch_course", "release", "solutions", "nbgrader_config.py",
                "settings.ini"]
ACCOUNT = re.compile(r"^[a-z][a-z0-9-]{0,31}$")  # a student id that is also a valid system account
# Learners' servers: the nbgrader panels that only an instructor uses are off.
LEARNER_LAB_OFF = ["@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                   "@jupyter/nbgrader:course-list"]


def run(command, what, **kwargs):
    """Run a setup command; raise `CourseError` with the end of its output if it fails."""
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip().splitlines()[-30:]
        raise CourseError(f"{what} failed:\n" + "\n".join(output))
    return result.stdout


def read_roster(roster_csv):
    """The learners' ids of a roster CSV (column `id`), each checked to be a usable account name."""
    with open(roster_csv, newline="") as f:
        ids = [row["id"].strip() for row in csv.DictReader(f)]
    bad = [i for i in ids if not ACCOUNT.match(i)]
    if bad:
        raise CourseError(f"these ids cannot be system accounts: {', '.join(bad)} (use lowercase letters, "
                          "digits and '-', starting with a letter, at most 32 characters)")
    return ids


def ensure_account(name, homes, log):
    """The account `name`, made (with a home folder only it can enter) if it does not exist yet.

    Returns the new account's password, or None for an account that already existed (untouched)."""
    try:
        pwd.getpwnam(name)
        return None
    except KeyError:
        pass
    run(["useradd", "--create-home", "--home-dir", str(Path(homes) / name), "--shell", "/bin/bash",
         "--user-group", name], f"useradd {name}")
    os.chmod(pwd.getpwnam(name).pw_dir, 0o700)
    password = secrets.token_urlsafe(9)
    run(["chpasswd"], f"setting the password of {name}", input=f"{name}:{password}\n")
    log(f"  made the account {name}")
    return password


def give_to(path, name):
    """Make `name` the owner of `path` and everything in it."""
    account = pwd.getpwnam(name)
    for folder, dirs, files in os.walk(path):
        for entry in [folder, *(os.path.join(folder, d) for d in dirs), *(os.path.join(folder, f) for f in files)]:
            os.chown(entry, account.pw_uid, account.pw_gid, follow_symlinks=False)


def course_folder(instructor):
    return Path(pwd.getpwnam(instructor).pw_dir) / COURSE_FOLDER


def prepare_course(root, instructor, roster_csv, log):
    """The instructor's copy of the course, made once (it then holds the class's gradebook): every
    module generated into its gradebook, ready to release, and the roster imported."""
    course = course_folder(instructor)
    if not course.exists():
        staging = course.with_name(COURSE_FOLDER + ".new")
        shutil.rmtree(staging, ignore_errors=True)
        for name in COURSE_FILES:
            source = Path(root) / name
            if source.is_dir():
                shutil.copytree(source, staging / name, ignore=shutil.ignore_patterns("__pycache__", "hub_files"))
            else:
                shutil.copy2(source, staging / name)
        grader = api(staging)
        for module_id in notebooks.module_ids(staging):
            check(grader.generate_assignment(module_id, force=True, create=True),
                  f"generate_assignment {module_id}")
        staging.rename(course)
        log(f"  made the instructor's course folder {course}")
    import_roster(course, roster_csv)
    give_to(course, instructor)
    return course


def closed_folder(python):
    """The first folder on the way to `python` that other accounts cannot enter, or None."""
    for folder in reversed(Path(os.path.realpath(python)).parents):
        if not folder.stat().st_mode & 0o001:
            return folder
    return None


def digest(*texts):
    return hashlib.sha256("\0".join(texts).encode()).hexdigest()


def prepare_env(root, state, course, log):
    """env/: a venv from the learner kit's lock, the grader kernels, JupyterLab's settings
    overrides from the kit, and the exchange for every server's nbgrader."""
    env, lock_text = state / "env", learner_lock((Path(root) / "requirements.lock").read_text())
    marker, python = env / "tinytorch-hub-installed", env / "bin" / "python"
    if (python.exists() and os.path.realpath(python) != os.path.realpath(sys._base_executable)
            or marker.is_file() and marker.read_text() != digest(lock_text)):
        shutil.rmtree(env)  # made from another lock or another Python
    if not marker.is_file():  # (an interrupted install resumes)
        log("  installing the servers' Python environment (once; under a minute)")
        (state / "requirements.lock").write_text(lock_text)
        if not python.exists():
            run([sys._base_executable, "-m", "venv", str(env)], "making env/")
        # uv (the course's own, from its lock): every pin is there; files copied, not linked to uv's cache;
        # bytecode compiled now, since the servers' accounts cannot write it
        run([sys.executable, "-m", "uv", "pip", "install", "--python", str(python), "--no-deps",
             "--link-mode=copy", "--compile-bytecode", "--quiet", "-r", str(state / "requirements.lock")],
            "installing env/ from the learner kit's lock")
        marker.write_text(digest(lock_text))
    site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], "env/").strip()
    # Only the instructor can enter their home: for learners this path does not exist, so neither
    # the reference package nor the course tooling can be imported in their servers.
    Path(site, "tinytorch-course.pth").write_text(f"{course}\n")
    run([str(python), "-c", "from tinytorch_course.nbgrader_api import install_grader_kernel as i; i()"],
        "installing the grader kernels into env/")
    settings = env / "share" / "jupyter" / "lab" / "settings"
    settings.mkdir(parents=True, exist_ok=True)
    shutil.copy2(FILES.parent.parent / "kit" / "lab-overrides.json", settings / "overrides.json")
    (env / "etc" / "jupyter").mkdir(parents=True, exist_ok=True)
    # Terminals: a plain bash keeps the server's PATH (env/bin first), where a login shell would
    # reset it from /etc/profile and lose python, nbgrader and jupyter.
    (env / "etc" / "jupyter" / "jupyter_server_config.json").write_text(json.dumps(
        {"ServerApp": {"terminado_settings": {"shell_command": ["/bin/bash"]}}}, indent=1))
    shutil.copy2(FILES / "tinytorch_exchange.py", Path(site, "tinytorch_exchange.py"))
    (env / "etc" / "jupyter" / "nbgrader_config.py").write_text(
        exchange_config(state / "exchange", load_config(root).CourseDirectory.course_id))
    return env


def exchange_config(exchange, course_id):
    """The servers' nbgrader configuration: the exchange shared by all accounts, and private
    submissions (hub_files/tinytorch_exchange.py, installed beside nbgrader)."""
    return ('"""nbgrader on the class hub (./course hub): the exchange shared by all accounts."""\n'
            "c = get_config()  # noqa: F821\n"
            f"c.Exchange.root = {str(exchange)!r}\n"
            f"c.CourseDirectory.course_id = {course_id!r}\n"
            'c.ExchangeFactory.submit = "tinytorch_exchange.PrivateSubmit"\n')


def prepare_proxy(state, log):
    """proxy/: configurable-http-proxy, installed with `npm ci` from the pinned lock."""
    proxy = state / "proxy"
    command = proxy / "node_modules" / ".bin" / "configurable-http-proxy"
    lock = (FILES / "package-lock.json").read_text()
    if not command.exists() or (proxy / "package-lock.json").read_text() != lock:
        if not shutil.which("npm"):
            raise CourseError("JupyterHub's proxy (configurable-http-proxy) comes from npm: install Node.js "
                              "18 or newer and npm (Debian: apt-get install nodejs npm)")
        log("  installing configurable-http-proxy (npm ci)")
        proxy.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy2(FILES / name, proxy / name)
        run(["npm", "ci", "--omit=dev", "--no-audit", "--no-fund"], "npm ci of configurable-http-proxy", cwd=proxy)
    return command


# nbgrader's exchange below its root, as nbgrader's own release makes it (exchange/default/
# release_assignment.py, release_feedback.py): learners read outbound, hand in to inbound without
# seeing it (setgid: submissions belong to the instructor's group), and reach feedback only by the
# name of their own file. Added: the sticky bit on inbound, so that a learner who learns the name of
# another's submission still cannot rename or delete it (and `PrivateSubmit` keeps it unreadable).
EXCHANGE_FOLDERS = {"": 0o755, "outbound": 0o755, "inbound": 0o3733, "feedback": 0o711}


def prepare_exchange(state, course_id, instructor):
    """exchange/: nbgrader's exchange root, open to every account with the sticky bit (1777, as
    /tmp: no account can rename or remove what another made there), and the course's folder in it
    with inbound, outbound and feedback, made for the instructor now, before any learner can log
    in. A course folder that someone else made first is refused, never reused."""
    exchange = state / "exchange"
    exchange.mkdir(exist_ok=True)
    os.chown(exchange, 0, 0)
    exchange.chmod(0o1777)
    account = pwd.getpwnam(instructor)
    for name, mode in EXCHANGE_FOLDERS.items():
        folder = exchange / course_id / name
        try:
            folder.mkdir()
            os.chown(folder, account.pw_uid, account.pw_gid)
        except FileExistsError:
            pass
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != account.pw_uid:
            try:
                owner = pwd.getpwuid(info.st_uid).pw_name
            except KeyError:
                owner = info.st_uid
            raise CourseError(f"{folder} is not a folder of the instructor {instructor!r} (owner: {owner}): "
                              "another account made it, so it cannot be trusted. Move it out of the exchange "
                              "(as root), look at what it holds, and run ./course hub again")
        os.chown(folder, account.pw_uid, account.pw_gid, follow_symlinks=False)
        os.chmod(folder, mode)  # a folder, not a link (lstat above)
    return exchange


def prepare_config(state, course):
    """config/: what differs between the learners' servers and the instructor's."""
    learner = state / "config" / "learner"
    (learner / "labconfig").mkdir(parents=True, exist_ok=True)
    (learner / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {name: True for name in LEARNER_LAB_OFF}}, indent=1))
    (learner / "jupyter_server_config.json").write_text(json.dumps({
        "ServerApp": {"jpserver_extensions": {"nbgrader.server_extensions.formgrader": False}},
        "KernelSpecManager": {"allowed_kernelspecs": ["python3"]}}, indent=1))
    instructor = state / "config" / "instructor"
    instructor.mkdir(parents=True, exist_ok=True)
    # The one nbgrader configuration of the instructor's servers, terminals and the formgrader
    # (its Autograde button included): the course's own, in the instructor's copy of the course.
    (instructor / "nbgrader_config.py").write_text(
        '"""The instructor on the class hub: nbgrader reads the course\'s own nbgrader_config.py."""\n'
        f"load_subconfig({str(course / 'nbgrader_config.py')!r})  # noqa: F821\n")


def provision_workspace(kit, env, learner, log):
    """`~/tinytorch-workspace` for a learner: the kit without its notebooks (the Assignments tab
    fetches them into modules/), `.venv` -> env/, and where nbgrader fetches to. Made once: a
    learner's work is never overwritten."""
    workspace = Path(pwd.getpwnam(learner).pw_dir) / KIT_NAME
    if workspace.exists():
        return workspace
    shutil.copytree(kit, workspace, ignore=lambda folder, names: names if Path(folder).name == "modules" else [])
    (workspace / ".venv").symlink_to(env)
    (workspace / "nbgrader_config.py").write_text(
        '"""nbgrader in this workspace: the Assignments tab fetches each module into modules/."""\n'
        "from pathlib import Path\n\n"
        "c = get_config()  # noqa: F821\n"
        'c.Exchange.assignment_dir = str(Path(__file__).resolve().parent / "modules")\n')
    give_to(workspace, learner)
    log(f"  provisioned {workspace}")
    return workspace


def prepare(root, state, roster=None, instructor="instructor", homes="/home", port=8000, log=print):
    """Make or update everything `serve` needs; return the path of the JupyterHub configuration."""
    root, state = Path(root).resolve(), Path(state).resolve()
    if os.geteuid() != 0:
        raise CourseError("./course hub makes a system account for each learner and runs each server as its "
                          "account: run it as root (sudo ./course hub ...)")
    if not notebooks.notebook_path(root, "release", notebooks.module_ids(root)[0]).is_file():
        raise CourseError("release/ is missing: run ./course build first")
    closed = closed_folder(sys._base_executable)
    if closed:
        raise CourseError(f"every account runs its server with this Python ({sys._base_executable}), but only "
                          f"root can enter {closed}: let accounts pass through it (chmod o+x {closed}; they "
                          "still cannot list it), or set up the course with a Python installed for all")
    os.umask(0o022)  # what is made here is read by every account (homes are closed explicitly)
    state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o755)
    if roster:
        shutil.copy(roster, state / "roster.csv")
    elif not (state / "roster.csv").is_file():
        raise CourseError("the first ./course hub needs the class: --roster roster.csv (columns id, "
                          "first_name, last_name, email)")
    learners = read_roster(state / "roster.csv")
    if instructor in learners:
        raise CourseError(f"the instructor's account {instructor!r} is also on the roster")
    log(f"preparing the class hub in {state}")
    if root.stat().st_mode & 0o007:
        root.chmod(root.stat().st_mode & ~0o007)
        log(f"  closed {root} to other accounts (chmod o-rwx): it holds solutions and hidden tests")
    passwords = {instructor: ensure_account(instructor, homes, log)}
    # the exchange's course folder is the instructor's before any learner account exists
    prepare_exchange(state, load_config(root).CourseDirectory.course_id, instructor)
    passwords.update({name: ensure_account(name, homes, log) for name in learners})
    made = {name: password for name, password in passwords.items() if password}
    if made:
        accounts = state / "accounts.csv"
        new_file = not accounts.exists()
        with open(os.open(accounts, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "w", newline="") as f:
            writer = csv.writer(f)
            if new_file:
                writer.writerow(["account", "password"])
            writer.writerows(made.items())
    course = prepare_course(root, instructor, state / "roster.csv", log)
    env = prepare_env(root, state, course, log)
    proxy = prepare_proxy(state, log)
    prepare_config(state, course)
    kit, _ = make_workspace(root, state / "kit", log=lambda message: None)
    for learner in learners:
        provision_workspace(kit, env, learner, log)
    (state / "hub.json").write_text(json.dumps({
        "state": str(state), "port": port, "env": str(env), "proxy": str(proxy), "instructor": instructor,
        "learners": learners, "workspace": KIT_NAME}, indent=1))
    shutil.copy2(FILES / "jupyterhub_config.py", state / "jupyterhub_config.py")
    if made:
        log(f"passwords of the {len(made)} new account(s): {state / 'accounts.csv'} (readable by root only)")
    return state / "jupyterhub_config.py"


def serve(state, log=print):
    """Run JupyterHub in the foreground (this process becomes it); Ctrl-C stops it and its servers."""
    state = Path(state).resolve()
    settings = json.loads((state / "hub.json").read_text())
    log(f"the class hub: http://127.0.0.1:{settings['port']}/  (instructor: {settings['instructor']}, "
        f"{len(settings['learners'])} learners; Ctrl-C stops it and every server it started)")
    sys.stdout.flush()
    os.chdir(state)
    python = str(Path(settings["env"]) / "bin" / "python")
    os.execv(python, [python, "-m", "jupyterhub", "-f", str(state / "jupyterhub_config.py")])
