"""Shared fixtures: a freshly built copy of the course, made once per test session (per worker), and
one grading cache (answer keys, reference packages) for every copy and every worker."""
import os
import shutil
from pathlib import Path

import pytest

from tinytorch_course.build import build

REPO = Path(__file__).resolve().parent.parent
COURSE_FILES = ["modules", "tinytorch", "release", "solutions", "nbgrader_config.py", "settings.ini"]


def copy_course(destination):
    """Copy what a course build reads and writes into `destination` (no runtime state)."""
    for name in COURSE_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, destination / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, destination / name)
    return destination


@pytest.fixture(scope="session")
def built_course(tmp_path_factory):
    """A copy of the course rebuilt from its sources with `build` (the repo itself is untouched)."""
    root = copy_course(tmp_path_factory.mktemp("course"))
    build(root, log=lambda message: None)
    return root


@pytest.fixture(scope="session", autouse=True)
def shared_grading_cache(tmp_path_factory):
    """Every course copy of the session grades with one cache: its entries are named by the digest
    of what they are made from, so the copies (all built from this repository) share them."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "grading-cache"
    os.environ["TINYTORCH_GRADING_CACHE"] = str(shared)
    return shared
