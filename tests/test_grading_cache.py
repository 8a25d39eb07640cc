"""The grading cache's entries are named by everything they are made from, and nothing else."""
import shutil

import pytest

from tinytorch_course import notebooks
from tinytorch_course.grading import grading_cache

from conftest import REPO, copy_course

MODULE, LATER = notebooks.module_ids(REPO)[0], notebooks.module_ids(REPO)[-1]


@pytest.fixture
def course(tmp_path, monkeypatch):
    """A copy of the course and of its tooling, which the key then reads."""
    root = copy_course(tmp_path / "course")
    shutil.copytree(grading_cache.SOURCES / "tinytorch_course", tmp_path / "tooling" / "tinytorch_course",
                    ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(grading_cache, "SOURCES", tmp_path / "tooling")
    return root


def source(module):
    """The file of `module` in the copy of the tooling that the key reads."""
    return grading_cache.source_file(module)


def append(path, text):
    path.write_text(path.read_text() + text)


def test_the_key_is_the_same_for_an_identical_copy(course):
    assert grading_cache.key(course, MODULE) == grading_cache.key(REPO, MODULE)


@pytest.mark.parametrize("change", [
    lambda root: append(source("tinytorch_course.grading.verdicts"), "\n# records read differently\n"),
    lambda root: append(source("tinytorch_course.grading.kernel_guard"), "\n# a guard that reports differently\n"),
    lambda root: append(source("tinytorch_course.kit.nbcells"), "\n# imported by notebooks, which verdicts imports\n"),
    lambda root: append(source("tinytorch_course.grading.release_run"), "\n# the stubs' run, read as a cell's source\n"),
    lambda root: append(source("tinytorch_course.build.hidden_inputs"), "\n# imported by sandbox, also by module name\n"),
    lambda root: append(root / "tinytorch" / "testing.py", "\n# records written differently\n"),
    lambda root: append(root / "nbgrader_config.py", "\nc.Execute.timeout = 7\n"),
    lambda root: notebooks.notebook_path(root, "modules", MODULE).write_text(
        notebooks.notebook_path(root, "modules", MODULE).read_text().replace("assert_", "assert_ ", 1)),
], ids=["verdicts", "kernel-guard", "imported-module", "release-run", "imported-by-name", "testing", "execute-config",
        "notebook"])
def test_a_change_of_what_makes_an_entry_changes_its_key(course, change):
    before = grading_cache.key(course, MODULE)
    change(course)
    assert grading_cache.key(course, MODULE) != before


def test_a_module_newly_imported_by_the_grading_code_is_part_of_the_key(course):
    records_format = source("tinytorch_course.grading.verdicts").with_name("records_format.py")  # beside verdicts
    records_format.write_text("VERSION = 1\n")
    append(source("tinytorch_course.grading.verdicts"), "\nfrom .records_format import VERSION  # noqa\n")
    before = grading_cache.key(course, MODULE)
    records_format.write_text("VERSION = 2\n")
    assert grading_cache.key(course, MODULE) != before


@pytest.mark.parametrize("change", [
    lambda root: append(source("tinytorch_course.hub.hub"), "\n# the hub changed\n"),
    lambda root: append(source("tinytorch_course.kit.learner"), "\n# the learner kit changed\n"),
    lambda root: append(source("tinytorch_course.grading.intake"), "\n# collecting changed\n"),
    lambda root: append(root / "nbgrader_config.py", "\nc.CourseDirectory.root = '/elsewhere'\n"
                                                     "c.ZipCollectApp.strict = True\n"),
    lambda root: append(root / "settings.ini", "\n# nbdev settings\n"),
    lambda root: shutil.rmtree(root / "release"),
    lambda root: notebooks.notebook_path(root, "modules", LATER).write_text(
        notebooks.notebook_path(root, "modules", LATER).read_text().replace("assert_", "assert_ ", 1)),
], ids=["hub", "learner", "intake", "other-config", "settings", "release", "later-notebook"])
def test_nothing_unrelated_changes_the_key(course, change):
    before = grading_cache.key(course, MODULE)
    change(course)
    assert grading_cache.key(course, MODULE) == before


def test_extra_inputs_of_a_caller_are_part_of_the_key(course):
    assert grading_cache.key(course, MODULE, "a") != grading_cache.key(course, MODULE, "b")
