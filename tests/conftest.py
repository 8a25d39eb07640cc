"""Shared fixtures: a freshly built copy of the course, and one grading cache (answer keys, reference
packages) for every copy, each made once per test session for every worker."""
import fcntl
import os
import shutil
from pathlib import Path

import pytest

from tinytorch_course.build.pipeline import build
from tinytorch_course import demo
from tinytorch_course.build import hidden_inputs

REPO = Path(__file__).resolve().parent.parent
# The built course's term: every learner graded on one variant of each module's hidden inputs, so
# that its copies (which share its secret) share one answer key per module (tests/test_per_learner.py
# grades variants of its own).
TEST_VARIANTS = 1
# The built course's grading secret: fixed, so that every test session draws the same hidden inputs
# (a random one made a test's outcome depend on the session: which mistakes the hidden cases catch).
TEST_SECRET = "7e57" * 16


def copy_course(destination):
    """Copy what a course build reads and writes into `destination` (no runtime state)."""
    return demo.copy_course(REPO, destination)


def shared_folder(tmp_path_factory):
    """A folder of this test session that every xdist worker sees (pytest's base temp otherwise)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def built_course(tmp_path_factory):
    """A copy of the course rebuilt from its sources with `build` (the repo itself is untouched), with
    the grading secret `TEST_SECRET` and a term of `TEST_VARIANTS` variants, made once for all workers (the first builds, the others wait for it): tests only read or copy it."""
    root = shared_folder(tmp_path_factory) / "built-course"
    with open(root.with_name("built-course.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root.with_name("built-course.done")
        if not done.exists():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            build(copy_course(root), log=lambda message: None)
            hidden_inputs.set_term(root, "tests", TEST_VARIANTS)
            fd = os.open(root / hidden_inputs.SECRET_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(TEST_SECRET + "\n")
            hidden_inputs.secret(root)  # checks what was written
            done.touch()
    return root


@pytest.fixture(scope="session", autouse=True)
def shared_grading_cache(tmp_path_factory):
    """Every course copy of the session grades with one cache: its entries are named by the digest
    of what they are made from, so the copies (all built from this repository) share them."""
    shared = shared_folder(tmp_path_factory) / "grading-cache"
    os.environ["TINYTORCH_GRADING_CACHE"] = str(shared)
    return shared
