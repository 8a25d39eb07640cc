"""Autograde a class in parallel, each submission sandboxed, the gradebook written by one process.

Each (learner, module) is a job. A worker process grades it with nbgrader's own `Autograde` in a
private course folder of its own: a copy of the configuration, a snapshot of the gradebook, and a
copy of that one submission, executed in the sandbox kernel (`sandbox_kernel`: resource limits,
an unprivileged user of its own when run as root, and the patching guard `kernel_guard`) by
`GuardedExecute`, which adds a whole-notebook deadline, an output cap and the guard's report.
The worker then writes the feedback HTML there too (nbgrader's `GenerateFeedback`). The parent
records the executed notebook in the real gradebook with nbgrader's `Autograde` again, minus
execution (`SaveAutoGrades`, late penalties), one job at a time, and publishes the feedback once
every submission ran. So the gradebook has one writer, and a submission never runs where the
gradebook, release/ or other learners' files are.

Every module is graded against the course's reference package (a copy put first on the kernel's
sys.path), never against the learner's earlier modules.
"""
import compileall
from concurrent.futures import ProcessPoolExecutor, as_completed
import dataclasses
import datetime
import json
import multiprocessing
import os
from pathlib import Path
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import nbformat
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbgrader.preprocessors import Execute

from . import notebooks
from .nbgrader_api import SANDBOX_KERNEL, CourseError, api, check, install_grader_kernel, load_config

STATUS_FILE = "grading-status.json"  # instructor state, next to the gradebook
PROTECTED = ["nbgrader_config.py", "modules", "release", "solutions", "submitted", "tinytorch"]


UNUSUAL_ERRORS = {  # errors in a cell that the summary mentions, whatever the score
    "CellTimeoutError": "was stopped at the {cell_timeout} s cell limit",
    "KeyboardInterrupt": "was stopped at the {cell_timeout} s cell limit",
    "MemoryError": "ran out of memory (limit {memory_bytes} bytes)",
    "SystemExit": "called exit() (SystemExit)",
    "PermissionError": "tried to change files it may not (PermissionError)",
}


@dataclasses.dataclass
class Limits:
    """What one submission may use. `cell_timeout` None: nbgrader_config.py's Execute.timeout."""
    cell_timeout: int | None = None
    notebook_timeout: int = 900
    memory_mb: int = 3072
    file_mb: int = 64
    output_mb: float = 4.0
    processes: int = 256


# ---------------------------------------------------------------- inside the worker process

class GuardedExecute(Execute):
    """nbgrader's Execute plus a whole-notebook deadline, an output cap and the guard's report.

    The worker sets `GuardedExecute.job` (a dict) before running Autograde; findings go back in it.
    """
    job = None

    def on_cell_execute(self, **kwargs):
        self._running = kwargs.get("cell_index")

    def output(self, outs, msg, display_id, cell_index):
        content = msg.get("content", {})
        size = len(content.get("text", "")) + sum(
            len(v) if isinstance(v, str) else len(json.dumps(v)) for v in content.get("data", {}).values()
        ) + sum(len(line) for line in content.get("traceback", []))
        self._output_bytes += size
        if self._output_bytes <= self.job["output_bytes"] or cell_index == self._report_cell:
            return super().output(outs, msg, display_id, cell_index)
        if cell_index not in self._truncated:
            self._truncated.add(cell_index)
            name = content.get("name", "stdout") if msg["msg_type"] == "stream" else "stdout"
            outs.append(nbformat.v4.new_output(
                "stream", name=name, text=f"[output cut by the grader: over {self.job['output_bytes']} bytes]\n"))
        return None

    def _deadline_passed(self):
        self.job["deadline_passed"] = True
        pid = getattr(getattr(self.km, "provisioner", None), "pid", None)
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def preprocess(self, nb, resources):
        job = self.job
        nonce = secrets.token_hex(16)
        nb.cells.append(nbformat.v4.new_code_cell(
            f"__import__('tinytorch_course.kernel_guard', fromlist=['report']).report({nonce!r})"))
        self._output_bytes, self._truncated, self._running = 0, set(), None
        self._report_cell = len(nb.cells) - 1
        timer = threading.Timer(job["notebook_timeout"], self._deadline_passed)
        timer.start()
        try:
            nb, resources = super().preprocess(nb, resources)
        except DeadKernelError:
            job["died_in_cell"] = self._running
            raise
        except CellTimeoutError:
            job["unstoppable_cell"] = self._running
            raise
        finally:
            timer.cancel()
            reclaim(job)
        report = nb.cells.pop()
        job["guard"] = None
        for output in report.get("outputs", []):
            for line in output.get("text", "").splitlines():
                if line.startswith(nonce + " "):
                    job["guard"] = json.loads(line[len(nonce) + 1:])
        job["truncated"] = sorted(self._truncated)
        return nb, resources


def kill_user(uid):
    """SIGKILL every process of `uid` (a user id owned by one job only)."""
    for _ in range(5):
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/status") as f:
                    line = next(line for line in f if line.startswith("Uid:"))
            except (OSError, StopIteration):
                continue
            if int(line.split()[1]) == uid:
                found = True
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if not found:
            return
        time.sleep(0.05)


def reclaim(job):
    """After execution: end the job's processes, take its folders back, drop links and specials."""
    uid = job.get("uid")
    if uid is not None:
        kill_user(uid)
    for top in [job["workdir"], job["private"]]:
        for folder, dirs, files in os.walk(top):
            for name in dirs + files:
                path = os.path.join(folder, name)
                if os.path.islink(path) or not (os.path.isfile(path) or os.path.isdir(path)):
                    os.unlink(path)
                elif os.geteuid() == 0:
                    os.lchown(path, 0, 0)
        if os.geteuid() == 0 and os.path.isdir(top):
            os.lchown(top, 0, 0)


def _copy_submission(source, destination):
    """Copy a submission folder without its links; returns the links left out."""
    left_out = []
    for folder, dirs, files in os.walk(source):
        relative = os.path.relpath(folder, source)
        os.makedirs(os.path.join(destination, relative), exist_ok=True)
        for name in dirs + files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                left_out.append(os.path.join(relative, name))
            elif os.path.isfile(path):
                shutil.copy(path, os.path.join(destination, relative, name))
    return left_out


def inspect_submission(root, student, module):
    """`(status, reasons, notes)` from what was handed in, before anything runs."""
    folder = Path(root) / "submitted" / student / module
    if not folder.is_dir():
        return "missing", ["nothing submitted"], []
    path = folder / f"{module}.ipynb"
    if not path.is_file() or path.is_symlink():
        found = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.ipynb"))
        if found:
            return "failed", [f"wrong file name: found {', '.join(found)}, expected {module}.ipynb"], []
        return "failed", [f"the submission holds no notebook (expected {module}.ipynb)"], []
    try:
        submitted = nbformat.read(str(path), as_version=4)
        nbformat.validate(submitted)
    except Exception as error:  # noqa: BLE001  (any unreadable notebook is reported, never raised)
        first = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
        return "failed", [f"{module}.ipynb is not a valid notebook: {first}"], []
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
        notes.append(f"kernelspec changed to {kernel!r} (ignored: graded in {SANDBOX_KERNEL})")
    shipped = [p.name for p in folder.iterdir() if p.name in ("tinytorch", "tinytorch.py")]
    if shipped:
        reasons.append(f"ships its own {shipped[0]} (not used: graded against the reference package)")
    return ("review" if reasons else "graded"), reasons, notes


def execute_job(job):
    """Worker: autograde one submission in its own sandbox; returns the job with its outcome."""
    started = time.perf_counter()
    sandbox = Path(job["sandbox"])
    course = sandbox / "course"
    student, module = job["student"], job["module"]
    for sub in ["", "course"]:
        (sandbox / sub).mkdir(mode=0o711, parents=True, exist_ok=True)
    if job["uid"] is not None:  # only this job's kernel (its group) may enter its folder
        os.chown(sandbox, 0, job["uid"])
        sandbox.chmod(0o710)
    root = Path(job["root"])
    shutil.copy(root / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copy(job["gradebook"], course / "gradebook.db")
    os.chmod(course / "gradebook.db", 0o600)
    source = root / "modules" / module
    for path in source.rglob("*"):  # data files the module ships; never the source notebook
        if path.is_file() and path.suffix != ".ipynb":
            (course / "modules" / module / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, course / "modules" / module / path.relative_to(source))
    (course / "modules" / module).mkdir(parents=True, exist_ok=True)
    links = _copy_submission(root / "submitted" / student / module, course / "submitted" / student / module)
    if links:
        job["notes"].append(f"left out links: {', '.join(links)}")
    job["workdir"] = str(course / "autograded")
    job["private"] = str(sandbox / "private")
    spec = {key: job[key] for key in ["workdir", "private", "reference", "mpl_cache", "uid", "hide",
                                      "sandbox",
                                      "memory_bytes", "file_bytes", "cpu_seconds", "processes",
                                      "output_bytes"]}
    spec_file = sandbox / "kernel-spec.json"
    spec_file.write_text(json.dumps(spec))
    os.chmod(spec_file, 0o600)
    os.environ["TINYTORCH_SANDBOX"] = str(spec_file)
    GuardedExecute.job = job
    from traitlets.config import Config
    from nbgrader.preprocessors import AssignLatePenalties, CheckCellMetadata, IgnorePattern, LimitOutput
    from nbgrader.preprocessors import SaveAutoGrades
    from nbconvert.preprocessors import ClearMetadataPreprocessor

    config = Config()
    config.Execute.kernel_name = SANDBOX_KERNEL
    config.Execute.shutdown_kernel = "immediate"  # reclaim() ends its processes anyway
    if job["cell_timeout"]:
        config.Execute.timeout = job["cell_timeout"]
    config.Autograde.autograde_preprocessors = [
        GuardedExecute, IgnorePattern, ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,
        AssignLatePenalties, CheckCellMetadata]
    result = api(course, config=config).autograde(module, student, force=True, create=True)
    executed = course / "autograded" / student / module / f"{module}.ipynb"
    if result.get("success") and executed.is_file():
        results = sandbox / "results" / student / module
        results.mkdir(parents=True)
        shutil.copy(executed, results / executed.name)
        timestamp = course / "submitted" / student / module / "timestamp.txt"
        if timestamp.is_file():
            shutil.copy(timestamp, results / "timestamp.txt")
        job["results"] = str(sandbox / "results")
        guard = job.get("guard")
        if guard is None:
            job["reasons"].append("the integrity check did not report (the submission may have "
                                  "interfered with the grader)")
        else:
            job["reasons"] += [f"{what} (in cell {cell})" for what, cell in guard]
        for index, cell in enumerate(notebooks.read(executed).cells):
            for name in {o.ename for o in cell.get("outputs", []) if o.output_type == "error"}:
                if name in UNUSUAL_ERRORS:
                    job["notes"].append(f"cell {index} {UNUSUAL_ERRORS[name]}".format(**job))
        if job.get("truncated"):
            job["notes"].append(f"output cut at {job['output_bytes']} bytes")
        if job["reasons"]:
            job["status"] = "review"
    else:
        job["status"], job["results"] = "failed", None
        cell = job.get("died_in_cell")
        where = f" in cell {cell}" if cell is not None else ""
        if "unstoppable_cell" in job:
            job["reasons"].append(f"cell {job['unstoppable_cell']} ran past the {job['cell_timeout']} s "
                                  "cell limit and ignored the interrupt; stopped")
        elif job.get("deadline_passed"):
            job["reasons"].append(f"ran past the {job['notebook_timeout']} s limit for a whole "
                                  f"notebook{where}; stopped")
        elif "died_in_cell" in job:
            job["reasons"].append(f"the kernel died{where} (exit, crash or resource limit)")
        else:
            job["log"] = result.get("log", "")
            errors = [line.strip() for line in job["log"].splitlines()
                      if re.match(r"\s*[\w.]*(Error|Exception)\b", line) and "NbGrader" not in line]
            job["reasons"].append("nbgrader could not grade it: " + (errors[-1] if errors else "no log"))
    job["seconds"] = time.perf_counter() - started
    if job["results"] and job["feedback_dir"]:
        write_feedback(course, job)
    return job


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


def _prepare_run_dir(root, scratch=None):
    run_dir = Path(tempfile.mkdtemp(prefix="tinytorch-grading-", dir=scratch))
    run_dir.chmod(0o711)
    reference = run_dir / "reference"
    shutil.copytree(Path(root) / "tinytorch", reference / "tinytorch",
                    ignore=shutil.ignore_patterns("__pycache__"))
    compileall.compile_dir(reference, quiet=1)  # kernels may not write bytecode there
    for folder, dirs, files in os.walk(run_dir):
        os.chmod(folder, 0o755 if folder.startswith(str(reference)) else 0o711)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    mpl = run_dir / "mpl"
    mpl.mkdir(mode=0o755)
    subprocess.run([sys.executable, "-I", "-c", "import matplotlib.font_manager"], check=True,
                   env={**os.environ, "MPLCONFIGDIR": str(mpl)}, capture_output=True)
    for path in mpl.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return run_dir


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


def merge(root, job):
    """Record an executed notebook in the real gradebook: nbgrader's Autograde minus execution."""
    from traitlets.config import Config
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import AssignLatePenalties, CheckCellMetadata, SaveAutoGrades

    config = Config()
    config.Autograde.sanitize_preprocessors = []
    config.Autograde.autograde_preprocessors = [SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]
    grader = api(root, config=config, submitted_directory=job["results"])
    check(grader.autograde(job["module"], job["student"], force=True, create=True),
          f"recording {job['module']} for {job['student']}")
    with Gradebook(grader.coursedir.db_url) as gradebook:
        submission = gradebook.find_submission(job["module"], job["student"])
        for notebook in submission.notebooks:
            notebook.flagged = job["status"] == "review"
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


def autograde_class(root, modules=None, students=None, jobs=None, limits=None, feedback=True,
                    scratch=None, log=print):
    """Autograde `modules` x `students` (default: all) with `jobs` worker processes.

    Returns `{module: {student: entry}}` for what was graded now, where entry holds `status`
    (graded, review, failed, missing), `score`, `max_score`, `reasons`, `notes`; the same lands
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
    run_dir = _prepare_run_dir(root, scratch)
    snapshot = run_dir / "gradebook-snapshot.db"
    shutil.copy(root / "gradebook.db", snapshot)
    snapshot.chmod(0o600)
    (run_dir / "feedback").mkdir(mode=0o700)
    before = fingerprint(root)
    started = time.perf_counter()
    as_root = os.geteuid() == 0
    context = multiprocessing.get_context("fork")
    try:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            futures = []
            for index, (module, student, entry) in enumerate(planned):
                job = dict(entry, module=module, student=student, root=str(root),
                           sandbox=str(run_dir / "jobs" / str(index)), gradebook=str(snapshot),
                           reference=str(run_dir / "reference"), mpl_cache=str(run_dir / "mpl"),
                           hide=[str(root), os.path.expanduser("~")],
                           uid=1_000_000_000 + secrets.randbelow(1_000_000_000) if as_root else None,
                           memory_bytes=limits.memory_mb << 20, file_bytes=limits.file_mb << 20,
                           cpu_seconds=limits.notebook_timeout + 60, processes=limits.processes,
                           cell_timeout=cell_timeout, notebook_timeout=limits.notebook_timeout,
                           output_bytes=int(limits.output_mb * (1 << 20)),
                           feedback_dir=str(run_dir / "feedback" / str(index)) if feedback else None)
                futures.append(pool.submit(execute_job, job))
            with_feedback = []
            for future in as_completed(futures):
                job = future.result()
                entry = {key: job[key] for key in ["status", "reasons", "notes"]}
                entry["score"] = entry["max_score"] = None
                entry["seconds"] = round(job["seconds"], 2)
                if job["results"]:
                    entry["score"], entry["max_score"] = merge(root, job)
                    if job.get("feedback_html"):
                        with_feedback.append(job)
                outcome[job["module"]][job["student"]] = entry
                shutil.rmtree(job["sandbox"], ignore_errors=True)
            elapsed = time.perf_counter() - started
            after = fingerprint(root)
            changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            if changed:
                raise CourseError("course files changed while submissions ran (run the grader as "
                                  "root so that each submission runs as its own user): "
                                  + ", ".join(changed[:10]))
            for job in with_feedback:
                publish_feedback(root, job)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    stamp = datetime.datetime.now().isoformat(timespec="seconds")
    status = read_status(root)
    for module, entries in outcome.items():
        for student, entry in entries.items():
            status.setdefault(module, {})[student] = dict(entry, graded_at=stamp)
    _write_status(root, status)
    log(f"autograded {len(planned)} submission(s) with {jobs} job(s) in {elapsed:.1f} s")
    return outcome
