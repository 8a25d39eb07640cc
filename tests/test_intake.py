"""zip_collect's layouts, quickly (no grading): whose file a file is, and its time.

tests/test_hostile.py grades the hostile class collected this way; here each layout an LMS hands
out is collected alone: learners' folders, one shared folder, a loose file beside the archives.
"""
import datetime
import zipfile

import pytest

from tinytorch_course import notebooks
from tinytorch_course.grading import grading

from conftest import REPO, copy_course

MODULE = notebooks.module_ids(REPO)[0]


@pytest.fixture
def course(tmp_path):
    root = copy_course(tmp_path / "course")
    (tmp_path / "roster.csv").write_text("id,first_name,last_name,email\nalice,A,L,\nbob,B,L,\n")
    grading.import_roster(root, tmp_path / "roster.csv")
    return root


def notebook(text):
    return notebooks.notebook_path(REPO, "release", MODULE).read_text().replace("YOUR CODE HERE", text, 1)


def lms_zip(path, entries):
    """`entries`: `(name, date_time, bytes)` of the archive."""
    with zipfile.ZipFile(path, "w") as z:
        for name, when, data in entries:
            z.writestr(zipfile.ZipInfo(name, when), data)
    return path


def collected(root, student):
    folder = root / "submitted" / student / MODULE
    return (folder / f"{MODULE}.ipynb").read_text(), (folder / "timestamp.txt").read_text()


def test_a_stranger_s_upload_area_supplies_nothing_and_is_reported(course, tmp_path):
    problems = grading.zip_collect(course, MODULE, [lms_zip(tmp_path / "class.zip", [
        (f"alice/alice_{MODULE}.ipynb", (2026, 5, 1, 0, 0, 0), notebook("ALICE")),
        (f"bob_4711_assignsubmission_file_/bob_{MODULE}.ipynb", (2026, 5, 1, 0, 0, 0), notebook("BOB")),
        (f"zed/alice_{MODULE}.ipynb", (2026, 6, 1, 0, 0, 0), notebook("ZED")),
        (f"zed/sub/bob_{MODULE}.ipynb", (2026, 6, 1, 0, 0, 0), notebook("ZED")),
    ])])
    assert "ALICE" in collected(course, "alice")[0] and "BOB" in collected(course, "bob")[0]
    assert sorted(problems) == [
        f"class.zip/zed/alice_{MODULE}.ipynb: named for alice, but in the upload area 'zed' of no learner on the roster",
        f"class.zip/zed/sub/bob_{MODULE}.ipynb: named for bob, but in the upload area 'zed' of no learner on the roster"]


def test_without_learners_folders_the_name_decides(course, tmp_path):
    problems = grading.zip_collect(course, MODULE, [lms_zip(tmp_path / "class.zip", [
        (f"submissions/alice_{MODULE}.ipynb", (2026, 5, 1, 0, 0, 0), notebook("ALICE"))])])
    assert problems == [] and "ALICE" in collected(course, "alice")[0]


def test_an_uploaded_archive_takes_the_lms_entry_time_not_its_own_dates(course, tmp_path):
    inner = lms_zip(tmp_path / "inner.zip", [(f"alice_{MODULE}.ipynb", (2011, 1, 1, 0, 0, 0), notebook("ALICE"))])
    grading.zip_collect(course, MODULE, [lms_zip(tmp_path / "class.zip", [
        (f"alice/alice_{MODULE}.zip", (2026, 5, 1, 12, 30, 0), inner.read_bytes())])])
    text, stamp = collected(course, "alice")
    assert "ALICE" in text and stamp.startswith("2026-05-01 12:30:00"), stamp


def test_a_loose_file_beside_the_archives_takes_the_collector_s_clock(course):
    archive_dir = course / "downloaded" / MODULE / "archive"
    archive_dir.mkdir(parents=True)
    (archive_dir / f"bob_{MODULE}.ipynb").write_text(notebook("BOB"))
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0, tzinfo=None)
    assert grading.zip_collect(course, MODULE) == []
    text, stamp = collected(course, "bob")
    assert "BOB" in text and datetime.datetime.fromisoformat(stamp[:19]) >= before, stamp
