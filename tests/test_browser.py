"""End to end in a real browser: a learner solves an exercise in JupyterLab; an instructor opens formgrader.

Headless Chromium (Debian's `chromium` package; Playwright downloads no browser) drives JupyterLab
served on 127.0.0.1. Screenshots land in artifacts/browser/.
"""
import contextlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tinytorch_course import notebooks
from tinytorch_course.kit.workspace import make_workspace
from conftest import REPO, copy_course

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SHOTS = REPO / "artifacts" / "browser"

pytestmark = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                                reason="no chromium: install Debian's package (apt-get install chromium)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def jupyter_lab(command, cwd, home, env=None):
    """Serve JupyterLab from `cwd` with `command` (+ server options); yield its base URL and token."""
    port, token = free_port(), secrets.token_hex(8)
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])  # nbgrader runs alembic
    env = dict(os.environ, **(env or {}), PATH=path, HOME=str(home), JUPYTER_CONFIG_DIR=str(home / "config"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"), JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"))
    log = open(home / "server.log", "w")
    server = subprocess.Popen([*command, "--no-browser", "--ip", "127.0.0.1", f"--port={port}",
                               f"--ServerApp.token={token}", "--allow-root",
                               f"--ServerApp.root_dir={cwd}"],
                              cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("JupyterLab did not start:\n" + (home / "server.log").read_text())
                time.sleep(0.3)
        yield url, token
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def solution_of(grade_id, module_id="01_tensor"):
    source = notebooks.cells_by_id(notebooks.read(notebooks.notebook_path(REPO, "modules", module_id)))
    return notebooks.without_markers(source[grade_id].source)


def test_a_learner_fills_an_exercise_and_sees_its_visible_test_pass(browser, tmp_path):
    kit, _ = make_workspace(REPO, tmp_path / "out", log=lambda message: None)
    SHOTS.mkdir(parents=True, exist_ok=True)
    home = tmp_path / "home"
    home.mkdir()
    # `./learn lab`, as the learner starts it (with this Python: the same pinned environment as .venv)
    with jupyter_lab([str(kit / "learn"), "lab"], kit, home, env={"LEARN_PYTHON": sys.executable}) \
            as (url, token):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(90_000)
        page.goto(f"{url}/lab/tree/modules/01_tensor/01_tensor.ipynb?token={token}")
        page.locator(".jp-Notebook").wait_for()
        news = page.request.get(f"{url}/lab/api/settings/@jupyterlab/apputils-extension:notification?token={token}")
        fetch_news = news.json()["schema"]["properties"]["fetchNews"]["default"]  # overrides set defaults
        assert fetch_news == "false", "the kit's lab settings must turn Jupyter news off"
        page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for()
        cell = page.locator(".jp-CodeCell", has_text="def as_dtype(dtype):")  # Run All stops at the first failing
        cell.locator(".cm-content").click()                                   # cell: the exercise before it, solved
        page.keyboard.press("Control+a")
        page.keyboard.insert_text(solution_of("dtypes"))
        cell = page.locator(".jp-CodeCell", has_text="def contiguous_strides(shape):")
        cell.locator(".cm-content").click()
        page.keyboard.press("Control+a")
        # The solution, and a line that shows which tinytorch the kernel imports.
        page.keyboard.insert_text(solution_of("contiguous_strides")
                                  + "\nimport tinytorch\nprint('tinytorch from', tinytorch.__file__)")
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Run$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Run All Cells$")).click()
        passed = page.locator(".jp-OutputArea-output", has_text="contiguous_strides: visible tests pass")
        passed.wait_for()
        imported = page.locator(".jp-OutputArea-output", has_text="tinytorch from").inner_text()
        assert imported.strip() == f"tinytorch from {kit / 'tinytorch' / '__init__.py'}", \
            "the kernel must import the workspace's own package"
        passed.scroll_into_view_if_needed()
        assert page.get_by_text("notified about official Jupyter news").count() == 0, "no news pop-up"
        page.screenshot(path=str(SHOTS / "learner-visible-test-passes.png"))
        page.close()


def test_the_instructor_opens_formgrader(browser, tmp_path):
    course = copy_course(tmp_path / "course")
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "exchange").mkdir()  # the instructor's own exchange folder (nbgrader's default is system-wide)
    (home / "config" / "nbgrader_config.py").write_text(f"c.Exchange.root = {str(home / 'exchange')!r}\n")
    with jupyter_lab([sys.executable, "-m", "jupyter", "lab"], course, home) as (url, token):
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(60_000)
        response = page.goto(f"{url}/formgrader?token={token}")
        assert response.ok
        page.get_by_text("Manage Assignments").first.wait_for()
        for module_id in notebooks.module_ids(REPO):  # the course's modules, read from its folder
            page.get_by_role("link", name=module_id, exact=True).wait_for()
        assert not page.get_by_text("does not exist and could not be created").is_visible()
        page.screenshot(path=str(SHOTS / "instructor-formgrader.png"))
        page.close()
