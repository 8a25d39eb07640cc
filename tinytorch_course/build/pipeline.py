"""`build`: source notebooks -> cleaned sources, the tinytorch package, release/ and solutions/ (`./course
build` then writes the kit's file of known mistakes: `demo.build_course`)."""
import ast
import os
import shutil
import tempfile
import time
from pathlib import Path

from nbclient.util import run_sync
from nbgrader.preprocessors import Execute

from . import hidden_names
from .. import notebooks
from ..nbgrader_api import CourseError, api, check, install_grader_kernel, run_converter, working_directory
from ..progress import Progress

FORBIDDEN_IN_RELEASE = notebooks.SOLUTION_MARKERS + notebooks.HIDDEN_MARKERS


def clean_sources(root):
    """Store every source notebook clean: no outputs or execution counts, nbgrader metadata kept."""
    from execnb.nbio import read_nb, write_nb
    from nbdev.clean import clean_nb
    from nbdev.config import get_config

    config = get_config(path=root)
    for path in [p for m in notebooks.module_ids(root) for p in notebooks.module_notebooks(root, "modules", m)]:
        nb = read_nb(path)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell["outputs"] = []
        clean_nb(nb, allowed_metadata_keys=config.get("allowed_metadata_keys").split(),
                 allowed_cell_metadata_keys=config.get("allowed_cell_metadata_keys").split(),
                 clean_ids=config.clean_ids)
        write_nb(nb, path)


def export_package(root):
    """`nbdev_export` of modules/ into the package."""
    from nbdev.doclinks import nbdev_export

    with working_directory(root):
        nbdev_export()


def check_release(notebook_file):
    """No solution or hidden test left in a release, and no test cell that runs code without a
    check (it would report success for tests that did not run)."""
    text = Path(notebook_file).read_text()
    for marker in FORBIDDEN_IN_RELEASE:
        if marker in text:
            raise CourseError(f"{notebook_file} still contains {marker!r}")
    notebook = notebooks.read(notebook_file)
    checking = _checking_functions(notebook)
    for cell in notebook.cells:
        tree = _parse(cell.source)
        if notebooks.is_test(cell) and tree.body and not _checks(tree, checking):
            raise CourseError(f"{notebook_file}: test cell {notebooks.grade_id(cell)!r} runs code but "
                              "checks nothing (a print belongs inside the hidden-test region)")


def _parse(source):
    """The cell's syntax tree (an empty one for a cell that is not plain Python, e.g. magics)."""
    try:
        return ast.parse(source)
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def _called_names(tree):
    return {node.func.id for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}


def _checks(tree, checking):
    return bool(_called_names(tree) & checking)


def _checking_functions(notebook):
    """The check names of `tinytorch.testing`, plus the notebook's own functions that call one."""
    from tinytorch import testing

    checking = set(testing.__all__)
    functions = [node for cell in notebook.cells if cell.cell_type == "code"
                 for node in ast.walk(_parse(cell.source)) if isinstance(node, ast.FunctionDef)]
    for _ in range(3):  # helpers that call helpers
        checking |= {f.name for f in functions if _checks(f, checking)}
    return checking


def _finish_solution(notebook_file):
    """Fail if the executed solution raised; merge split stream outputs so rebuilds are stable."""
    from nbconvert.preprocessors import CoalesceStreamsPreprocessor

    notebook = notebooks.read(notebook_file)
    errors = notebooks.error_outputs(notebook)
    if errors:
        lines = [f"  cell {i} ({gid or 'no grade id'}): {message}" for i, gid, message in errors]
        raise CourseError(f"executing the solution {notebook_file} raised:\n" + "\n".join(lines))
    notebook, _ = CoalesceStreamsPreprocessor(enabled=True).preprocess(notebook, {})
    notebooks.write(notebook, notebook_file)


class AnswerKeyExecute(Execute):
    """nbgrader's Execute for the answer keys, run as the grader runs a submission: the kernel has
    $NBGRADER_EXECUTION (demos that only show something run shorter or not at all) and cells tagged
    `skip-when-graded` are not run. So solutions/ holds no timings or figures, and a rebuild of an
    unchanged course writes it byte for byte again."""

    async def async_start_new_kernel(self, **kwargs):
        kwargs.setdefault("env", {**os.environ, "NBGRADER_EXECUTION": "autograde"})
        return await super().async_start_new_kernel(**kwargs)

    start_new_kernel = run_sync(async_start_new_kernel)  # nbclient binds the base method here

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and notebooks.SKIP_WHEN_GRADED in cell.metadata.get("tags", []):
            return cell, resources
        return super().preprocess_cell(cell, resources, index)


def generate(root, staging, module_ids):
    """Write release/ and solutions/ of `module_ids` into `staging`, checking each notebook."""
    from traitlets.config import Config
    from nbgrader.converters import GenerateSolution
    from nbgrader.preprocessors import ClearMarkScheme, ClearOutput, IncludeHeaderFooter, LockCells

    config = Config()
    config.GenerateSolution.preprocessors = [IncludeHeaderFooter, LockCells, ClearOutput, ClearMarkScheme,
                                             AnswerKeyExecute]
    grader = api(root, config=config, release_directory=str(staging / "release"),
                 solution_directory=str(staging / "solutions"))
    with Progress(len(module_ids), "build") as progress:
        for module_id in module_ids:
            check(grader.generate_assignment(module_id, force=True, create=True),
                  f"generate_assignment {module_id}")
            release = notebooks.notebook_path(staging, "release", module_id)
            if not release.is_file():
                raise CourseError(f"generate_assignment {module_id} wrote no {release}")
            check_release(release)
            run_converter(grader, GenerateSolution, module_id)
            solution = notebooks.notebook_path(staging, "solutions", module_id)
            if not solution.is_file():
                raise CourseError(f"generate_solution {module_id} wrote no {solution}")
            _finish_solution(solution)
            for companion in notebooks.companion_paths(root, "modules", module_id):  # released to be read, and run
                check_release(release.parent / companion.name)
                _finish_solution(solution.parent / companion.name)
            progress.done(module_id)


def _replace(root, staging, name):
    """Swap `root/name` for `staging/name` (renames within one folder, so never half-written)."""
    target, fresh = Path(root) / name, Path(staging) / name
    old = Path(staging) / "old" / name
    old.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        target.rename(old)
    target.parent.mkdir(parents=True, exist_ok=True)
    fresh.rename(target)


def build(root, module_ids=None, log=print):
    """Check that no visible cell reads a name only the hidden tests bind, clean the sources, export
    the package, and regenerate release/ and solutions/ (of every module, or only of `module_ids`)."""
    root = Path(root).resolve()
    started = time.perf_counter()
    for module_id in module_ids or notebooks.module_ids(root):
        hidden_names.check_notebook(notebooks.notebook_path(root, "modules", module_id))
    install_grader_kernel()
    clean_sources(root)
    export_package(root)
    log(f"exported tinytorch/ from {len(notebooks.module_ids(root))} module(s)")
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    try:
        generate(root, staging, module_ids or notebooks.module_ids(root))
        if module_ids:
            for module_id in module_ids:
                _replace(root, staging, f"release/{module_id}")
                _replace(root, staging, f"solutions/{module_id}")
        else:
            _replace(root, staging, "release")
            _replace(root, staging, "solutions")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log(f"wrote release/ and solutions/ in {time.perf_counter() - started:.1f} s")
