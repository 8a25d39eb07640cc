"""Run a submission in a bubblewrap sandbox, and judge its test cells outside it.

`SandboxedExecute` is nbgrader's Execute preprocessor for submissions. The course's
`nbgrader_config.py` puts it first in `Autograde.autograde_preprocessors`, so every route that
autogrades (`./course grade run`, `nbgrader autograde`, the formgrader's button) runs it. For each
notebook it:

* prepares a job folder: `work/` (the submission's other files, never a notebook: the kernel
  copies them into its working folder, a size-limited filesystem of its own), `ipc/` (the kernel's
  sockets), the records file and the job spec (both only for the grader);
* puts the whole job in control groups of its own (`cgroups`: memory, processes and CPU share of
  all its processes together) where the machine allows, and watches it while it runs
  (`JobWatch`: full disks; memory and processes where no control group bounds them); a job
  that reaches a limit is stopped, and the limit is its reason to fail;
* starts the `tinytorch-sandbox` kernel (`sandbox_kernel`), which runs it under bubblewrap: new
  PID, network, IPC and UTS namespaces, a fresh root with the Python installation, the reference
  package of the earlier modules (never the graded one) and the kernel's own files read-only,
  `ipc/` writable, a working folder and private /tmp, /var/tmp and /dev/shm of fixed sizes, a
  cleared environment, resource limits; as root, a user id of its own that owns nothing else. Every process of the job dies with it;
* executes the notebook with `RecordingExecute` (records per cell, hidden tests out of the
  kernel's history) under a whole-notebook deadline and an output cap;
* if the kernel dies, executes it again in a fresh sandbox with the solution cell that was running
  (or the last one before it) as the release's stub, at most `MAX_CRASHES` times within the same
  deadline; the feedback shows the learner's code in that cell with an error saying what happened;
* gives the kernel the seed of the learner's variant of the module (`hidden_inputs`): the hidden
  tests' inputs, whose answer key is made for that variant;
* judges every graded test cell from its records against the answer key's and notes what to flag
  for review (`verdicts.review`), says under each failing cell what the failure is (`diagnose.explain`),
  and marks the cells that fail for nbgrader's scores (`resources["tinytorch"]`, and `FlagForReview`
  writes the reasons into the gradebook); a notebook it could not run to its end gets the reason
  (`_why_stopped`) in the worker's job.
"""
import compileall
import copy
import hashlib
import json
import os
from pathlib import Path
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import nbformat
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Float, Integer, Unicode

from . import cgroups, diagnose, grading_cache, verdicts
from .. import notebooks
from ..build import hidden_inputs
from ..nbgrader_api import GRADER_KERNEL, SANDBOX_KERNEL

HERE = Path(__file__).resolve().parent
KERNEL_FILES = ["kernel_main.py", "kernel_guard.py"]
JOB_PREFIX = "tinytorch-job-"  # job folders, and the jobs' control groups
UID_BASE = 2_000_000_000  # job user ids: 2e9 + a random number, owned by nothing on the machine
MAX_CRASHES = 3  # runs again after a dead kernel, each with one more exercise reset to its stub


class SandboxError(RuntimeError):
    """The sandbox cannot be set up on this machine (the message says what to install)."""


def execution_mode():
    """`{"NBGRADER_EXECUTION": ...}` while nbgrader autogrades or validates (it sets that variable
    for notebooks to read, e.g. to skip long demos), else `{}`."""
    mode = os.environ.get("NBGRADER_EXECUTION")
    return {"NBGRADER_EXECUTION": mode} if mode in ("autograde", "validate") else {}


def require_bubblewrap():
    if shutil.which("bwrap") is None:
        raise SandboxError("grading needs bubblewrap: install it (Debian/Ubuntu: apt-get install "
                           "bubblewrap); ./course installs it itself when run as root")
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        raise SandboxError("grading as root needs setpriv (Debian/Ubuntu: apt-get install util-linux)")


# ---------------------------------------------------------------- what the sandbox sees


def package_owners(root):
    """`{package module: module id}`: which notebook exports each module of `tinytorch/`."""
    owners = {}
    for module_id in notebooks.module_ids(root):
        for path in notebooks.module_notebooks(root, "modules", module_id):
            for cell in notebooks.read(path).cells:
                for name in re.findall(r"^#\|\s*(?:default_exp|export)\s+(\S+)", cell.source, re.M):
                    owners.setdefault(name, module_id)
    return owners


def reference_package(root, module_id, cache_dir):
    """A compiled copy of the reference package without the modules that `module_id` or a later
    notebook exports (a submission must not import the answer it is graded on); cached."""
    owners = package_owners(root)
    digest = grading_cache.key(root, module_id, json.dumps(owners, sort_keys=True))
    target = Path(cache_dir) / "reference" / f"{module_id}-{digest}"
    if target.is_dir():
        return target
    later = {name for name, owner in owners.items() if owner >= module_id}
    staging = Path(tempfile.mkdtemp(prefix="reference-", dir=Path(cache_dir)))
    source = Path(root) / "tinytorch"
    for path in sorted(source.rglob("*.py")):
        dotted = path.relative_to(source).with_suffix("").as_posix().replace("/", ".")
        if dotted in later:
            continue
        destination = staging / "tinytorch" / path.relative_to(source)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, destination)
    compileall.compile_dir(staging, quiet=1)  # the kernel may not write bytecode there
    _world_readable(staging)
    target.parent.mkdir(parents=True, exist_ok=True)
    return _publish(staging, target)


# Graded notebooks draw no figures: the sandbox's matplotlib uses the Agg backend (MPLBACKEND),
# so `plt.show()` renders nothing (pictures teach; drawing them cost about 0.5 s a notebook) and
# figures left open do not warn.
MATPLOTLIBRC = "figure.max_open_warning: 0\n"


def kernel_files(cache_dir):
    """The sandbox's own files (`kernel_main`, `kernel_guard`), a prebuilt matplotlib font cache and
    its matplotlibrc, in one folder that is mounted read-only; cached."""
    digest = hashlib.sha256(b"".join((HERE / name).read_bytes() for name in KERNEL_FILES)
                            + MATPLOTLIBRC.encode())
    target = Path(cache_dir) / f"kernel-{digest.hexdigest()[:16]}"
    if target.is_dir():
        return target
    staging = Path(tempfile.mkdtemp(prefix="kernel-", dir=Path(cache_dir)))
    for name in KERNEL_FILES:
        shutil.copyfile(HERE / name, staging / name)
    (staging / "mpl").mkdir()
    (staging / "mpl" / "matplotlibrc").write_text(MATPLOTLIBRC)
    subprocess.run([sys.executable, "-I", "-c", "import matplotlib.font_manager"], check=True,
                   env={**os.environ, "MPLCONFIGDIR": str(staging / "mpl")}, capture_output=True)
    compileall.compile_dir(staging, quiet=1)
    _world_readable(staging)
    return _publish(staging, target)


def _publish(staging, target):
    """Rename the finished folder `staging` to `target`; if another process published it first,
    keep theirs (the contents are the same: the name is their digest)."""
    try:
        staging.rename(target)
    except OSError:
        if not target.is_dir():
            raise
        shutil.rmtree(staging)
    return target


def _world_readable(top):
    for folder, _, files in os.walk(top):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)


def default_cache_dir(root):
    """$TINYTORCH_GRADING_CACHE, else ROOT/.grading-cache. Entries are named by the digest of what
    they are made from, so several copies of a course may share one cache."""
    return Path(os.environ.get("TINYTORCH_GRADING_CACHE") or Path(root) / ".grading-cache")


def prepare(root, module_id, cache_dir, variant=0):
    """Everything the jobs of a module's hidden-input `variant` (`hidden_inputs`) share, made once:
    `(reference package, kernel files, answer key, the variant's seed)`."""
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    seed = hidden_inputs.seed(root, module_id, variant)
    key = verdicts.reference_records(root, module_id, cache_dir / "answer-keys", GRADER_KERNEL, seed,
                                     base_seed=hidden_inputs.seed(root, module_id, 0))
    return reference_package(root, module_id, cache_dir), kernel_files(cache_dir), key, seed


# ---------------------------------------------------------------- the preprocessor


class SandboxedExecute(verdicts.RecordingExecute):
    """nbgrader's Execute for submissions: sandboxed, deadline and output cap, trusted verdicts."""

    course_root = Unicode("", help="the course (default: CourseDirectory.root)").tag(config=True)
    cache_dir = Unicode("", help="answer keys and reference packages (default: ROOT/.grading-cache)"
                        ).tag(config=True)
    job_root = Unicode("", help="where job folders go (default: the system's temporary folder)"
                       ).tag(config=True)
    notebook_timeout = Integer(900, help="seconds for a whole notebook").tag(config=True)
    memory_mb = Integer(3072, help="address space of each process").tag(config=True)
    job_memory_mb = Integer(4096, help="memory of the whole job: all its processes and files"
                            ).tag(config=True)
    file_mb = Integer(64, help="largest file the kernel may write").tag(config=True)
    disk_mb = Integer(512, help="size of the kernel's working folder").tag(config=True)
    tmp_mb = Integer(256, help="size of each private temporary folder").tag(config=True)
    processes = Integer(256, help="processes (threads included) of the whole job").tag(config=True)
    cpu_weight = Integer(cgroups.DEFAULT_CPU_WEIGHT, help="the job's CPU share, in cgroups v2's "
                         "cpu.weight (100: as much as one process of the grader)").tag(config=True)
    use_cgroups = Bool(True, help="limit each job with control groups where the machine allows "
                       "(else the grader's watch)").tag(config=True)
    output_mb = Float(4.0, help="outputs kept per notebook").tag(config=True)

    job = None  # the ./course grade run worker reads what happened here (a dict), else None

    def _root(self):
        root = self.course_root or self.config.get("CourseDirectory", {}).get("root")
        return Path(root or os.getcwd()).resolve()

    def preprocess(self, nb, resources=None, km=None):
        """Run the submission in the sandbox, judge its test cells against the answer key of the
        learner's variant (`verdicts`), say what each failure is (`diagnose`), and mark the failures
        for nbgrader's scores; what happened goes to `resources["tinytorch"]` and the worker's `job`."""
        require_bubblewrap()
        module_id, root = resources["nbgrader"]["assignment"], self._root()
        cache_dir = self.cache_dir or default_cache_dir(root)
        variant = hidden_inputs.variant(root, module_id, resources["nbgrader"]["student"])
        reference, kernel, answer_key, self._hidden_seed = prepare(root, module_id, cache_dir, variant["variant"])
        self.skip_sources = notebooks.skipped_when_graded(  # the course's tags, not the submission's
            notebooks.read(notebooks.notebook_path(root, "modules", module_id)))
        outcome = self.job if self.job is not None else {}
        outcome["variant"] = variant
        try:
            executed, guard_records, notes = self._run_until_done(nb, resources, km, reference, kernel, outcome)
        except (DeadKernelError, CellTimeoutError):
            outcome["stopped"] = self._why_stopped(outcome)
            raise
        judged, reasons, judged_notes = verdicts.review(executed, self.cell_records, answer_key, guard_records)
        try:
            outcome["checks"] = diagnose.explain(root, module_id, cache_dir, self._hidden_seed, executed,
                                                 self.cell_records, answer_key, judged)
        except Exception as error:  # noqa: BLE001  (the scores stand without it)
            notes.append(f"the feedback on failed checks could not be made: {type(error).__name__}: {str(error)[:200]}")
        verdicts.mark_failures(executed, judged)
        reasons = outcome.get("over_limit", []) + reasons
        notes += judged_notes + ([f"output cut at {self._output_cap} bytes"] if self._truncated else [])
        outcome.update(reasons=outcome.get("reasons", []) + reasons, notes=outcome.get("notes", []) + notes)
        resources["tinytorch"] = {"reasons": reasons, "notes": notes, "variant": variant}
        return executed, resources

    def _run_until_done(self, nb, resources, km, reference, kernel, outcome):
        """`(executed notebook, the integrity guard's records, notes)`: `_run` again after each crash with
        the solution cell that crashed reset to its stub, at most `MAX_CRASHES` times within one
        deadline; the learner's code goes back in those cells with an error saying what happened."""
        module_id = resources["nbgrader"]["assignment"]
        stubs = {gid: cell.source for gid, cell in notebooks.cells_by_id(
            notebooks.read(notebooks.notebook_path(self._root(), "release", module_id))).items()
            if notebooks.is_solution(cell)}
        deadline = time.monotonic() + self.notebook_timeout  # for every run of this notebook together
        crashes = []  # (cell that was running, solution cell reset to its stub, the kernel's last words)
        while True:
            attempt = copy.deepcopy(nb)
            for _, reset, _ in crashes:
                attempt.cells[reset].source = stubs[notebooks.grade_id(attempt.cells[reset])]
            try:
                executed, guard_records = self._run(attempt, resources, km, reference, kernel, deadline, outcome)
                return executed, guard_records, [self._explain_crash(nb, executed, *crash) for crash in crashes]
            except DeadKernelError:
                stop = outcome.get("deadline_passed") or outcome.get("over_limit") or len(crashes) >= MAX_CRASHES
                reset = None if stop else cell_to_reset(attempt, self._running, stubs)
                if reset is None:
                    outcome["died_in_cell"], outcome["kernel_log"] = self._running, self._kernel_log
                    outcome["died_in"], outcome["reruns"] = notebooks.describe_cell(nb, self._running), len(crashes)
                    raise
                crashes.append((self._running, reset, self._kernel_log))

    def _why_stopped(self, outcome):
        """Why the notebook could not be run to its end: a reason for the summary."""
        cell = outcome.get("died_in_cell")
        if "unstoppable_cell" in outcome:
            return (f"cell {outcome['unstoppable_cell']} ran past the {self.timeout} s cell limit and ignored "
                    "the interrupt; stopped")
        if outcome.get("deadline_passed"):
            where = f" in cell {cell}" if cell is not None else ""
            return f"ran past the {self.notebook_timeout} s limit for a whole notebook{where}; stopped"
        last = f": {outcome['kernel_log']}" if outcome.get("kernel_log") else ""
        again = (f", again after {outcome['reruns']} run(s) with the exercises before it reset to their stubs"
                 if outcome.get("reruns") else ", before any exercise that could be reset to its stub")
        return (f"the kernel died in {outcome.get('died_in') or cell} (exit, crash or resource limit)"
                f"{last}{again}")

    def _run(self, nb, resources, km, reference, kernel, deadline, outcome):
        """Execute `nb` once, in a fresh sandbox with a job folder of its own; `(executed notebook,
        the integrity guard's records)`. A dead kernel raises DeadKernelError (`_running` is the cell
        that ran, `_kernel_log` its last words)."""
        job_dir = Path(tempfile.mkdtemp(prefix=JOB_PREFIX, dir=self.job_root or None))
        uid = UID_BASE + secrets.randbelow(100_000_000) if os.geteuid() == 0 else None
        spec = {"work": str(job_dir / "work"), "ipc": str(job_dir / "ipc"), "uid": uid,
                "reference": str(reference), "kernel": str(kernel), "hidden_seed": self._hidden_seed,
                "records": str(job_dir / "records"), "log": str(job_dir / "kernel.log"),
                "memory_bytes": self.memory_mb << 20, "file_bytes": self.file_mb << 20,
                "disk_bytes": self.disk_mb << 20, "tmp_bytes": self.tmp_mb << 20,
                "processes": self.processes,
                "cpu_seconds": self.notebook_timeout + 60,
                "output_bytes": int(self.output_mb * (1 << 20))}
        self._running = None
        group = None
        if self.use_cgroups:
            groups = cgroups.own_groups()
            cgroups.sweep(groups, JOB_PREFIX)
            group = cgroups.job_group(job_dir.name, self.job_memory_mb << 20, self.processes,
                                      self.cpu_weight, groups)
        spec["cgroup_procs"] = group.procs_files if group else []
        watch = JobWatch(self._sandbox_pid, spec, group, self.job_memory_mb << 20)
        try:
            self._lay_out(job_dir, spec, resources)
            self.records_path = spec["records"]
            self._spec_path = job_dir / "spec.json"
            self._ipc_prefix = os.path.join(spec["ipc"], "kernel")
            self._output_cap, self._output_bytes, self._truncated = spec["output_bytes"], 0, set()
            nb.cells.append(nbformat.v4.new_code_cell("__import__('kernel_guard').report()"))
            report_cell = len(nb.cells) - 1
            timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._deadline_passed, [outcome])
            timer.start()
            watch.start()
            try:
                nb, _ = super().preprocess(nb, resources, km)
            except DeadKernelError:
                self._kernel_log = _last_line(job_dir / "kernel.log")
                raise
            except CellTimeoutError:
                outcome["unstoppable_cell"] = self._running
                raise
            finally:
                timer.cancel()
                watch.done.set()
                watch.join()
            guard_records = [r for records in self.cell_records.values() for r in records
                             if r.get("kind") == "guard"]  # after each cell, and the closing one
            self.cell_records.pop(report_cell, None)
            nb.cells.pop()
            return nb, guard_records
        finally:
            watch.done.set()
            over = watch.reasons + (group.exceeded() if group else [])
            if over:  # the worker fails the job with these reasons; nbgrader's route flags it
                outcome["over_limit"] = sorted(set(over), key=over.index)
            if group:
                group.remove()
            if uid is not None:
                kill_user(uid)
            shutil.rmtree(job_dir, ignore_errors=True)

    @staticmethod
    def _explain_crash(submitted, executed, running, reset, kernel_log):
        """Put the learner's own code back in the cell that was graded as its stub, with an error
        output that says why (the feedback shows it); returns the note for the summary."""
        where = notebooks.describe_cell(submitted, running)
        said = f" (the kernel's last words: {kernel_log})" if kernel_log else ""
        executed.cells[reset].source = submitted.cells[reset].source
        executed.cells[reset].outputs = [nbformat.v4.new_output(
            "error", ename="KernelDied", evalue=f"the kernel died while {where} ran{said}",
            traceback=[f"KernelDied: the kernel died while {where} ran{said}.",
                       "The grader ran the notebook again in a fresh kernel with this cell as handed out "
                       "(its stub, raise NotImplementedError()): the tests that use it score 0, the others "
                       "keep their points.",
                       f"Look in this cell, {notebooks.CRASH_CAUSES}; ./learn check shows where the "
                       "kernel dies."])]
        again = "that cell" if reset == running else notebooks.describe_cell(submitted, reset)
        return f"the kernel died while {where} ran{said}; graded again with {again} as its stub"

    def _lay_out(self, job_dir, spec, resources):
        """The job folder: the kernel's `work/` (the other files next to the notebook, regular
        files only, never a notebook) and `ipc/`, and the spec the launcher reads."""
        job_dir.chmod(0o711)
        for name in ["work", "ipc"]:
            (job_dir / name).mkdir(mode=0o700)
        beside = Path(resources.get("metadata", {}).get("path") or ".")
        for path in beside.rglob("*"):
            if path.is_file() and not path.is_symlink() and path.suffix != ".ipynb":
                target = job_dir / "work" / path.relative_to(beside)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
        spec_path = job_dir / "spec.json"
        spec_path.write_text(json.dumps(spec))
        spec_path.chmod(0o600)

    def kernel_env(self):
        """The launcher's environment: PATH, the job spec, and nbgrader's `NBGRADER_EXECUTION`
        (which the sandbox passes on: notebooks may run shorter demos while graded)."""
        return {"PATH": os.environ.get("PATH", ""), "TINYTORCH_SANDBOX": str(self._spec_path),
                **execution_mode()}

    def create_kernel_manager(self):
        """The sandbox kernel, whatever `Execute.kernel_name` says; its unix sockets are in `ipc/`."""
        self.kernel_name = SANDBOX_KERNEL
        km = super().create_kernel_manager()
        if km.kernel_name != SANDBOX_KERNEL:
            raise RuntimeError(f"refusing to grade in the kernel {km.kernel_name!r}")
        km.ip = self._ipc_prefix
        return km

    def _deadline_passed(self, outcome):
        outcome["deadline_passed"] = True
        pid = self._sandbox_pid()
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)  # bubblewrap: the whole sandbox goes with it
            except ProcessLookupError:
                pass

    def _sandbox_pid(self):
        """The launcher's process id (bubblewrap, once it started), or None before."""
        return getattr(getattr(self.km, "provisioner", None), "pid", None)

    def on_cell_execute(self, **kwargs):
        self._running = kwargs.get("cell_index")

    def output(self, outs, msg, display_id, cell_index):
        """Keep outputs up to the cap, then one line that says they were cut."""
        content = msg.get("content", {})
        size = len(content.get("text", "")) + sum(
            len(v) if isinstance(v, str) else len(json.dumps(v)) for v in content.get("data", {}).values()
        ) + sum(len(line) for line in content.get("traceback", []))
        self._output_bytes += size
        if self._output_bytes <= self._output_cap:
            return super().output(outs, msg, display_id, cell_index)
        if cell_index not in self._truncated:
            self._truncated.add(cell_index)
            outs.append(nbformat.v4.new_output(
                "stream", name="stdout", text=f"[output cut by the grader: over {self._output_cap} bytes]\n"))
        return None


def cell_to_reset(notebook, running, stubs):
    """The index of the solution cell to reset to its stub when the kernel died in cell `running`:
    the last solution cell at or before it that is not its stub already (None if there is none)."""
    for index in range(-1 if running is None else min(running, len(notebook.cells) - 1), -1, -1):
        cell = notebook.cells[index]
        gid = notebooks.grade_id(cell)
        if notebooks.is_solution(cell) and gid in stubs and cell.source != stubs[gid]:
            return index
    return None


def _last_line(path):
    """What a dead kernel last said: Python's fatal error line if any, else its last line."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 8192))
            lines = [line for line in f.read().decode(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    fatal = [line for line in lines if line.startswith("Fatal Python error")]
    return (fatal or lines or [""])[-1].strip()[:200]


def kill_user(uid):
    """SIGKILL every process of `uid` (the job's own user), until none is left."""
    for _ in range(20):
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/status", "rb") as f:
                    line = next(line for line in f if line.startswith(b"Uid:"))
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


def descendants(pid):
    """`pid` and every process below it, parents before children (orphans of the sandbox stay
    below it: its first process is the init of its PID namespace)."""
    found, index = [pid], 0
    while index < len(found):
        try:
            tasks = os.listdir(f"/proc/{found[index]}/task")
        except OSError:
            tasks = []
        for task in tasks:
            try:
                with open(f"/proc/{found[index]}/task/{task}/children") as f:
                    found += [int(child) for child in f.read().split()]
            except OSError:
                pass
        index += 1
    return found


SCRATCH = {"/grader/work": "disk_bytes", "/tmp": "tmp_bytes", "/var/tmp": "tmp_bytes", "/dev/shm": "tmp_bytes"}


class JobWatch(threading.Thread):
    """Watches a running job every `period` seconds and stops it at the first limit it reaches:
    a full scratch filesystem (its working folder, /tmp, /var/tmp, /dev/shm), the limits its
    control group counted, or, where there is no control group, the memory (proportional set
    size, summed) and the number of its processes. `reasons` says which."""

    period = 0.2

    def __init__(self, sandbox_pid, spec, group, memory_bytes):
        super().__init__(daemon=True)
        self.sandbox_pid, self.spec, self.group = sandbox_pid, spec, group
        self.memory_bytes, self.reasons, self.done = memory_bytes, [], threading.Event()

    def run(self):
        sandbox = None  # a pidfd of the launcher: the watch looks and kills only while it lives
        try:
            while not self.done.wait(self.period):
                pid = self.sandbox_pid()
                if pid and sandbox is None:
                    sandbox = os.pidfd_open(pid)
                if sandbox is None:
                    continue
                if select.select([sandbox], [], [], 0)[0]:
                    return  # it ended
                self.reasons = self.check(descendants(pid))
                if self.reasons:
                    signal.pidfd_send_signal(sandbox, signal.SIGKILL)  # bubblewrap: all goes with it
                    return
        except ProcessLookupError:
            return
        finally:
            if sandbox is not None:
                os.close(sandbox)

    def check(self, processes):
        reasons = self.group.exceeded() if self.group else self._without_group(processes)
        inside = processes[1] if len(processes) > 1 else None  # in the sandbox's mount namespace
        for folder, size in SCRATCH.items():
            try:
                usage = os.statvfs(f"/proc/{inside}/root{folder}") if inside else None
            except OSError:
                continue
            if usage and (usage.f_bavail * usage.f_frsize < 1 << 20 or usage.f_favail == 0):
                reasons.append(cgroups.REASONS["disk"].format(folder=folder, mb=self.spec[size] >> 20))
        return reasons

    def _without_group(self, processes):
        limits = {"mb": self.memory_bytes >> 20, "processes": self.spec["processes"]}
        reasons = [cgroups.REASONS["pids"].format(**limits)] if len(processes) > limits["processes"] else []
        resident = 0  # proportional (Pss): a page that n processes share counts 1/n in each
        for pid in processes:
            try:
                with open(f"/proc/{pid}/smaps_rollup") as f:
                    resident += next(int(line.split()[1]) << 10 for line in f if line.startswith("Pss:"))
            except (OSError, StopIteration, ValueError):
                pass
        if resident > self.memory_bytes:
            reasons.append(cgroups.REASONS["memory"].format(**limits))
        return reasons


class FlagForReview(NbGraderPreprocessor):
    """After nbgrader saved the scores: flag the notebook in the gradebook when the sandbox found
    something for a person to look at, with the reasons as a comment on its first graded cell."""

    def preprocess(self, nb, resources):
        found = resources.get("tinytorch", {})
        if not found.get("reasons"):
            return nb, resources
        from nbgrader.api import Gradebook

        info = resources["nbgrader"]
        with Gradebook(resources["nbgrader"]["db_url"]) as gradebook:
            submitted = gradebook.find_submission_notebook(info["notebook"], info["assignment"],
                                                           info["student"])
            submitted.flagged = True
            if submitted.comments:
                submitted.comments[0].auto_comment = "Flagged for review: " + "; ".join(found["reasons"])
            gradebook.db.commit()
        return nb, resources
