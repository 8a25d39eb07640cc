"""The learner's workspace kit: it leaks nothing, and its ./learn commands take a learner to a submission."""
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from tinytorch_course import grading, notebooks
from tinytorch_course.leaks import leaks
from tinytorch_course.workspace import KIT_NAME, kit_files, learner_lock, make_workspace
from conftest import REPO, copy_course

MODULES = notebooks.module_ids(REPO)


def shows(table, name, state):
    """Whether a `status` table has the row `name  state` (columns are padded to the longest name)."""
    return re.search(rf"^\s*{re.escape(name)}\s+{re.escape(state)}", table, re.M) is not None


@pytest.fixture(scope="module")
def kit_and_zip(tmp_path_factory):
    return make_workspace(REPO, tmp_path_factory.mktemp("kit"), log=lambda message: None)


@pytest.fixture
def workspace(kit_and_zip, tmp_path):
    """A fresh copy of the kit, as a learner unpacks it."""
    return shutil.copytree(kit_and_zip[0], tmp_path / KIT_NAME, symlinks=True)


def learn(workspace, *args):
    """`./learn ARGS` in the workspace, with this Python (the same pinned environment as .venv)."""
    env = dict(os.environ, LEARN_PYTHON=sys.executable)
    env.pop("PYTHONPATH", None)
    result = subprocess.run([str(workspace / "learn"), *args], cwd=workspace, env=env,
                            capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout + result.stderr


def fill_solutions(workspace, module_id):
    """Do every exercise of a module the way the reference solution does."""
    source = notebooks.cells_by_id(notebooks.read(notebooks.notebook_path(REPO, "modules", module_id)))
    path = notebooks.notebook_path(workspace, "modules", module_id)
    notebook = notebooks.read(path)
    for cell in notebook.cells:
        if notebooks.is_solution(cell):
            cell.source = notebooks.without_markers(source[notebooks.grade_id(cell)].source)
    notebooks.write(notebook, path)


def source_notebooks():
    return [notebooks.read(notebooks.notebook_path(REPO, "modules", m)) for m in MODULES]


def test_kit_holds_no_solutions_no_hidden_tests_and_no_gradebook(kit_and_zip, tmp_path):
    kit, archive = kit_and_zip
    with zipfile.ZipFile(archive) as z:
        z.extractall(tmp_path)
    for folder in [kit, tmp_path / KIT_NAME]:
        files = kit_files(folder)
        assert not leaks(source_notebooks(), files)
        names = {p.name for p in files}
        assert not names & {"gradebook.db", "nbgrader_config.py"}
        assert not any(part in ("solutions", "source", "autograded", "feedback")
                       for p in files for part in p.relative_to(folder).parts)


def lock_pins(text):
    """The `name==version` lines of a lock, names normalised."""
    return {line.split("#")[0].strip().lower().replace("_", "-") for line in text.splitlines()
            if "==" in line and not line.startswith("#")}


def test_the_kit_lock_keeps_everything_its_packages_need():
    """Every requirement of every package in the kit's lock (as installed here) is in the lock too."""
    from importlib import metadata
    from packaging.requirements import Requirement

    kept = {pin.split("==")[0] for pin in lock_pins(learner_lock((REPO / "requirements.lock").read_text()))}
    missing = set()
    for name in kept:
        for line in metadata.requires(name) or []:
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            needed = requirement.name.lower().replace("_", "-")
            if needed not in kept and needed != "wheel":  # pip provides wheel itself
                missing.add(f"{name} needs {needed}")
    assert not missing, sorted(missing)


def test_kit_layout(kit_and_zip):
    kit, archive = kit_and_zip
    files = {str(p.relative_to(kit)) for p in kit_files(kit)}
    package = {f for f in files if f.startswith("tinytorch/")}
    assert package == {"tinytorch/__init__.py", "tinytorch/testing.py"}, "the learner's exports fill it"
    assert {f"modules/{m}/{m}.ipynb" for m in MODULES} <= files
    assert {"README.md", "setup", "learn", "settings.ini", "requirements.lock"} <= files
    pins = lock_pins((kit / "requirements.lock").read_text())
    assert pins <= lock_pins((REPO / "requirements.lock").read_text()), "the kit pins the course's versions"
    names = {pin.split("==")[0] for pin in pins}
    assert {"numpy", "nbdev", "jupyterlab", "matplotlib", "scikit-learn", "tqdm"} <= names
    assert not {"playwright", "pytest", "hypothesis"} & names, "the course's test tools stay out of the kit"
    with zipfile.ZipFile(archive) as z:
        assert {n.split("/", 1)[1] for n in z.namelist()} == files
        for script in ("setup", "learn"):
            assert (z.getinfo(f"{KIT_NAME}/{script}").external_attr >> 16) & 0o111, f"{script} runs"


def test_an_untouched_workspace_is_not_started_and_fails_its_checks(workspace):
    code, out = learn(workspace, "status")
    assert code == 0 and all(shows(out, m, "not started") for m in MODULES), out
    assert "locked" in out
    code, out = learn(workspace, "check", "01")
    assert code == 1, out
    assert "0/8 pass in the notebook" in out
    assert "first failure: contiguous_strides_visible (in the notebook)" in out
    assert "line 1: assert_equal(contiguous_strides((2, 3)), (3, 1)" in out
    assert "NotImplementedError" in out and "./learn export 01" in out
    # A locked milestone does not run: it names the modules to finish, as status does.
    for milestone, needs in [("01", MODULES[:1]), ("05", MODULES[:5])]:
        code, out = learn(workspace, "milestone", milestone)
        assert code == 2 and "is locked" in out and "Traceback" not in out, out
        assert all(re.search(rf"^  {m}: .* -> finish it, `./learn export {m[:2]}`, `./learn check {m[:2]}`$",
                             out, re.M) for m in needs), out
        assert MODULES[5] not in out


def test_the_usage_lines_match_the_readme(workspace):
    readme = (workspace / "README.md").read_text()
    code, out = learn(workspace, "--help")
    assert code == 0
    listed = set(re.findall(r"^    (\w+)", out, re.M))
    assert listed == {"lab", "status", "export", "check", "milestone", "submit"}, out
    assert all(f"./learn {command}" in readme for command in listed)
    for command, usage, example in [("check", "learn check [-h] NN", "./learn check 01"),
                                    ("export", "learn export [-h] NN", "./learn export 01"),
                                    ("submit", "learn submit [-h] YOUR-ID [NN ...]", "./learn submit YOUR-ID 01")]:
        out = learn(workspace, command, "--help")[1]
        assert out.startswith(f"usage: {usage}\n") and example in readme, out


def test_the_gitignore_keeps_out_what_the_commands_write(workspace):
    for path in [".venv/bin/python", ".learn/state.json", "submission/a_01.ipynb", "artifacts/milestone-gpt.png",
                 "artifacts/milestone-gpt.ckpt", "modules/01_tensor/.ipynb_checkpoints/x.ipynb"]:
        (workspace / path).parent.mkdir(parents=True, exist_ok=True)
        (workspace / path).write_text("")
    run = lambda *args: subprocess.run(["git", *args], cwd=workspace, capture_output=True, text=True, check=True)
    run("init", "-q")
    untracked = {line[3:] for line in run("status", "--porcelain", "-uall").stdout.splitlines()}
    assert untracked and not {p for p in untracked if p.split("/")[0] in (".venv", ".learn", "submission",
                                                                         "artifacts") or "checkpoints" in p}


def test_a_learner_solves_exports_checks_and_unlocks_the_milestone(workspace):
    fill_solutions(workspace, "01_tensor")
    # A learner's note in a test cell: check runs the tests as handed out, and status still follows it.
    path = notebooks.notebook_path(workspace, "modules", "01_tensor")
    notebook = notebooks.read(path)
    next(c for c in notebook.cells if notebooks.is_test(c)).source += "\n# my note: this one was hard"
    notebooks.write(notebook, path)
    code, out = learn(workspace, "status")
    assert shows(out, "01_tensor", "in progress"), out
    code, out = learn(workspace, "export", "01")
    assert code == 0 and "tinytorch/tensor.py" in out, out
    assert (workspace / "tinytorch" / "tensor.py").is_file()
    assert shows(learn(workspace, "status")[1], "01_tensor", "exported")
    code, out = learn(workspace, "check", "01")
    assert code == 0, out
    assert "8/8 pass in the notebook" in out and "8/8 pass against tinytorch.tensor" in out
    code, out = learn(workspace, "status")
    assert shows(out, "01_tensor", "checks pass") and shows(out, "01_your_own_tensor", "unlocked"), out
    code, out = learn(workspace, "milestone", "01")
    assert code == 0 and "milestone 01 passed" in out, out

    # The package column tests the exported package, not the notebook: break only the package.
    exported = workspace / "tinytorch" / "tensor.py"
    text = exported.read_text()
    exported.write_text(text.replace("def contiguous_strides(shape):",
                                     "def contiguous_strides(shape):\n    return (0,) * len(shape)", 1))
    assert not shows(learn(workspace, "status")[1], "01_tensor", "checks pass"), "a changed package needs a check"
    code, out = learn(workspace, "check", "01")
    assert code == 1 and "8/8 pass in the notebook" in out, out
    assert "first failure: contiguous_strides_visible (package)" in out


def test_exports_of_modules_01_to_05_give_torch_style_optim_and_data_modules(workspace):
    for module_id in MODULES[:5]:
        fill_solutions(workspace, module_id)
        assert learn(workspace, "export", module_id[:2])[0] == 0
    assert learn(workspace, "export", "05")[0] == 0  # exporting again replaces, never appends
    optim_py = (workspace / "tinytorch" / "optim.py").read_text()
    assert optim_py.count("from tinytorch.training import") == 1, optim_py
    code = ("import tinytorch.optim as optim, tinytorch.data as data, tinytorch.training as t; "
            "print(optim.AdamW is t.AdamW, data.DataLoader is t.DataLoader, t.__file__)")
    run = subprocess.run([sys.executable, "-c", code], cwd=workspace, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(workspace)))
    assert run.stdout.split() == ["True", "True", str(workspace / "tinytorch" / "training.py")], run.stderr


def test_check_uses_the_tests_as_handed_out(workspace):
    path = notebooks.notebook_path(workspace, "modules", "01_tensor")
    notebook = notebooks.read(path)
    for cell in notebook.cells:
        if notebooks.is_test(cell):
            cell.source = 'print("all fine")'
    notebook.cells = [c for c in notebook.cells if notebooks.grade_id(c) != "elementwise_visible"]
    notebooks.write(notebook, path)
    code, out = learn(workspace, "check", "01")
    assert code == 1 and "0/8 pass in the notebook" in out, out
    assert "elementwise_visible         2       FAIL" in out


def test_the_submission_lands_where_the_instructor_collects_it(workspace, tmp_path):
    fill_solutions(workspace, "01_tensor")
    code, out = learn(workspace, "submit", "not valid!")
    assert code == 2 and "letters, digits" in out
    code, out = learn(workspace, "submit", "ada-1")
    assert code == 0, out
    handed_in = workspace / "submission" / "ada-1_01_tensor.ipynb"
    assert sorted((workspace / "submission").iterdir()) == [handed_in]

    course = copy_course(tmp_path / "course")
    (tmp_path / "roster.csv").write_text("id,first_name,last_name,email\nada-1,Ada,L,\n")
    grading.import_roster(course, tmp_path / "roster.csv")
    archive = course / "downloaded" / "01_tensor" / "archive" / "lms-download.zip"
    archive.parent.mkdir(parents=True)
    with zipfile.ZipFile(archive, "w") as z:
        z.write(handed_in, f"submissions/{handed_in.name}")
    grading.zip_collect(course, "01_tensor")
    collected = course / "submitted" / "ada-1" / "01_tensor" / "01_tensor.ipynb"
    assert collected.read_bytes() == handed_in.read_bytes()


def test_the_commands_work_from_a_notebook_cell(workspace):
    """`from tinytorch_kit import status` in a kernel started in a module's folder (as JupyterLab does)."""
    from nbclient import NotebookClient
    import nbformat

    cell = nbformat.v4.new_code_cell("from tinytorch_kit import check, status\nstatus()\nprint(check('01'))")
    notebook = nbformat.v4.new_notebook(cells=[cell])
    env = dict(os.environ, PYTHONPATH=str(workspace))  # what ./setup's .pth file or ./learn lab provide
    NotebookClient(notebook, kernel_name="python3", timeout=300,
                   resources={"metadata": {"path": str(workspace / "modules" / "01_tensor")}}).execute(env=env)
    shown = "".join(o.get("text", "") for o in notebook.cells[0].outputs)
    assert shows(shown, "01_tensor", "not started") and "first failure: contiguous_strides_visible" in shown
    assert shown.rstrip().endswith("False")


def mark_checked(workspace, module_ids):
    """Record passing checks of `module_ids`, as `./learn check` does once their visible tests pass
    (the tests above run check itself; here it would only add minutes of notebook runs)."""
    code = ("import sys; from pathlib import Path; import tinytorch_kit as kit\n"
            "root = Path.cwd()\n"
            "for mid in sys.argv[1:]:\n"
            "    notebook = kit.nbcells.read(kit.notebook_file(root, mid))\n"
            "    kit.save_state(root, mid, checked=kit.check_digest(root, notebook), passed=True, tally='all')\n")
    subprocess.run([sys.executable, "-c", code, *module_ids], cwd=workspace, check=True,
                   env=dict(os.environ, PYTHONPATH=str(workspace)))


def test_the_gpt_milestone_trains_the_learners_own_package_and_resumes(workspace):
    """`./learn milestone 07`, shortened to seconds on a slice of the corpus."""
    for module_id in MODULES:
        fill_solutions(workspace, module_id)
        assert learn(workspace, "export", module_id[:2])[0] == 0
    mark_checked(workspace, MODULES)
    assert shows(learn(workspace, "status")[1], "07_gpt", "unlocked")
    short = ["--minutes", "0.1", "--max-chars", "100000", "--threads", "1", "--sample-chars", "60"]
    code, out = learn(workspace, "milestone", "07", *short)
    assert code in (0, 1) and "Traceback" not in out, out  # 1: not yet below the unigram baseline
    assert "running milestones/07_gpt.py with your tinytorch package" in out
    assert "it/s" in out, "a progress bar"
    assert "--- your GPT writes (after 'def ') ---\ndef " in out
    assert "the reference package reaches about" in out and "unigram baseline" in out
    loss = float(re.search(r"validation loss (\d+\.\d+) nats/char after (\d+) steps", out).group(1))
    assert loss < 4.56, "below chance (log 96): it learned something"  # ln(vocabulary)
    artifacts = workspace / "artifacts"
    assert (artifacts / "milestone-gpt.png").stat().st_size > 1000 and (artifacts / "milestone-gpt.ckpt").is_file()

    # A run stopped early (Ctrl-C after a checkpoint) resumes where its checkpoint left off.
    plan_file = artifacts / "milestone-gpt-plan.json"
    plan = json.loads(plan_file.read_text())
    done = int(re.search(r"after (\d+) steps", out).group(1))
    plan_file.write_text(json.dumps(dict(plan, finished=False, steps=done + 4, minutes=5.0)))
    code, out = learn(workspace, "milestone", "07", *short)
    assert f"resuming the unfinished run (5.0 minutes, {done + 4} steps planned) at step {done}" in out, out
    assert f"after {done + 4} steps" in out, out
    code, out = learn(workspace, "milestone", "07", "-h")
    assert code == 0 and "--minutes" in out and "--fresh" in out, out
