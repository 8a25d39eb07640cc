"""Autograde a class in parallel, each submission sandboxed, the gradebook written by one process.

Each (learner, module) is a job. A worker process grades it with nbgrader's own `Autograde` in a
private course folder of its own: a copy of the configuration, a snapshot of the gradebook, and a
copy of that one submission. The course's configuration runs it with `sandbox.SandboxedExecute`
(bubblewrap, resource limits, trusted verdicts from the checks' records), so this route and
nbgrader's own (`nbgrader autograde`, the formgrader) grade alike. The worker then writes the
feedback HTML there too (nbgrader's `GenerateFeedback`). The parent records the executed notebook
in the real gradebook with nbgrader's `Autograde` again, minus execution (`SaveAutoGrades`, late
penalties), one job at a time, and publishes the feedback once every submission ran. So the
gradebook has one writer, and no submission runs where the gradebook, release/ or other learners'
files are.

Every module is graded against the course's reference package of the modules before it (never the
learner's earlier modules, never the module's own answer).
"""
from concurrent.futures import ProcessPoolExecutor, as_completed
import dataclasses
import datetime
import json
import multiprocessing
import os
from pathlib import Path
import re
import shutil
import tempfile
import time

import nbformat

from . import sandbox
from .. import notebooks
from ..build import hidden_inputs
from .intake import printable
from ..nbgrader_api import CourseError, api, check, install_grader_kernel, load_config
from ..progress import Progress

STATUS_FILE = "grading-status.json"  # instructor state, next to the gradebook
PROTECTED = ["nbgrader_config.py", "modules", "mistakes", "release", "solutions", "submitted", "tinytorch"]
MAX_NOTEBOOK_BYTES = 64 << 20


UNUSUAL_ERRORS = {  # errors in a cell that the summary mentions, whatever the score
    "CellTimeoutError": "was stopped at the {cell_timeout} s cell limit",
    "KeyboardInterrupt": "was stopped at the {cell_timeout} s cell limit",
    "MemoryError": "ran out of memory (limit {memory_mb} MB)",
    "SystemExit": "called exit() (SystemExit)",
    "PermissionError": "tried to change files it may not (PermissionError)",
}


@dataclasses.dataclass
class Limits:
    """What one submission may use. `cell_timeout` None: nbgrader_config.py's Execute.timeout.
    `memory_mb` bounds each process; `job_memory_mb` (its files included), `processes` and
    `disk_mb` (its working folder) the whole job (`sandbox.SandboxedExecute`), with control
    groups where the machine allows and `use_cgroups`, else with the sandbox's watch."""
    cell_timeout: int | None = None
    notebook_timeout: int = 900
    memory_mb: int = 3072
    job_memory_mb: int = 4096
    file_mb: int = 64
    disk_mb: int = 512
    output_mb: float = 4.0
    processes: int = 256
    use_cgroups: bool = True


# ---------------------------------------------------------------- inside the worker process

def _copy_submission(source, destination):
    """Copy a submission folder's regular files (as 0644, folders 0755); returns what was left
    out (links, devices, FIFOs)."""
    left_out = []
    for folder, dirs, files in os.walk(source):
        relative = os.path.relpath(folder, source)
        os.makedirs(os.path.join(destination, relative), mode=0o755, exist_ok=True)
        for name in dirs + files:
            path = os.path.join(folder, name)
            if os.path.islink(path) or not (os.path.isfile(path) or os.path.isdir(path)):
                left_out.append(os.path.join(relative, name))
            elif os.path.isfile(path):
                shutil.copyfile(path, os.path.join(destination, relative, name))
                os.chmod(os.path.join(destination, relative, name), 0o644)
    return left_out


def metadata_problem(notebook):
    """What is wrong with a notebook's nbgrader cell metadata (None if nothing): nbgrader would
    raise on it."""
    seen = set()
    for index, cell in enumerate(notebook.cells):
        meta = cell.get("metadata", {}).get("nbgrader")
        if meta is None:
            continue
        if not isinstance(meta, dict):
            return f"cell {index} has nbgrader metadata that is not a mapping"
        gid = meta.get("grade_id")
        if gid is not None and not (isinstance(gid, str) and re.fullmatch(r"[A-Za-z0-9_\-]*", gid)):
            return f"cell {index} has an invalid grade id {str(gid)[:40]!r}"
        if gid in seen:
            return f"cell {index} repeats the grade id {gid!r}"
        seen.add(gid)
        for flag in ("grade", "solution", "locked", "task"):
            if flag in meta and not isinstance(meta[flag], bool):
                return f"cell {index} has a non-boolean nbgrader {flag!r}"
        if "points" in meta and not isinstance(meta["points"], (int, float)):
            return f"cell {index} has non-numeric points"
    return None


def inspect_submission(root, student, module):
    """`(status, reasons, notes)` from what was handed in, before anything runs."""
    folder = Path(root) / "submitted" / student / module
    if folder.is_symlink() or not folder.is_dir():
        return "missing", ["nothing submitted"], []
    path = folder / f"{module}.ipynb"
    if not path.is_file() or path.is_symlink():
        found = sorted(printable(p.relative_to(folder), 80) for p in folder.rglob("*.ipynb"))
        if found:
            return "failed", [f"wrong file name: found {', '.join(found[:5])}, expected {module}.ipynb"], []
        return "failed", [f"the submission holds no notebook (expected {module}.ipynb)"], []
    if path.stat().st_size > MAX_NOTEBOOK_BYTES:
        return "failed", [f"{module}.ipynb is larger than {MAX_NOTEBOOK_BYTES >> 20} MB"], []
    try:
        submitted = nbformat.read(str(path), as_version=4)
        nbformat.validate(submitted)
        problem = metadata_problem(submitted)
    except Exception as error:  # noqa: BLE001  (any unreadable notebook is reported, never raised)
        first = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
        return "failed", [f"{module}.ipynb is not a valid notebook: {first}"], []
    if problem:
        return "failed", [f"{module}.ipynb has broken nbgrader metadata: {problem}"], []
    reasons, notes = [], []
    release = notebooks.read(notebooks.notebook_path(root, "release", module))
    graded_source = notebooks.cells_by_id(notebooks.read(notebooks.notebook_path(root, "modules", module)))
    handed_in = notebooks.cells_by_id(submitted)
    for cell in release.cells:
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("locked"):
            continue
        gid = meta["grade_id"]
        theirs = handed_in.get(gid)
        if theirs is None:
            reasons.append(f"deleted the locked cell {gid}")
        elif theirs.source not in (cell.source, graded_source[gid].source):
            notes.append(f"edited the locked cell {gid} (restored from the gradebook)")
    kernel = submitted.metadata.get("kernelspec", {}).get("name")
    if kernel != release.metadata.get("kernelspec", {}).get("name"):
        notes.append(f"kernelspec changed to {str(kernel)[:40]!r} (ignored: graded in the sandbox)")
    shipped = [p.name for p in folder.iterdir() if p.name in ("tinytorch", "tinytorch.py")]
    if shipped:
        reasons.append(f"ships its own {shipped[0]} (not used: graded against the reference package)")
    return ("review" if reasons else "graded"), reasons, notes


def one_line(error):
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:200]}" if text else type(error).__name__


def execute_job(job):
    """Worker: autograde one submission in a private course copy; returns the job with its
    outcome. Whatever goes wrong with this submission fails it alone, never the run."""
    started = time.perf_counter()
    try:
        _autograde_job(job)
    except Exception as error:  # noqa: BLE001
        job["status"], job["results"] = "failed", None
        job["reasons"].append(f"the grader could not grade it: {one_line(error)}")
    fail_over_limit(job)
    job["seconds"] = time.perf_counter() - started
    if job["results"] and job["feedback_dir"]:
        try:
            write_feedback(Path(job["job_dir"]) / "course", job)
        except Exception as error:  # noqa: BLE001
            job["notes"].append(f"feedback failed: {one_line(error)}")
    return job


def fail_over_limit(job):
    """A job that reached a limit of the whole job (memory, processes, disk) fails, unscored,
    with that limit as its first reason, whatever else happened to it."""
    if job.get("over_limit"):
        job["status"], job["results"] = "failed", None
        job["reasons"] = job["over_limit"] + [r for r in job["reasons"] if r not in job["over_limit"]]


def _autograde_job(job):
    job_dir = Path(job["job_dir"])
    course = job_dir / "course"
    student, module = job["student"], job["module"]
    course.mkdir(mode=0o700, parents=True)
    root = Path(job["root"])
    shutil.copyfile(root / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copyfile(job["gradebook"], course / "gradebook.db")
    source = root / "modules" / module
    for path in source.rglob("*"):  # data files the module ships; never the source notebook
        if path.is_file() and path.suffix != ".ipynb":
            (course / "modules" / module / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, course / "modules" / module / path.relative_to(source))
    (course / "modules" / module).mkdir(parents=True, exist_ok=True)
    links = _copy_submission(root / "submitted" / student / module, course / "submitted" / student / module)
    if links:
        job["notes"].append(f"left out links and special files: {', '.join(map(repr, links))[:300]}")
    from traitlets.config import Config

    config = Config()
    config.SandboxedExecute.course_root = str(root)
    config.SandboxedExecute.cache_dir = job["cache_dir"]
    config.SandboxedExecute.job_root = str(job_dir)
    for name in ["notebook_timeout", "memory_mb", "job_memory_mb", "file_mb", "disk_mb", "processes", "output_mb",
                 "use_cgroups"]:
        config.SandboxedExecute[name] = job[name]
    config.Execute.shutdown_kernel = "immediate"  # the sandbox ends all its processes anyway
    if job["cell_timeout"]:
        config.Execute.timeout = job["cell_timeout"]
    sandbox.SandboxedExecute.job = job
    result = api(course, config=config).autograde(module, student, force=True, create=True)
    executed = course / "autograded" / student / module / f"{module}.ipynb"
    if result.get("success") and executed.is_file():
        results = job_dir / "results" / student / module
        results.mkdir(parents=True)
        shutil.copyfile(executed, results / executed.name)
        timestamp = course / "submitted" / student / module / "timestamp.txt"
        if timestamp.is_file():
            shutil.copyfile(timestamp, results / "timestamp.txt")
        job["results"] = str(job_dir / "results")
        for index, cell in enumerate(notebooks.read(executed).cells):
            for name in {o.ename for o in cell.get("outputs", []) if o.output_type == "error"}:
                note = f"cell {index} {UNUSUAL_ERRORS.get(name, '')}".format(**job)
                if name in UNUSUAL_ERRORS and note not in job["notes"]:
                    job["notes"].append(note)
        if job["reasons"]:
            job["status"] = "review"
        return
    job["status"], job["results"] = "failed", None
    errors = [line.strip() for line in result.get("log", "").splitlines()
              if re.match(r"\s*[\w.]*(Error|Exception)\b", line) and "NbGrader" not in line]
    job["reasons"].append(job.get("stopped")  # the sandbox says why it stopped the notebook
                          or "nbgrader could not grade it: " + (errors[-1][:300] if errors else "no log"))


def write_feedback(course, job):
    """nbgrader's GenerateFeedback in the worker's course copy; sets `job["feedback_html"]`, a copy
    in `job["feedback_dir"]`.

    Its gradebook snapshot holds the scores that the parent's merge records (the same executed
    notebook through the same SaveAutoGrades), so the HTML matches the real gradebook.
    """
    student, module = job["student"], job["module"]
    result = api(course, notebook_id=module).generate_feedback(module, student, force=True)
    html = course / "feedback" / student / module / f"{module}.html"
    if result.get("success") and html.is_file():
        Path(job["feedback_dir"]).mkdir()
        job["feedback_html"] = shutil.copy(html, Path(job["feedback_dir"]) / html.name)
    else:
        job["notes"].append("feedback failed: " + (result.get("log") or "no log")[-200:])


# ---------------------------------------------------------------- in the instructor's process

def fingerprint(root):
    """(size, mtime, mode) of every protected course file: a submission must change none."""
    found = {}
    for name in PROTECTED:
        top = Path(root) / name
        paths = [top] if top.is_file() else (sorted(top.rglob("*")) if top.is_dir() else [])
        for path in paths:
            stat = path.lstat()
            found[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns, stat.st_mode)
    return found


def read_status(root):
    path = Path(root) / STATUS_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def _write_status(root, status):
    path = Path(root) / STATUS_FILE
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(status, indent=1, sort_keys=True))
    temporary.replace(path)


def class_list(root):
    from nbgrader.api import Gradebook

    with Gradebook(api(root).coursedir.db_url) as gradebook:
        return sorted(s.id for s in gradebook.students), sorted(a.name for a in gradebook.assignments)


def _result(future, job):
    """A finished job, or the job failed if its worker process itself died."""
    try:
        return future.result()
    except Exception as error:  # noqa: BLE001  (BrokenProcessPool: the worker was killed)
        return dict(job, status="failed", results=None,
                    reasons=job["reasons"] + [f"the grading worker died: {one_line(error)}"])


def merge(root, job):
    """Record an executed notebook in the real gradebook: nbgrader's Autograde minus execution
    (and minus its metadata checks: the worker's Autograde made them on this notebook)."""
    from traitlets.config import Config
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import AssignLatePenalties, SaveAutoGrades

    config = Config()
    config.Autograde.sanitize_preprocessors = []
    config.Autograde.autograde_preprocessors = [SaveAutoGrades, AssignLatePenalties]
    grader = api(root, config=config, submitted_directory=job["results"])
    check(grader.autograde(job["module"], job["student"], force=True, create=True),
          f"recording {job['module']} for {job['student']}")
    with Gradebook(grader.coursedir.db_url) as gradebook:
        submission = gradebook.find_submission(job["module"], job["student"])
        for notebook in submission.notebooks:
            notebook.flagged = job["status"] == "review"
            if notebook.comments:
                notebook.comments[0].auto_comment = (
                    "Flagged for review: " + "; ".join(job["reasons"]) if job["reasons"] else None)
        gradebook.db.commit()
        return submission.score, submission.max_score


def publish_feedback(root, job):
    """Move a job's feedback HTML to feedback/<student>/<module>/, beside the submission's
    timestamp.txt (the layout of nbgrader's GenerateFeedback, which release_feedback reads)."""
    student, module = job["student"], job["module"]
    target = Path(root) / "feedback" / student / module
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    shutil.move(job["feedback_html"], target / f"{module}.html")
    timestamp = Path(root) / "submitted" / student / module / "timestamp.txt"
    if timestamp.is_file():
        shutil.copy(timestamp, target / "timestamp.txt")


def _report(progress, module, student, entry):
    """Count a finished submission on `progress`; a failure is printed at once, with its reasons."""
    failure = printable("; ".join(entry["reasons"]), 500) if entry["status"] == "failed" else None
    progress.done(printable(f"{module} {student}"), failure)


def _report_early_failures(progress, outcome):
    """Print the submissions that failed before running (no notebook, a broken one)."""
    for module, entries in outcome.items():
        for student, entry in entries.items():
            if entry["status"] == "failed":
                progress.fail(printable(f"{module} {student}"), printable("; ".join(entry["reasons"]), 500))


def autograde_class(root, modules=None, students=None, jobs=None, limits=None, feedback=True,
                    scratch=None, log=print):
    """Autograde `modules` x `students` (default: all) with `jobs` worker processes.

    Returns `{module: {student: entry}}` for what was graded now, where entry holds `status`
    (graded, review, failed, missing), `score`, `max_score`, `reasons`, `notes`, and for a scored
    one `checks` (`{grade id: {"passed", "mistakes", "difference", "signature"}}`: `diagnose`); the same lands
    in `grading-status.json` (merged with earlier runs) for `summary`.
    """
    root = Path(root).resolve()
    limits = limits or Limits()
    install_grader_kernel()
    known_students, known_modules = class_list(root)
    modules = list(modules or [m for m in notebooks.module_ids(root) if m in known_modules])
    students = list(students or known_students)
    for module in modules:
        if module not in known_modules:
            raise CourseError(f"{module} is not in the gradebook: run ./course build first")
    jobs = max(1, jobs or os.cpu_count() or 1)
    cell_timeout = limits.cell_timeout or load_config(root).Execute.get("timeout")
    outcome = {m: {} for m in modules}
    planned = []
    for module in modules:
        for student in students:
            status, reasons, notes = inspect_submission(root, student, module)
            entry = {"status": status, "reasons": reasons, "notes": notes, "score": None,
                     "max_score": None}
            if status in ("missing", "failed"):
                outcome[module][student] = entry
            else:
                planned.append((module, student, entry))
    try:
        sandbox.require_bubblewrap()
        cache_dir = sandbox.default_cache_dir(root)
        for module, variant in sorted({(module, hidden_inputs.variant(root, module, student)["variant"])
                                       for module, student, _ in planned}):
            sandbox.prepare(root, module, cache_dir, variant)  # the answer key, once per variant used
    except (sandbox.SandboxError, RuntimeError) as error:
        raise CourseError(str(error)) from error
    run_dir = Path(tempfile.mkdtemp(prefix="tinytorch-grading-", dir=scratch))
    snapshot = run_dir / "gradebook-snapshot.db"
    shutil.copyfile(root / "gradebook.db", snapshot)
    (run_dir / "feedback").mkdir()
    before = fingerprint(root)
    started = time.perf_counter()
    context = multiprocessing.get_context("fork")
    progress = Progress(len(planned), "grading")
    _report_early_failures(progress, outcome)
    try:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            futures = {}
            for index, (module, student, entry) in enumerate(planned):
                job = dict(entry, module=module, student=student, root=str(root),
                           job_dir=str(run_dir / "jobs" / str(index)), gradebook=str(snapshot),
                           cache_dir=str(cache_dir), results=None,
                           feedback_dir=str(run_dir / "feedback" / str(index)) if feedback else None,
                           **dataclasses.asdict(limits) | {"cell_timeout": cell_timeout})
                futures[pool.submit(execute_job, job)] = job
            with_feedback = []
            for future in as_completed(futures):
                job = _result(future, futures[future])
                entry = {key: job[key] for key in ["status", "reasons", "notes"]}
                entry["variant"] = job.get("variant")  # hidden inputs: term, variants, variant
                entry["score"] = entry["max_score"] = None
                entry["seconds"] = round(job.get("seconds", 0), 2)
                if job["results"]:
                    try:
                        entry["score"], entry["max_score"] = merge(root, job)
                    except Exception as error:  # noqa: BLE001  (one bad record fails only itself)
                        entry["status"] = "failed"
                        entry["reasons"] = entry["reasons"] + [f"recording the grade failed: {one_line(error)}"]
                    else:
                        if job.get("checks") is not None:
                            entry["checks"] = job["checks"]  # `diagnose.diagnose`: for the class report
                        if job.get("feedback_html"):
                            with_feedback.append(job)
                outcome[job["module"]][job["student"]] = entry
                _report(progress, job["module"], job["student"], entry)
                shutil.rmtree(job["job_dir"], ignore_errors=True)
            elapsed = time.perf_counter() - started
            after = fingerprint(root)
            changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            if changed:
                raise CourseError("course files changed while submissions ran: "
                                  + ", ".join(changed[:10]))
            for job in with_feedback:
                publish_feedback(root, job)
    finally:
        progress.close()
        shutil.rmtree(run_dir, ignore_errors=True)
    stamp = datetime.datetime.now().isoformat(timespec="seconds")
    status = read_status(root)
    for module, entries in outcome.items():
        for student, entry in entries.items():
            status.setdefault(module, {})[student] = dict(entry, graded_at=stamp)
    _write_status(root, status)
    log(f"autograded {len(planned)} submission(s) with {jobs} job(s) in {elapsed:.1f} s")
    return outcome
