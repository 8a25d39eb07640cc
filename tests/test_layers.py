"""The library's layers point one way: a notebook's file never reaches a later notebook's, and no file of
tinytorch/ reaches itself back. The package's top level (`tinytorch/__init__.py`) is the registry above
them all: it resolves `tt.NAME` lazily, and module 03 finds module 04's `relu` through it.

The course tooling (`tinytorch_course/`) is grouped by job, and its jobs point one way as well."""
import ast
from pathlib import Path
import re

import tinytorch
from tinytorch_course import notebooks
from tinytorch_course.kit import workspace
from conftest import REPO

PACKAGE = Path(tinytorch.__file__).resolve().parent
NOTEBOOK_OF = tinytorch._NOTEBOOK_OF  # file -> its notebook's number, in course order


def module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path):
    """The tinytorch modules a file imports: `import`/`from` statements at any depth (a function's
    import counts), and `importlib.import_module("tinytorch...")` with a constant name."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}  # `from . import nn` imports a module
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)):
            found.add(node.args[0].value)
    return found


def graph():
    """`{module: {modules of tinytorch/ it imports}}`, the top-level registry left out."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py") if p.name != "_modidx.py"}
    files.pop("tinytorch")
    return {name: {m for m in imports_of(path) if m in files and m != name} for name, path in files.items()}


def reach(edges, start):
    seen, todo = set(), [start]
    while todo:
        for nxt in edges[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def test_the_order_holds_each_notebook_s_module_with_its_number():
    """A companion notebook's module counts as its module's (`autograd_more` is notebook 03's)."""
    exported = {name: module_id[:2] for module_id in notebooks.module_ids(REPO)
                for path in notebooks.module_notebooks(REPO, "modules", module_id)
                for cell in notebooks.read(path).cells
                for name in re.findall(r"^#\| default_exp (\S+)$", cell.source, re.M)}
    assert exported == NOTEBOOK_OF and list(NOTEBOOK_OF.values()) == sorted(NOTEBOOK_OF.values())


def test_the_graph_sees_imports_of_every_kind():
    edges = graph()
    assert "tinytorch.autograd" in edges["tinytorch.nn"]          # from .autograd import ...
    assert "tinytorch.autograd" in edges["tinytorch.parallel"]    # an import inside a function
    assert {"tinytorch.tensor_base", "tinytorch.strides"} <= edges["tinytorch.autograd"]
    assert "tinytorch.autograd" in edges["tinytorch.autograd_more"]


def test_no_file_reaches_itself():
    edges = graph()
    loops = sorted(name for name in edges if name in reach(edges, name))
    assert not loops, f"import loops through {loops}"


def test_no_notebook_file_reaches_a_later_notebook_s():
    edges = graph()
    number = {f"tinytorch.{module}": int(n) for module, n in NOTEBOOK_OF.items()}
    wrong = [(a, b) for a in number if a in edges for b in reach(edges, a) if number.get(b, 0) > number[a]]
    assert not wrong, "an earlier notebook's file imports a later one's (directly or through a hand-written " \
                      f"file): {wrong}"


# The course tooling, tinytorch_course/: its folders are its jobs, and they point one way too.
COURSE = REPO / "tinytorch_course"
JOBS = ["build", "kit", "grading", "hub"]  # in this order: a job may use an earlier job, never a later one
COMMANDS = {"tinytorch_course.__main__", "tinytorch_course.demo"}  # they run every job


def shipped_in_kit():
    """The modules that the learner's kit ships (`workspace.COPIED`'s Python files from kit/)."""
    return {f"tinytorch_course.kit.{origin[1:-3]}" for origin in workspace.COPIED.values()
            if origin.startswith("@") and origin.endswith(".py")}


def course_layer(name):
    """0: the kit's shipped modules; 1: the modules at the top, shared by every job; then the jobs, in
    `JOBS` order; last the commands."""
    if name in shipped_in_kit():
        return 0
    if name in COMMANDS:
        return 2 + len(JOBS)
    return 1 if name.count(".") == 1 else 2 + JOBS.index(name.split(".")[1])


def course_graph():
    """`{module: {modules of tinytorch_course/ it imports}}`; packages' `__init__.py` (docstrings) and
    folders that are not packages (hub/hub_files/: files the hub installs) left out."""
    files = {module_name(p): p for p in COURSE.rglob("*.py")
             if p.name != "__init__.py" and (p.parent / "__init__.py").is_file()}
    return {name: {m for m in imports_of(path) if m in files and m != name} for name, path in files.items()}


def test_each_folder_of_the_course_tooling_is_a_job_that_says_what_it_owns():
    folders = sorted({p.parent for p in COURSE.glob("*/*.py")})
    assert [f.name for f in folders] == sorted(JOBS), \
        f"tinytorch_course/ has the folders {[f.name for f in folders]}: place a new one in JOBS, in order"
    for folder in folders:
        init = folder / "__init__.py"
        assert init.is_file() and ast.get_docstring(ast.parse(init.read_text())), \
            f"{init.relative_to(REPO)} needs a docstring that says what the folder owns"


def test_the_kit_ships_modules_that_need_nothing_else_of_the_course_tooling():
    """The kit is handed to learners without the rest of tinytorch_course (no grading code, no
    hidden-test markers): what it ships imports only what it ships."""
    shipped, edges = shipped_in_kit(), course_graph()
    assert {"tinytorch_course.kit.learner", "tinytorch_course.kit.nbcells"} <= shipped
    assert "tinytorch_course.kit.nbcells" in edges["tinytorch_course.kit.learner"]
    for name in sorted(shipped):
        assert not edges[name] - shipped, \
            f"{name} ships in the learner's kit but imports {sorted(edges[name] - shipped)}"


def test_the_jobs_of_the_course_tooling_point_one_way():
    edges = course_graph()
    assert "tinytorch_course.build.hidden_inputs" in edges["tinytorch_course.grading.sandbox"]  # from ..build import
    assert "tinytorch_course.kit.nbcells" in edges["tinytorch_course.notebooks"]
    wrong = sorted(f"{a} imports {b}" for a, imported in edges.items() for b in imported
                   if course_layer(b) > course_layer(a))
    assert not wrong, (f"a module needs a later job (order: the kit's shipped modules, the shared ones, "
                       f"{', '.join(JOBS)}, the commands): {wrong}")
