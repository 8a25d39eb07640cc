"""A learner's whole path through every module, as learners walk it: the kit, the reference solution
typed into each release notebook's solution cells (never the hidden tests), `./learn export`, `check`,
`status`, every milestone and `submit`; then the instructor grades those files with `./course grade`
(roster, collect --folder, run). Grading restores the hidden tests, so only this walk shows a visible
or given cell that needs something only a hidden test defines: that fails every learner's check."""
import json
import os
import re
import shutil
import subprocess
import sys
import time

from nbgrader.api import Gradebook
import pytest

from tinytorch_course import notebooks
from tinytorch_course.kit.workspace import KIT_NAME, make_workspace
from conftest import REPO, copy_course
from learner_kit import course_command, fill_solutions, learn, shows

MODULES = notebooks.module_ids(REPO)
STUDENT = "walker-1"
# Each milestone with options that keep it short (a shortened run may miss its target: exit 1), and
# the line that shows it ran to the end.
MILESTONES = {"01": ([], "milestone 01 passed"),
              "05": (["--epochs", "3"], "digits MLP: test accuracy"),
              "07": (["--minutes", "0.1", "--max-chars", "100000", "--threads", "1", "--sample-chars", "60"],
                     "--- your GPT writes (after 'def ') ---"),
              "08": (["--epochs", "1"], "digits CNN: test accuracy")}
pytestmark = pytest.mark.xdist_group("learner_walk")  # the walk is made once, on one worker


def walk_modules(workspace, module_ids, course=REPO):
    """Solve, `./learn export` and `./learn check` each module in order, as a learner goes:
    `{module: what went wrong}` (empty if every visible test passed, in the notebook and the package,
    and no other cell raised)."""
    problems = {}
    for module_id in module_ids:
        fill_solutions(workspace, module_id, course)
        for command in ("export", "check"):
            code, out = learn(workspace, command, module_id[:2])
            tallies = re.findall(r"^(\d+)/(\d+) pass ", out, re.M)
            if code != 0 or (command == "check" and (len(tallies) != 2 or any(a != b for a, b in tallies)
                                                     or "a cell that is not a test raised" in out)):
                problems[module_id] = f"`./learn {command} {module_id[:2]}` exited {code}:\n{out}"
                break
    return problems


def grade_as_instructor(built_course, base, submission):
    """The instructor's route on the files `./learn submit` wrote: roster, collect --folder, run."""
    course = base / "course"
    shutil.copytree(built_course, course)
    shutil.copytree(REPO / "tinytorch_course", course / "tinytorch_course",
                    ignore=shutil.ignore_patterns("__pycache__"))
    roster = base / "roster.csv"
    roster.write_text(f"id,first_name,last_name,email\n{STUDENT},Walker,One,\n")
    course_command(course, "grade", "roster", roster)
    for handed_in in sorted(submission.glob(f"{STUDENT}_*.ipynb")):
        module_id = handed_in.stem[len(STUDENT) + 1:]
        folder = base / "hand-in" / STUDENT / module_id
        folder.mkdir(parents=True)
        shutil.copy(handed_in, folder)
        course_command(course, "grade", "collect", module_id[:2], "--folder", base / "hand-in")
    summary = course_command(course, "grade", "run", "--jobs", "2")
    return course, summary


@pytest.fixture(scope="module")
def walked(built_course, tmp_path_factory):
    """The walk, once: what each step printed, and the graded course."""
    base = tmp_path_factory.mktemp("walk")
    seconds = {}
    started = time.perf_counter()
    kit, _ = make_workspace(REPO, base / "kit", log=lambda message: None)
    workspace = shutil.copytree(kit, base / KIT_NAME)
    problems = walk_modules(workspace, MODULES)
    seconds["kit, export and check"] = time.perf_counter() - started
    status = learn(workspace, "status")[1]
    started = time.perf_counter()
    milestones = {nn: learn(workspace, "milestone", nn, *options) for nn, (options, _) in MILESTONES.items()}
    seconds["milestones"] = time.perf_counter() - started
    submitted = learn(workspace, "submit", STUDENT)
    started = time.perf_counter()
    course, summary = grade_as_instructor(built_course, base, workspace / "submission")
    seconds["grading"] = time.perf_counter() - started
    print("learner walk:", ", ".join(f"{step} {s:.0f} s" for step, s in seconds.items()))
    return dict(workspace=workspace, problems=problems, status=status, milestones=milestones,
                submitted=submitted, course=course, summary=summary)


@pytest.mark.parametrize("module_id", MODULES)
def test_the_reference_solution_passes_every_visible_test_of_the_release(walked, module_id):
    assert module_id not in walked["problems"], walked["problems"][module_id]
    assert shows(walked["status"], module_id, "checks pass"), walked["status"]


@pytest.mark.parametrize("milestone", sorted(MILESTONES))
def test_every_milestone_unlocks_and_runs_on_the_learners_package(walked, milestone):
    name = next(p.stem for p in (walked["workspace"] / "milestones").glob(f"{milestone}_*.py"))
    assert shows(walked["status"], name, "unlocked"), walked["status"]
    code, out = walked["milestones"][milestone]
    assert f"running milestones/{name}.py with your tinytorch package" in out and "Traceback" not in out, out
    assert code in (0, 1) and MILESTONES[milestone][1] in out, out


@pytest.mark.parametrize("module_id", MODULES)
def test_the_submission_grades_full_marks_without_a_review_flag(walked, module_id):
    code, out = walked["submitted"]
    assert code == 0 and f"submission/{STUDENT}_{module_id}.ipynb  (checks pass)" in out, out
    entry = json.loads((walked["course"] / "grading-status.json").read_text())[module_id][STUDENT]
    assert entry["status"] == "graded" and not entry["reasons"], (entry, walked["summary"])
    assert entry["score"] == entry["max_score"] > 0, (entry, walked["summary"])
    with Gradebook(f"sqlite:///{walked['course'] / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission(module_id, STUDENT)
        assert submission.score == submission.max_score
        assert not any(notebook.flagged for notebook in submission.notebooks)


def test_a_visible_cell_that_needs_a_hidden_one_fails_the_walk(tmp_path):
    """Module 04's release as it was built before its fix: `linear_layers_visible` called
    `manual_seed`, which only a hidden cell imported. The walk fails there, naming the cell."""
    course = copy_course(tmp_path / "course")
    for name in ("requirements.lock", "milestones"):
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, course / name)
    release = notebooks.notebook_path(course, "release", "04_layers")
    notebook = notebooks.read(release)
    cell = notebooks.cells_by_id(notebook)["linear_layers_visible"]
    cell.source = "\n".join(line for line in cell.source.splitlines() if "import manual_seed" not in line)
    notebooks.write(notebook, release)
    kit, _ = make_workspace(course, tmp_path / "kit", log=lambda message: None)
    for module_id in MODULES[:3]:  # the modules before it, done and exported
        fill_solutions(kit, module_id, course)
        assert learn(kit, "export", module_id[:2])[0] == 0
    problems = walk_modules(kit, ["04_layers"], course)
    assert list(problems) == ["04_layers"]
    assert re.search(r"^linear_layers_visible\s+\d+\s+FAIL\s+FAIL$", problems["04_layers"], re.M), problems
    assert "NameError: name 'manual_seed' is not defined" in problems["04_layers"], problems


# The tests below reuse the walked workspace (after the tests above): every module exported and checked.

def test_exporting_again_replaces_and_gives_torch_style_optim_and_data_modules(walked):
    workspace = walked["workspace"]
    assert (workspace / "tinytorch" / "autograd_more.py").is_file()  # module 03's companion, exported with it
    assert learn(workspace, "export", "05")[0] == 0  # exporting again replaces, never appends
    optim_py = (workspace / "tinytorch" / "optim.py").read_text()
    assert optim_py.count("from tinytorch.training import") == 1, optim_py
    code = ("import tinytorch.optim as optim, tinytorch.data as data, tinytorch.training as t; "
            "print(optim.AdamW is t.AdamW, data.DataLoader is t.DataLoader, t.__file__)")
    run = subprocess.run([sys.executable, "-c", code], cwd=workspace, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(workspace)))
    assert run.stdout.split() == ["True", "True", str(workspace / "tinytorch" / "training.py")], run.stderr


def test_the_gpt_milestone_trains_the_learners_own_package_and_resumes(walked):
    """`./learn milestone 07`, shortened to seconds on a slice of the corpus (the walk's run)."""
    workspace, (code, out) = walked["workspace"], walked["milestones"]["07"]
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
    code, out = learn(workspace, "milestone", "07", *MILESTONES["07"][0])
    assert f"resuming the unfinished run (5.0 minutes, {done + 4} steps planned) at step {done}" in out, out
    assert f"after {done + 4} steps" in out, out
    code, out = learn(workspace, "milestone", "07", "-h")
    assert code == 0 and "--minutes" in out and "--fresh" in out, out
