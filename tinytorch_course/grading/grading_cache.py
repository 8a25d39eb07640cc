"""The names of the grading cache's entries (answer keys, reference packages): the digest of
everything an entry is made from, so that a change of any of it makes a new entry, and copies of
a course (or several courses) may share one cache.

An entry of module NN depends on: its source notebook; the reference package (`tinytorch/`, whose
`testing.py` writes the records); the grading code that produces and reads records (`GRADING_CODE`
and every module of this package that they import); nbgrader's configuration of execution
(`EXECUTION_CONFIG`); and the versions of Python and of the libraries that run the kernel and
compare values. Nothing else (another module's notebook, the hub, the learner kit, paths) changes it.
"""
import ast
import functools
import hashlib
from importlib import metadata
import json
from pathlib import Path
import sys

from .. import notebooks
from ..nbgrader_api import load_config

# The folder that holds the `tinytorch_course` package (as many levels up as this module's name is deep).
SOURCES = Path(__file__).resolve().parents[__name__.count(".")]
# The grading code's entry points: the records are produced by the kernels these start and read by
# `verdicts`; the kernel's own files and the release run's cell are loaded by path, not imported.
GRADING_CODE = [
    "tinytorch_course.grading.verdicts",
    "tinytorch_course.grading.sandbox",
    "tinytorch_course.grading.sandbox_kernel",
    "tinytorch_course.grading.kernel_main",
    "tinytorch_course.grading.kernel_guard",
    "tinytorch_course.grading.release_run",
]
# nbgrader_config.py sections that change how a notebook executes (CourseDirectory paths do not).
EXECUTION_CONFIG = ["Execute", "RecordingExecute", "SandboxedExecute", "ExecutePreprocessor", "NotebookClient"]
LIBRARIES = ["numpy", "nbgrader", "nbclient", "ipykernel"]


def source_file(module):
    """The file of module `module` (a dotted name such as `tinytorch_course.notebooks`) under `SOURCES`."""
    return SOURCES.joinpath(*module.split(".")).with_suffix(".py")


@functools.lru_cache(maxsize=None)
def _imported(name, text):
    """The modules that module `name` (source `text`) imports relatively: `from .x import y` is x, or x.y
    where that is a module; parsed once a process (0.2 s for them all)."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = ".".join(name.split(".")[:-node.level] + ([node.module] if node.module else []))
            found += ([base] if node.module else []) + [f"{base}.{alias.name}" for alias in node.names]
    return found


def grading_code():
    """The files of `GRADING_CODE` and of every module of this package they import (relative imports,
    at any depth), transitively, as paths relative to `SOURCES`."""
    found, todo = set(), list(GRADING_CODE)
    while todo:
        name = todo.pop()
        if name in found or not source_file(name).is_file():
            continue
        found.add(name)
        todo += _imported(name, source_file(name).read_text())
    return sorted(source_file(name).relative_to(SOURCES).as_posix() for name in found)


def execution_config(root):
    config = load_config(root)
    return json.dumps({section: config[section] for section in EXECUTION_CONFIG if section in config},
                      sort_keys=True, default=repr)


def key(root, module_id, *extra):
    """The 16-hex-digit name of module `module_id`'s cache entries; `extra`: further texts that the
    entry depends on (a caller's own inputs)."""
    digest = hashlib.sha256()

    def add(label, data):
        digest.update(f"{label}\0{len(data)}\0".encode())
        digest.update(data)

    add("notebook", notebooks.notebook_path(root, "modules", module_id).read_bytes())
    package = Path(root) / "tinytorch"
    for path in sorted(package.rglob("*.py")):
        add(f"tinytorch/{path.relative_to(package).as_posix()}", path.read_bytes())
    for name in grading_code():
        add(name, (SOURCES / name).read_bytes())
    add("config", execution_config(root).encode())
    versions = [sys.version] + [f"{name} {metadata.version(name)}" for name in LIBRARIES]
    add("versions", "\n".join(versions).encode())
    for text in extra:
        add("extra", text.encode())
    return digest.hexdigest()[:16]
