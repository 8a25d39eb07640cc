"""A thin handle on nbgrader's Python API for a course folder, with loud failures."""
import contextlib
import json
import os
from pathlib import Path
import sys

GRADER_KERNEL = "tinytorch-grader"


class CourseError(RuntimeError):
    """A course command failed; the message names the module, notebook or cell."""


@contextlib.contextmanager
def working_directory(path):
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


SANDBOX_KERNEL = "tinytorch-sandbox"


def _install_kernelspec(name, display_name, launcher, **extra):
    spec_dir = Path(sys.prefix) / "share" / "jupyter" / "kernels" / name
    spec = {"argv": [sys.executable, "-I", "-m", launcher, "-f", "{connection_file}",
                     "--IPKernelApp.log_level=ERROR"],
            "display_name": display_name, "language": "python", **extra}
    spec_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps(spec, indent=1)
    if (spec_dir / "kernel.json").is_file() and (spec_dir / "kernel.json").read_text() == text:
        return
    staged = spec_dir / f"kernel.json.{os.getpid()}"  # renamed into place: a reader never sees half a file
    staged.write_text(text)
    staged.replace(spec_dir / "kernel.json")


def install_grader_kernel():
    """Install the isolated kernels: one that executes solutions, one for learners' submissions.

    `python -I` puts neither the working directory nor PYTHONPATH on sys.path, so a
    `tinytorch/` folder inside a notebook's folder cannot shadow the installed package.
    The submissions' kernel (`sandbox_kernel`) runs in a bubblewrap sandbox (`sandbox`); it is
    interrupted by a message, since a signal would reach bubblewrap, not the kernel.
    """
    _install_kernelspec(GRADER_KERNEL, "TinyTorch grader (isolated Python)", "ipykernel_launcher")
    _install_kernelspec(SANDBOX_KERNEL, "TinyTorch grader (sandboxed submission)",
                        "tinytorch_course.grading.sandbox_kernel", interrupt_mode="message")


def load_config(root):
    """The traitlets config of `root/nbgrader_config.py`."""
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()


def api(root, config=None, **coursedir_overrides):
    """An `NbGraderAPI` configured by `root/nbgrader_config.py`, then `config`, then
    CourseDirectory overrides."""
    # nbgrader runs helper programs (alembic) by name: find them beside this Python.
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    loaded = load_config(root)
    if config is not None:
        loaded.merge(config)
    config = loaded
    for key, value in coursedir_overrides.items():
        config.CourseDirectory[key] = value
    coursedir = CourseDirectory(config=config)
    return NbGraderAPI(coursedir=coursedir, config=config)


def check(result, what):
    """Raise `CourseError` with nbgrader's log unless an API call succeeded."""
    if not result.get("success"):
        log = result.get("log", "").strip()
        raise CourseError(f"{what} failed:\n{result.get('error', '')}\n{log}".rstrip())
    return result


def run_converter(grader_api, converter_class, assignment_id, student_id=None, force=True):
    """Run an nbgrader converter (as the API does for its own commands) and check it."""
    from nbgrader.utils import capture_log, temp_attrs

    attrs = {"assignment_id": assignment_id}
    if student_id is not None:
        attrs["student_id"] = student_id
    with temp_attrs(grader_api.coursedir, **attrs):
        app = converter_class(coursedir=grader_api.coursedir, parent=grader_api)
        app.force = force
        return check(capture_log(app), f"{converter_class.__name__} of {assignment_id}")
