"""The learner's commands in a TinyTorch workspace: export, check, status, milestone, submit.

From a terminal in the workspace folder:

    ./learn lab               open JupyterLab in the workspace
    ./learn export 01         write module 01's `#| export` cells into tinytorch/ (nbdev)
    ./learn check 01          run module 01's visible tests on the notebook and on tinytorch/
    ./learn status            every module's progress, and the milestones it unlocks
    ./learn milestone 01      run a milestone program on your own tinytorch package
    ./learn submit YOUR-ID    pack your notebooks for your instructor as submission/YOUR-ID_NN_name.ipynb

From a notebook cell (save the notebook first: these read the saved file):

    from tinytorch_kit import export, check, status
    check("01")

This file ships in the learner's workspace kit as tinytorch_kit/__init__.py; it holds no
solutions and no hidden tests.
"""
import argparse
import ast
import hashlib
import json
import os
from pathlib import Path
import re
import shutil
import subprocess
import sys
import tempfile

from . import nbcells

ROOT = Path(__file__).resolve().parent.parent  # the workspace folder, when this runs in a kit
STUDENT_ID = re.compile(r"^[A-Za-z0-9-]+$")  # what the instructor's collector accepts
STUB = "raise NotImplementedError()"


class LearnError(RuntimeError):
    """A command cannot run as asked; the message says what to do."""


# --- The workspace -----------------------------------------------------------------------------

def module_id(root, key):
    """`'01'`, `'01_tensor'` or `'tensor'` -> `'01_tensor'`."""
    modules = nbcells.module_ids(root)
    key = str(key).strip()
    found = [m for m in modules if key in (m, m[:2], m[3:]) or (key.isdigit() and int(key) == int(m[:2]))]
    if len(found) != 1:
        raise LearnError(f"no module {key!r}; the modules are {', '.join(modules)}")
    return found[0]


def notebook_file(root, mid):
    return nbcells.notebook_path(root, "modules", mid)


def release_file(root, mid):
    """The untouched copy of a notebook, as it was handed out (test cells are taken from it)."""
    return Path(root) / "tinytorch_kit" / "release" / f"{mid}.ipynb"


def code_cells(notebook):
    return [c for c in notebook.cells if c.cell_type == "code"]


def export_target(cell, default):
    """The package module a `#| export` cell goes to (None if the cell is not exported)."""
    first = cell.source.lstrip().splitlines()[:1]
    match = re.match(r"#\|\s*export(?:\s+(\S+))?\s*$", first[0]) if first else None
    return (match.group(1) or default) if match else None


def default_module(notebook):
    """The `#| default_exp NAME` of a notebook (the package module its exports go to)."""
    for cell in code_cells(notebook):
        match = re.search(r"^#\|\s*default_exp\s+(\S+)", cell.source, re.M)
        if match:
            return match.group(1)
    raise LearnError("the notebook has no `#| default_exp` cell")


def package_file(root, dotted):
    return Path(root) / "tinytorch" / (dotted.replace(".", "/") + ".py")


def digest(*parts):
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def export_digest(notebook):
    """What the package depends on: the source of the notebook's exported cells."""
    default = default_module(notebook)
    return digest(*[c.source for c in code_cells(notebook) if export_target(c, default)])


def check_digest(root, notebook):
    """What a check depends on: every code cell, and the exported module."""
    target = package_file(root, default_module(notebook))
    exported = target.read_text() if target.is_file() else ""
    return digest(*[c.source for c in code_cells(notebook)], exported)


def load_state(root):
    path = Path(root) / ".learn" / "state.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def save_state(root, mid, **fields):
    state = load_state(root)
    state.setdefault(mid, {}).update(fields)
    path = Path(root) / ".learn" / "state.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(state, indent=1, sort_keys=True))


def kernel_env(root):
    """The environment of a kernel that must import this workspace's tinytorch."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(root).resolve())] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("MPLBACKEND", "Agg")
    return env


# --- export ------------------------------------------------------------------------------------

def nbdev_export(root, mid, lib_path):
    """nbdev's export of a module's `#| export` cells, its notebook's then its companions', into
    `lib_path` (a `tinytorch/` folder)."""
    from nbdev.export import nb_export

    previous = os.getcwd()
    os.chdir(root)  # nbdev reads settings.ini from the working directory up
    try:
        for path in nbcells.module_notebooks(root, "modules", mid):
            nb_export(str(path), str(lib_path))
    finally:
        os.chdir(previous)


def do_export(root, key, log=print):
    """`nbdev`'s export of one notebook's `#| export` cells into the workspace's tinytorch/."""
    mid = module_id(root, key)
    notebook = nbcells.read(notebook_file(root, mid))
    default = default_module(notebook)
    exported = [c for c in code_cells(notebook) if export_target(c, default)]
    nbdev_export(root, mid, Path(root) / "tinytorch")
    save_state(root, mid, exported=export_digest(notebook))
    unfinished = [nbcells.grade_id(c) for c in exported if nbcells.is_solution(c) and STUB in c.source]
    log(f"exported {mid}: {len(exported)} cells -> {package_file(root, default).relative_to(root)}")
    for path in nbcells.companion_paths(root, "modules", mid):
        log(f"  and its companion {path.name} -> "
            f"{package_file(root, default_module(nbcells.read(path))).relative_to(root)}")
    if unfinished:
        log(f"  still unfinished (the stub raises NotImplementedError): {', '.join(unfinished)}")
    log("  (a kernel that already imported tinytorch keeps the old code: restart it to see the new)")
    return package_file(root, default)


def _code_lines(text):
    """A package module's code, without nbdev's header and cell markers (they hold paths relative to
    the file)."""
    return [line for line in text.splitlines() if not line.startswith(("# AUTOGENERATED", "# %% "))]


def out_of_date(root, mid):
    """The package files (`tinytorch/x.py`) that are not what the notebook's `#| export` cells give
    now: exported before the learner's last changes, or edited by hand. Missing files do not count."""
    with tempfile.TemporaryDirectory() as scratch:
        nbdev_export(root, mid, Path(scratch) / "tinytorch")
        fresh = {p.relative_to(scratch): p.read_text() for p in sorted(Path(scratch).rglob("*.py"))}
    return [rel.as_posix() for rel, text in fresh.items()
            if (Path(root) / rel).is_file() and _code_lines((Path(root) / rel).read_text()) != _code_lines(text)]


# --- check -------------------------------------------------------------------------------------

def is_visible_test(cell):
    """A test cell with code in it (the hidden tests' cells hold only a comment in the release)."""
    return nbcells.is_test(cell) and any(
        line.strip() and not line.strip().startswith("#") for line in cell.source.splitlines())


def with_release_tests(notebook, release):
    """A copy of the learner's notebook with its test cells as handed out (an edited test does not
    count). The learner's notebook itself stays as saved: `status` compares its digest with the check's."""
    notebook = _copy(notebook)
    if release is None:
        return notebook
    originals = {nbcells.grade_id(c): c for c in release.cells if nbcells.is_test(c)}
    for cell in notebook.cells:
        gid = nbcells.grade_id(cell)
        if gid in originals:
            cell.source = originals[gid].source
    return notebook


def package_version(notebook, dotted):
    """The notebook with its exported cells replaced by the exported package's module.

    The first exported cell imports every name of `tinytorch.<module>` into the notebook's
    namespace; the other exported cells run nothing. Cells that are not exported run as written.
    """
    notebook = _copy(notebook)
    default = default_module(notebook)
    imported = False
    for cell in code_cells(notebook):
        if export_target(cell, default):
            cell.source = "" if imported else (
                "import importlib as _importlib\n"
                f"_package_module = _importlib.import_module('tinytorch.{dotted}')\n"
                "globals().update({k: v for k, v in vars(_package_module).items()"
                " if not k.startswith('__')})")
            imported = True
    return notebook


def _copy(notebook):
    import nbformat
    return nbformat.from_dict(json.loads(json.dumps(notebook)))


KERNEL_DIED = "tinytorch_kernel_died"  # notebook metadata of a run whose kernel died: what happened


def execute(root, notebook, workdir, timeout=120):
    """Run every cell of (a copy of) `notebook` in a fresh kernel, errors allowed, as nbgrader's
    validate runs it (with $NBGRADER_EXECUTION set: demos run as short as when graded).

    If the kernel dies, the cell that was running gets an error output that says so, every later
    code cell one that says it did not run, and the notebook's metadata `KERNEL_DIED` the story."""
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError
    from .kernels import UnixSocketKernelManager

    notebook = _copy(notebook)
    for cell in code_cells(notebook):
        cell.outputs, cell.execution_count = [], None
    running = {}

    def note_running(cell, cell_index):
        running.update(index=cell_index, provisioner=client.km.provisioner)

    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3", allow_errors=True,
                            kernel_manager_class=UnixSocketKernelManager,
                            extra_arguments=["--IPKernelApp.log_level=ERROR"],
                            resources={"metadata": {"path": str(workdir)}}, on_cell_execute=note_running)
    try:
        client.execute(env={**kernel_env(root), "NBGRADER_EXECUTION": "validate"})
    except DeadKernelError:
        process = getattr(running.get("provisioner"), "process", None)
        mark_dead_kernel(notebook, running.get("index"), getattr(process, "returncode", None))
    return notebook


def how_it_ended(returncode):
    """A kernel process's exit status in words: `killed by SIGSEGV`, `exit status 3`."""
    import signal

    if returncode is None:
        return "it stopped answering"
    if returncode < 0:
        return "killed by " + {s.value: s.name for s in signal.Signals}.get(-returncode, f"signal {-returncode}")
    return f"exit status {returncode}"


def mark_dead_kernel(notebook, index, returncode):
    """Error outputs for a kernel that died in code cell `index` (None: before any cell ran): that
    cell says so, later cells did not run."""
    import nbformat

    when = "it started" if index is None else f"{nbcells.describe_cell(notebook, index)} ran"
    story = f"the kernel died while {when} ({how_it_ended(returncode)}): look in that cell, {nbcells.CRASH_CAUSES}"
    notebook.metadata[KERNEL_DIED] = story
    if index is not None:
        notebook.cells[index].outputs.append(nbformat.v4.new_output(
            "error", ename="DeadKernelError", evalue=story, traceback=[]))
    for cell in notebook.cells[0 if index is None else index + 1:]:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output(
                "error", ename="NotRun", evalue=f"not run: the kernel died before, while {when}", traceback=[])]


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def failure(cell):
    """None if an executed test cell passes; else a one-line reason with the failing line."""
    for output in cell.get("outputs", []):
        if output.output_type == "error":
            reason = f"{output.ename}: {output.evalue}".rstrip(": ")
            if output.ename == "NotImplementedError":
                reason += " (an exercise it uses is not done yet)"
            trace = ANSI.sub("", "\n".join(output.traceback))
            where = re.search(r"Cell In\[\d+\], line (\d+)", trace)
            lines = cell.source.splitlines()
            if where and 0 < int(where.group(1)) <= len(lines):
                reason = f"line {where.group(1)}: {lines[int(where.group(1)) - 1].strip()}\n    {reason}"
            return reason
        if output.output_type == "stream" and output.name == "stderr":
            first = (output.text.strip().splitlines() or [""])[0]
            return f"wrote to stderr, which grading counts as a failure: {first}"
    return None


def known_mistakes(root, mid, executed):
    """`{visible test: sentence}`: the failing visible tests whose exercise's visible cells failed
    exactly as a catalogued mistake's do (tinytorch_kit/mistakes.json, made by the course's build:
    each mistake's error class and message in each visible cell of its exercise, and its sentence)."""
    path = Path(root) / "tinytorch_kit" / "mistakes.json"
    if not path.is_file():
        return {}

    def shown(cell):
        error = next((o for o in cell.get("outputs", []) if o.output_type == "error"), None)
        return error and [error.ename, error.evalue]

    cells = nbcells.cells_by_id(executed)
    found = {}
    for mistake in json.loads(path.read_text()).get(mid, {}).get("mistakes", []):
        if all(g in cells and shown(cells[g]) == fails for g, fails in mistake["visible"].items()):
            for gid, fails in mistake["visible"].items():
                if fails:
                    found.setdefault(gid, mistake["says"])
    return found


def do_check(root, key, log=print):
    """Run a module's visible tests on the notebook and on the exported package; print a table."""
    mid = module_id(root, key)
    path = notebook_file(root, mid)
    learner = nbcells.read(path)
    release_path = release_file(root, mid)
    release = nbcells.read(release_path) if release_path.is_file() else None
    notebook = with_release_tests(learner, release)
    dotted = default_module(notebook)
    tests = [nbcells.grade_id(c) for c in (release or notebook).cells if is_visible_test(c)]
    runs = {"notebook": execute(root, notebook, path.parent)}
    exported = package_file(root, dotted).is_file()
    if exported:
        runs["package"] = execute(root, package_version(notebook, dotted), path.parent)
    results = {}  # (test, run) -> None (pass) or the reason it fails
    for run, executed in runs.items():
        cells = nbcells.cells_by_id(executed)
        for gid in tests:
            results[gid, run] = failure(cells[gid]) if gid in cells else "this test cell is missing"
    if not exported:
        for gid in tests:
            results[gid, "package"] = f"tinytorch/{dotted.replace('.', '/')}.py does not exist yet"
    points = {nbcells.grade_id(c): c.metadata["nbgrader"].get("points", 0)
              for c in (release or notebook).cells if is_visible_test(c)}
    stale = out_of_date(root, mid) if exported else []
    passed = all(reason is None for reason in results.values()) and not stale
    log(format_check(mid, dotted, tests, points, results, exported, stale, known_mistakes(root, mid, runs["notebook"])))
    for run, executed in runs.items():
        if KERNEL_DIED in executed.metadata:
            log(f"\nkernel died ({'in the notebook' if run == 'notebook' else f'against tinytorch.{dotted}'}): "
                f"{executed.metadata[KERNEL_DIED]}; the cells after it did not run")
    other = None if KERNEL_DIED in runs["notebook"].metadata else first_other_error(runs["notebook"])
    if other:
        log(f"\nalso, a cell that is not a test raised (grading runs every cell): {other}")
    save_state(root, mid, checked=check_digest(root, learner), passed=passed,
               tally=f"{sum(results[t, 'notebook'] is None and results[t, 'package'] is None for t in tests)}"
                     f"/{len(tests)}")
    return passed


def first_other_error(executed):
    """Where the first code cell that is not a test raised, and why (None if none did): given code, or an
    exercise's cell, that fails when the notebook runs from the top."""
    for cell in code_cells(executed):
        if not nbcells.is_test(cell) and any(o.output_type == "error" for o in cell.get("outputs", [])):
            reason = failure(cell)
            first = (cell.source.strip().splitlines() or [""])[0]
            return f"{nbcells.grade_id(cell) or 'the cell starting ' + repr(first[:60])}, {reason}"
    return None


def format_check(mid, dotted, tests, points, results, exported, stale=(), known=None):
    """The check's table; `stale`: the package files older than the notebook's exported cells;
    `known`: `known_mistakes` in the notebook's run."""
    def mark(reason):
        return "pass" if reason is None else "FAIL"

    header = ["visible test", "points", "notebook", f"tinytorch.{dotted}" + (" (out of date)" if stale else "")]
    rows = [header] + [[gid, str(points[gid]), mark(results[gid, "notebook"]),
                        mark(results[gid, "package"]) if exported else "not exported"] for gid in tests]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [f"{mid}: visible tests, run in the notebook and against your exported package", ""]
    lines += [f"{path} is older than your notebook's `#| export` cells: run ./learn export {mid[:2]}"
              " (the package column tested the code exported before)" for path in stale]
    lines += [""] * bool(stale)
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    for run, label in [("notebook", "in the notebook"), ("package", f"against tinytorch.{dotted}")]:
        count = sum(results[t, run] is None for t in tests)
        lines.append(f"{count}/{len(tests)} pass {label}")
    first = next(((gid, run) for gid in tests for run in ("notebook", "package")
                  if results[gid, run] is not None and (run == "notebook" or exported)), None)
    if first:
        gid, run = first
        lines += ["", f"first failure: {gid} ({'in the notebook' if run == 'notebook' else 'package'})",
                  f"    {results[gid, run]}"]
        if run == "notebook" and (known or {}).get(gid):
            lines.append(f"    this looks like a known mistake: {known[gid]}")
    if not exported or stale:
        lines += ["", f"next: export your code with `./learn export {mid[:2]}`, then check again"]
    elif all(r is None for r in results.values()):
        lines += ["", "all visible tests pass. The hidden tests run when your work is graded."]
    return "\n".join(lines)


# --- status ------------------------------------------------------------------------------------

def module_state(root, mid, state):
    """`(state, detail)`: not started, in progress, exported or checks pass."""
    notebook = nbcells.read(notebook_file(root, mid))
    release_path = release_file(root, mid)
    if release_path.is_file():
        untouched = {nbcells.grade_id(c): c.source for c in nbcells.read(release_path).cells
                     if nbcells.is_solution(c)}
        started = any(untouched.get(nbcells.grade_id(c), c.source) != c.source
                      for c in notebook.cells if nbcells.is_solution(c))
    else:
        started = any(STUB not in c.source for c in notebook.cells if nbcells.is_solution(c))
    if not started:  # even after a check, which fails on the stubs
        return "not started", f"open modules/{mid}/{mid}.ipynb"
    record = state.get(mid, {})
    dotted = default_module(notebook)
    if record.get("checked") == check_digest(root, notebook) and record.get("checked"):
        if record.get("passed"):
            return "checks pass", f"{record.get('tally', '')} visible tests pass"
        return ("exported" if package_file(root, dotted).is_file() else "in progress",
                f"last check: {record.get('tally', '?')} pass")
    if package_file(root, dotted).is_file() and record.get("exported") == export_digest(notebook):
        return "exported", f"next: ./learn check {mid[:2]}"
    if package_file(root, dotted).is_file():
        return "in progress", f"changed since the last export: ./learn export {mid[:2]}"
    return "in progress", f"next: ./learn export {mid[:2]}"


def milestones(root):
    """`[(file, title, required module ids)]` from milestones/*.py (their REQUIRES and docstring)."""
    found = []
    for path in sorted((Path(root) / "milestones").glob("[0-9][0-9]_*.py")):
        tree = ast.parse(path.read_text())
        requires = next((ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                         and [getattr(t, "id", None) for t in node.targets] == ["REQUIRES"]), ())
        title = (ast.get_docstring(tree) or path.stem).splitlines()[0]
        found.append((path, title, tuple(requires)))
    return found


def module_states(root):
    """`{module id: (state, detail)}` for every module of the workspace."""
    state = load_state(root)
    return {mid: module_state(root, mid, state) for mid in nbcells.module_ids(root)}


def unfinished(requires, states):
    """The modules of `requires` whose visible checks do not pass yet (a milestone is locked by them)."""
    return [m for m in requires if states.get(m, ("not released",))[0] != "checks pass"]


def do_status(root, log=print):
    states = module_states(root)
    rows = [["module", "state", ""]] + [[mid, s, detail] for mid, (s, detail) in states.items()]
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    lines = [f"{r[0].ljust(widths[0])}  {r[1].ljust(widths[1])}  {r[2]}".rstrip() for r in rows]
    found = milestones(root)
    if found:
        lines += ["", "milestones (unlocked when the visible checks of the modules they need pass):"]
    for path, title, requires in found:
        missing = unfinished(requires, states)
        status = "unlocked" if not missing else "locked (needs " + ", ".join(missing) + ")"
        lines.append(f"  {path.stem}  {status}: {title}")
        if not missing:
            lines.append(f"      run it: ./learn milestone {path.stem[:2]}")
    log("\n".join(lines))
    return states


# --- milestone ---------------------------------------------------------------------------------

HELP = ("-h", "--help")


def takes_options(path):
    """Whether a milestone program parses options of its own (imports argparse)."""
    return any(isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names)
               for node in ast.parse(Path(path).read_text()).body)


def milestone_help(root, path, requires, states, log=print):
    """A milestone's own help (its options, or its description), and what unlocks it: shown even
    while it is locked (the help of a program with options runs before it imports tinytorch)."""
    if takes_options(path):
        shown = subprocess.run([sys.executable, str(path), "--help"], cwd=root, env=kernel_env(root),
                               capture_output=True, text=True)
        log((shown.stdout + shown.stderr).rstrip())
    else:
        log(f"usage: ./learn milestone {path.stem[:2]}\n\n{ast.get_docstring(ast.parse(path.read_text()))}")
    missing = unfinished(requires, states)
    log(f"\nneeds {', '.join(requires)}: " + ("unlocked" if not missing else f"locked until ./learn check passes "
                                                f"for {', '.join(missing)}"))
    return True


def do_milestone(root, key, args=(), log=print):
    """Run milestones/NN_name.py (with `args`) on the workspace's own tinytorch package, once every
    module it needs passes its checks (what `status` calls unlocked). With -h or --help, show its help."""
    found = [(p, requires) for p, _, requires in milestones(root) if key in (p.stem, p.stem[:2], p.stem[3:])]
    if len(found) != 1:
        raise LearnError(f"no milestone {key!r}; see ./learn status")
    path, requires = found[0]
    states = module_states(root)
    if set(args) & set(HELP):
        return milestone_help(root, path, requires, states, log)
    missing = unfinished(requires, states)
    if missing:
        steps = "\n".join(f"  {m}: {states[m][0] if m in states else 'not in this workspace'}"
                          f" -> finish it, `./learn export {m[:2]}`, `./learn check {m[:2]}`" for m in missing)
        raise LearnError(f"milestone {path.stem} is locked: it runs on your package once these modules "
                         f"pass ./learn check:\n{steps}")
    log(f"running {path.relative_to(root)} with your tinytorch package")
    return subprocess.run([sys.executable, str(path), *args], cwd=root, env=kernel_env(root)).returncode == 0


# --- lab ---------------------------------------------------------------------------------------

def do_lab(root, args=()):
    """JupyterLab in the workspace, with the kit's settings overrides (no news pop-up, no update checks).
    It replaces this process, as `./learn lab` runs it from a terminal."""
    os.chdir(root)
    os.environ["PYTHONPATH"] = kernel_env(root)["PYTHONPATH"]  # not its MPLBACKEND: plots show inline
    os.execv(sys.executable, [sys.executable, "-m", "jupyter", "lab",
                              f"--LabApp.app_settings_dir={Path(root) / 'tinytorch_kit' / 'lab-settings'}", *args])


# --- submit ------------------------------------------------------------------------------------

def do_submit(root, student_id, keys=(), log=print):
    """Copy the notebooks to submission/<id>_NN_name.ipynb: the names the instructor collects."""
    if not STUDENT_ID.match(student_id or ""):
        raise LearnError(f"student id {student_id!r}: use only letters, digits and '-'")
    state = load_state(root)
    chosen = [module_id(root, k) for k in keys] or [
        mid for mid in nbcells.module_ids(root) if module_state(root, mid, state)[0] != "not started"]
    if not chosen:
        raise LearnError("nothing to submit: no module has been started")
    out = Path(root) / "submission"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    written = []
    for mid in chosen:
        target = out / f"{student_id}_{mid}.ipynb"
        shutil.copyfile(notebook_file(root, mid), target)
        written.append(target)
        log(f"  {target.relative_to(root)}  ({module_state(root, mid, state)[0]})")
    log("hand in each file to its module's assignment (upload it as it is: the name matters)")
    return written


# --- from a terminal or a notebook cell --------------------------------------------------------

def main(argv=None, root=None):
    root = Path(root or ROOT)
    parser = argparse.ArgumentParser(prog="learn", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("lab", help="open JupyterLab in the workspace (other options go to jupyter lab)",
                        add_help=False)
    commands.add_parser("status", help="every module's progress and the milestones")
    commands.add_parser("export", help="write a module's #| export cells into tinytorch/") \
        .add_argument("module", metavar="NN", help="a module: 01, 01_tensor or tensor")
    commands.add_parser("check", help="run a module's visible tests on the notebook and the package") \
        .add_argument("module", metavar="NN", help="a module: 01, 01_tensor or tensor")
    milestone = commands.add_parser(
        "milestone", add_help=False,  # -h goes to the milestone: ./learn milestone 07 -h
        help="run a milestone on your package once unlocked (NN [its options])",
        usage="learn milestone [-h] NN [ITS OPTIONS]", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a milestone program on your own tinytorch package, once the modules it needs pass\n"
                    "./learn check (./learn status shows which are unlocked). `./learn milestone NN --help`\n"
                    "shows a milestone's options, locked or not.",
        epilog="milestones:\n" + "\n".join(f"  {p.stem[:2]}  {title}" for p, title, _ in milestones(root)))
    milestone.add_argument("milestone", metavar="NN", nargs="?", help="a milestone (see ./learn status)")
    submit = commands.add_parser("submit", help="pack your notebooks for the instructor")
    submit.add_argument("student_id", metavar="YOUR-ID",
                        help="your id, as your instructor gave it (letters, digits, '-')")
    submit.add_argument("modules", nargs="*", metavar="NN", help="only these modules (default: every started one)")
    args, passed_on = parser.parse_known_args(argv)  # options of jupyter lab or of a milestone
    if passed_on and args.command not in ("lab", "milestone"):
        parser.error(f"unrecognized arguments: {' '.join(passed_on)}")
    try:
        if args.command == "lab":
            do_lab(root, passed_on)
        elif args.command == "export":
            do_export(root, args.module)
        elif args.command == "check":
            return 0 if do_check(root, args.module) else 1
        elif args.command == "status":
            do_status(root)
        elif args.command == "milestone" and args.milestone in (None, *HELP):
            milestone.print_help()
            if not set(passed_on + [args.milestone]) & set(HELP):
                print("error: name a milestone: ./learn milestone NN", file=sys.stderr)
                return 2
        elif args.command == "milestone":
            return 0 if do_milestone(root, args.milestone, passed_on) else 1
        elif args.command == "submit":
            do_submit(root, args.student_id, args.modules)
    except LearnError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def _in_subprocess(*argv):
    """Run a command in a fresh Python (so a notebook's own kernel state stays out of it)."""
    result = subprocess.run([sys.executable, "-m", "tinytorch_kit", *argv], cwd=ROOT,
                            env=kernel_env(ROOT), capture_output=True, text=True)
    print(result.stdout + result.stderr, end="")
    return result.returncode == 0


def export(module):
    """From a notebook cell: `export("01")` (save the notebook first)."""
    return _in_subprocess("export", str(module))


def check(module):
    """From a notebook cell: `check("01")` prints the table; True if every visible test passes."""
    return _in_subprocess("check", str(module))


def status():
    """From a notebook cell: print every module's progress and the milestones."""
    return _in_subprocess("status")
