"""`workspace`: the learner's kit, a folder and a zip made from release/ (no solutions, no hidden tests).

The kit is a folder `tinytorch-workspace/`:

    README.md, setup, learn     the learner's guide, the one-time setup, the learner's commands
    settings.ini                nbdev's settings (the course's own: modules/ -> tinytorch/)
    requirements.lock           the course's pinned environment, less what only its test suite uses
    modules/NN_name/            the release notebooks
    tinytorch/                  the learner's package: only __init__.py and testing.py until they export
    tinytorch_kit/              the commands behind ./learn (tinytorch_course/learner.py and nbcells.py),
                                an untouched copy of each release notebook, and JupyterLab's settings
                                overrides for ./learn lab (lab-settings/)
    milestones/                 programs that run on the learner's own package
"""
import shutil
import stat
import zipfile
from pathlib import Path

from . import notebooks
from .leaks import leaks
from .nbgrader_api import CourseError

KIT_NAME = "tinytorch-workspace"
HERE = Path(__file__).resolve().parent
KIT_MAIN = '''"""`python -m tinytorch_kit COMMAND`: what ./learn runs."""
import sys

from . import main

sys.exit(main())
'''
# kit path -> where it comes from (the repo root, or this package's folder for "@" paths)
COPIED = {
    "README.md": "@kit/README.md", "setup": "@kit/setup", "learn": "@kit/learn", ".gitignore": "@kit/gitignore",
    "tinytorch_kit/__init__.py": "@learner.py", "tinytorch_kit/nbcells.py": "@nbcells.py",
    "tinytorch_kit/lab-settings/overrides.json": "@kit/lab-overrides.json",
    "tinytorch/__init__.py": "tinytorch/__init__.py", "tinytorch/testing.py": "tinytorch/testing.py",
    "settings.ini": "settings.ini",
}
# Pinned in the course's requirements.lock for its own test suite (the browser test among them);
# learners' notebooks and commands never import them, so the kit's lock leaves them out.
TEST_ONLY = {"pytest", "pytest-xdist", "execnet", "iniconfig", "pluggy", "hypothesis", "sortedcontainers",
             "playwright", "greenlet"}


def learner_lock(lock_text):
    """The course's requirements.lock without the `TEST_ONLY` pins."""
    def name(line):
        return line.split("==")[0].strip().lower().replace("_", "-")
    return "".join(line for line in lock_text.splitlines(keepends=True)
                   if "==" not in line or name(line) not in TEST_ONLY)


def _source(root, origin):
    return HERE / origin[1:] if origin.startswith("@") else Path(root) / origin


def write_kit(root, kit):
    """Lay out the kit in the (new) folder `kit`."""
    for target, origin in COPIED.items():
        (kit / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(_source(root, origin), kit / target)
    (kit / "tinytorch_kit" / "__main__.py").write_text(KIT_MAIN)
    (kit / "requirements.lock").write_text(learner_lock((Path(root) / "requirements.lock").read_text()))
    for mid in notebooks.module_ids(root):
        release = notebooks.notebook_path(root, "release", mid)
        if not release.is_file():
            raise CourseError(f"{release} is missing: run ./course build first")
        shutil.copytree(release.parent, kit / "modules" / mid,
                        ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
        (kit / "tinytorch_kit" / "release").mkdir(parents=True, exist_ok=True)
        shutil.copy2(release, kit / "tinytorch_kit" / "release" / release.name)
    if (Path(root) / "milestones").is_dir():
        shutil.copytree(Path(root) / "milestones", kit / "milestones",
                        ignore=shutil.ignore_patterns("__pycache__"))
    for script in ("setup", "learn"):
        mode = (kit / script).stat().st_mode
        (kit / script).chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def kit_files(kit):
    return sorted(p for p in Path(kit).rglob("*") if p.is_file())


def make_workspace(root, out, log=print):
    """Write `out/tinytorch-workspace/` and `out/tinytorch-workspace.zip`; return both paths.

    Fails (and leaves no zip) if any file of the kit shows a solution or hidden-test line.
    """
    root, out = Path(root).resolve(), Path(out).resolve()
    kit, archive = out / KIT_NAME, out / f"{KIT_NAME}.zip"
    shutil.rmtree(kit, ignore_errors=True)
    archive.unlink(missing_ok=True)
    kit.mkdir(parents=True)
    write_kit(root, kit)
    sources = [notebooks.read(notebooks.notebook_path(root, "modules", m)) for m in notebooks.module_ids(root)]
    problems = leaks(sources, kit_files(kit))
    if problems:
        raise CourseError("the workspace kit would leak:\n  " + "\n  ".join(problems))
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for path in kit_files(kit):
            z.write(path, f"{KIT_NAME}/{path.relative_to(kit)}")  # keeps the executable bits
    log(f"wrote the learner workspace {kit} ({len(kit_files(kit))} files)")
    log(f"and its zip {archive} ({archive.stat().st_size // 1024} KiB): hand this out")
    return kit, archive
