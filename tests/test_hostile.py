"""Hostile and broken submissions, graded together in one class beside honest learners.

Each learner below hands in one kind of trouble, through the instructor's real route: a roster,
`collect --folder` and an LMS zip (`zip_collect`), then `grade run` (parallel, sandboxed), the
summary and the feedback. The classes of attack:

1. a score forged inside the kernel (IPython's hooks, the checks, the records, numpy, builtins,
   values whose `==` lies, importing the answer), points without work (records forged ahead of or
   instead of the checks from the notebook's own values and guesses), and the guard's claims;
2. escape and damage (setuid files, processes that outlive the job, files in /tmp, other jobs'
   folders, the course's files, the network; the whole job's memory, processes, disk and CPU share);
3. a notebook that would crash the run (broken metadata or JSON);
4. identity and collection (links, names, folders, upload areas, duplicates, timestamps, backdated
   archives);
5. leaks into feedback (hidden tests via history, disk or memory; secrets in the environment;
   live script in outputs or markdown).

None may gain a point silently (no points, or a flag for review, or a failure with its reason),
change another learner's grade or a course file, crash the run, leak hidden-test source, secrets or
live script into feedback, or leave a process or file behind.
"""
import dataclasses
import hashlib
import html
import json
import os
from pathlib import Path
import re
import shutil
import socket
import sqlite3
import stat
import subprocess
import threading
import time
import zipfile

import nbformat
import pytest

from tinytorch.testing import to_plain
from tinytorch_course import notebooks
from tinytorch_course.grading import cgroups, grading, verdicts
from tinytorch_course.grading.release_run import NOT_RUN
from tinytorch_course.grading.autograder import Limits
from tinytorch_course.build.leaks import split_regions
from tinytorch_course.nbgrader_api import GRADER_KERNEL, install_grader_kernel

from conftest import REPO

MODULE = notebooks.module_ids(REPO)[0]
pytestmark = pytest.mark.xdist_group("hostile")  # one worker grades the class, once (--dist loadgroup)
LIMITS = Limits(cell_timeout=20, notebook_timeout=150, memory_mb=1536, job_memory_mb=2048, disk_mb=96,
                output_mb=2, processes=64)
SECRET = "tinytorch-test-secret-" + hashlib.sha256(b"grader").hexdigest()[:12]
STUB = "raise NotImplementedError()"
BACKDATED_UPLOAD = (2026, 11, 30, 23, 59, 58)  # when the LMS took late's zip (its entries say 2011)


# ---------------------------------------------------------------- building the hand-ins


def _solution_cells(notebook):
    return [c for c in notebook.cells if notebooks.is_solution(c)]


def first(notebook, code):
    """`code` runs before everything the learner wrote (at the top of the first solution cell)."""
    cell = _solution_cells(notebook)[0]
    cell.source = code + "\n" + cell.source
    return notebook


def after(notebook, code, which=0):
    cell = _solution_cells(notebook)[which]
    cell.source = cell.source + "\n" + code
    return notebook


def stubs(notebook, body):
    """Every `raise NotImplementedError()` of a release replaced by `body`."""
    for cell in _solution_cells(notebook):
        cell.source = cell.source.replace(STUB, body)
    return notebook


HOOK_ATTACKS = {
    "custom-exc": """
_ip = get_ipython()
_ip.set_custom_exc((BaseException,), lambda *a, **k: None)
def _forget(result): result.error_in_exec = None
_ip.events.register('post_run_cell', _forget)""",
    "input-transformer": """
get_ipython().input_transformers_cleanup.append(lambda lines: ['pass\\n'])""",
    "ast-transformer": """
import ast
class _Empty(ast.NodeTransformer):
    def visit_Module(self, node):
        return ast.Module(body=[ast.Pass()], type_ignores=[])
get_ipython().ast_transformers.append(_Empty())""",
    "run-cell": """
_ip = get_ipython()
_real = _ip.run_cell_async
async def _quiet(raw_cell, *args, **kwargs):
    result = await _real('pass', *args, **kwargs)
    return result
_ip.run_cell_async = _quiet
_ip.run_cell = lambda raw_cell, *a, **k: _ip.__class__.run_cell(_ip, 'pass', *a, **k)""",
    "guard-forge": """
import kernel_guard
kernel_guard.report = lambda *a, **k: None
print('{"kind": "guard", "findings": []}')""",
    "builtins": """
import builtins
builtins.isinstance = lambda *a: True
builtins.len = lambda x: 0
__builtins__.AssertionError = type('Quiet', (Exception,), {})""",
}

FORGE_ATTACKS = {  # release stubs replaced by code that returns something, plus a forgery
    "numpy-isclose": ("pass", """
import numpy
import numpy._core.numeric as _numeric
_numeric.isclose = lambda *a, **k: numpy.True_
numpy.allclose = lambda *a, **k: True
numpy.array_equal = lambda *a, **k: True"""),
    "lying-eq": ("return _Anything()", """
class _Anything:
    __eq__ = lambda self, other: True
    __ne__ = lambda self, other: False
    __bool__ = lambda self: True
    __hash__ = object.__hash__
    def __getattr__(self, name): return self
    def __call__(self, *args, **kwargs): return self
    def __iter__(self): return iter(())
    def __len__(self): return 0"""),
    "generic-forge": ("pass", """
import tinytorch.testing as _t
_t._plain_pair = lambda got, want: (_t.to_plain(want), _t.to_plain(want))
globals()['record'] = _t.record = lambda *a, **k: None
globals()['record_error'] = _t.record_error = lambda *a, **k: None
for _name in ['assert_raises', 'assert_true']:
    globals()[_name] = lambda *a, **k: None"""),
    "records-forge": ("pass", """
import json, os
_fd = int(os.environ['TINYTORCH_RECORDS'][3:])
def _forge(result):
    for line in range(1, 40):
        for kind in ['equal', 'close', 'raises', 'true', 'record', 'record_error']:
            os.write(_fd, json.dumps({'kind': kind, 'what': 'x', 'loc': ['forged.py', line], 'got': True,
                                      'want': True, 'passed': True}).encode() + b'\\n')
get_ipython().events.register('post_run_cell', _forge)"""),
}

# The issue-38 attack on an untouched release: before each test cell runs, write a passing record
# for every check in its source (visible expected values, True for yes/no records, values the test
# computes itself where they evaluate), at the place the real check will have, and hide the cell's
# errors. "prepend" leaves the real checks running after the forged ones; "replace" silences them,
# so that only the forged records are there, one per check in the source.
NO_WORK_FORGERY = """
import ast, os
import tinytorch.testing as _t
_ip = get_ipython()
_fd = int(os.environ['TINYTORCH_RECORDS'][3:])
_KINDS = {'assert_equal': 'equal', 'assert_close': 'close', 'assert_raises': 'raises',
          'assert_true': 'true', 'record': 'record', 'record_error': 'record_error'}
_ERROR = {'error': ['RuntimeError', 'TypeError', 'ValueError', 'IndexError', 'AssertionError',
                    'KeyError', 'Exception', 'BaseException', 'object'], 'message': ''}
_write = _t._write

def _value(node, fallback):
    try:
        return _t.to_plain(eval(compile(ast.Expression(node), '<forged>', 'eval'), _ip.user_ns))
    except Exception:
        return fallback

def _forge(info):
    source = info.raw_cell
    place = os.path.basename(_ip.compile.get_code_name(source, source, 0))
    try:
        calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Name) and n.func.id in _KINDS]
    except SyntaxError:
        return
    for call in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
        kind = _KINDS[call.func.id]
        entry = {'kind': kind, 'what': 'forged', 'loc': [place, call.lineno], 'passed': True,
                 'rtol': 1e-5, 'atol': 1e-8}
        if kind in ('equal', 'close') and len(call.args) > 1:
            entry['got'] = entry['want'] = _value(call.args[1], None)
        elif kind == 'raises':
            entry.update(got=_ERROR, expected=getattr(call.args[0], 'id', 'Exception'), match=None)
        elif kind == 'record_error':
            entry.update(got=_ERROR, match=None)
        elif kind == 'record' and call.args:
            entry['got'] = _value(call.args[0], True)
        else:
            entry['got'] = True
        os.write(_fd, _t.json.dumps(entry).encode() + b'\\n')

_ip.events.register('pre_run_cell', _forge)
_ip.set_custom_exc((BaseException,), lambda *a, **k: None)
def _forget(result): result.error_in_exec = None
_ip.events.register('post_run_cell', _forget)
"""
NO_WORK_ATTACKS = {"no-work-prepend": NO_WORK_FORGERY,
                   "no-work-replace": NO_WORK_FORGERY + "\n_t._write = lambda *a, **k: None"}

# Patches the kernel guard must flag (issue 38, item 7), each before a correct solution: the score
# stays, the notebook is flagged with the reason.
GUARD_CASES = {
    "rebound-builtins": ("import builtins as _b\n__builtins__ = dict(vars(_b))", "rebound __builtins__"),
    "numpy-internal": ("import numpy._core.numeric as _n\n_kept = _n.isclose\n"
                       "_n.isclose = lambda *a, **k: _kept(*a, **k)", "numpy._core.numeric.isclose"),
    "guard-module": ("import os, sys, types\n_fake = types.ModuleType('kernel_guard')\n"
                     "_fake.report = lambda: os.write(int(os.environ['TINYTORCH_RECORDS'][3:]), "
                     "b'{\"kind\": \"guard\", \"findings\": [], \"closing\": true}\\n')\n"
                     "sys.modules['kernel_guard'] = _fake", "replaced the module kernel_guard"),
}

ESCAPES = {  # code that runs before a correct solution: it must change nothing outside its job
    "setuid": """
import os, subprocess
os.chmod('rootid', 0o4755)
print('UID', subprocess.run(['./rootid', '-u'], capture_output=True, text=True).stdout.strip())""",
    "survivor": """
import os, subprocess, sys, time
subprocess.Popen(['sleep', '4242'], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            time.sleep(0.2)
    os._exit(0)""",
    "odd-name": """
import ctypes, os, time
if os.fork() == 0:
    ctypes.CDLL(None).prctl(15, b'\\xff\\xfe\\xfdzz', 0, 0, 0)
    time.sleep(4242)
    os._exit(0)""",
    "tmp-litter": """
for _folder in ['/tmp', '/var/tmp', '/dev/shm']:
    try:
        open(_folder + '/tinytorch-litter', 'w').write('left behind')
        print('WROTE', _folder)
    except OSError as error:
        print('blocked:', type(error).__name__)""",
    "network": """
import socket
try:
    socket.create_connection(('127.0.0.1', PORT), timeout=2).sendall(b'leak')
    print('CONNECTED')
except OSError as error:
    print('NET blocked:', type(error).__name__)""",
    "env-secret": """
import os
print(sorted(os.environ.items()))""",
}

OVER_LIMITS = {  # code that runs before a correct solution: (it, the reason the job fails with)
    "fork-bomb": ("""
import os
children = 0
try:
    while children < 10_000:
        if os.fork() == 0:
            os._exit(0)  # a zombie until reaped: it still counts against the process limit
        children += 1
except OSError as error:
    print('FORK stopped after', children, type(error).__name__)
while True:
    try:
        os.waitpid(-1, 0)
    except ChildProcessError:
        break""", f"too many processes: the job tried to run more than {LIMITS.processes} at once"),
    "disk-filler": ("""
import time
written = 0
try:
    while True:  # files below the per-file limit, as many as it takes
        with open(f'filler-{written}', 'wb') as f:
            for _ in range(2):
                f.write(bytes(16 << 20))
        written += 1
except OSError as error:
    print('DISK stopped after', written, 'files:', error)
time.sleep(60)  # holds the disk full (the cell limit would end this, not the job)""",
                    f"disk full: the job filled /grader/work ({LIMITS.disk_mb} MB)"),
    "memory-hog": ("""
import os, time
for _ in range(4):  # four processes, each well below the per-process limit
    if os.fork() == 0:
        hog = bytearray(600 << 20)
        time.sleep(60)
        os._exit(0)
for _ in range(4):
    os.wait()""", f"out of memory for the job: its processes together reached the limit of {LIMITS.job_memory_mb} MB"),
}

BUSY = """
import subprocess, sys, time
busy = [subprocess.Popen([sys.executable, '-c', 'while True: pass'], start_new_session=True)
        for _ in range(32)]  # busy processes, each in a session of its own, within the process limit
time.sleep(12)  # while jobs beside it are graded
for process in busy:  # (left running, they would slow this job's own kernel past its deadline)
    process.kill()"""

HISTORY_LEAKS = {  # registered first: after every cell, print what the history or the disk holds
    "history-leak": """
def _dump(result):
    ip = get_ipython()
    print('\\n'.join(ip.user_ns.get('In', [])), '\\n'.join(map(str, ip.user_ns.get('_ih', []))))
    print('\\n'.join(src for _, _, src in ip.history_manager.get_range(output=False)))
get_ipython().events.register('post_run_cell', _dump)""",
    "disk-leak": """
def _dump(result):
    import glob, os
    for top in [os.getcwd(), '/grader', '/tmp', os.path.expanduser('~')]:
        for path in glob.glob(top + '/**/*.ipynb', recursive=True) + glob.glob(top + '/**/*.db', recursive=True):
            print(open(path, errors='replace').read()[:200000])
get_ipython().events.register('post_run_cell', _dump)""",
}
MEMORY_LEAKS = {  # what runs in the submission's process can be seen by it: feedback must not show it
    "memory-leak": """
def _dump(result):
    import gc, linecache
    print('\\n'.join(''.join(v[2]) for cache in [linecache.cache, getattr(linecache, '_ipython_cache', {})]
                     for v in cache.values() if len(v) == 4))
    print('\\n'.join(o for o in gc.get_objects() if isinstance(o, str) and 'record' in o)[:200000])
get_ipython().events.register('post_run_cell', _dump)""",
    "raw-cell-leak": """
get_ipython().events.register('pre_run_cell', lambda info: print(info.raw_cell))""",
}
LEAK_ATTACKS = {**HISTORY_LEAKS, **MEMORY_LEAKS}

LIVE_SCRIPT = """
from IPython.display import HTML, Javascript, SVG, display
display(HTML("<script>window.PWNED = 1</script><img src=x onerror='window.PWNED = 2'>"))
display(Javascript("window.PWNED = 3"))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg"><script>window.PWNED = 4</script></svg>'))"""


def vandal_code(root):
    targets = [root / "gradebook.db", notebooks.notebook_path(root, "submitted/full", MODULE),
               notebooks.notebook_path(root, "release", MODULE), "../../../gradebook.db"]
    return "\n".join([
        "import os, shutil",
        f"for target in {[str(t) for t in targets]!r}:",
        "    for attack in (lambda: open(target, 'a').write('corrupted'), lambda: os.remove(target),",
        "                   lambda: shutil.rmtree(os.path.dirname(target))):",
        "        try:",
        "            attack()",
        "            print('CHANGED', target)",
        "        except Exception as error:",
        "            print('blocked:', type(error).__name__)",
    ])


SNOOP_CODE = """
import glob, os
for top in ['/grader', '/tmp', '/var/tmp', '/dev/shm', '/root', '/home', '/work', os.path.dirname(os.getcwd())]:
    for name in ['submitted', 'autograded', 'solutions', 'gradebook*', '*.ipynb', '*.db']:
        for path in glob.glob(f'{top}/**/{name}', recursive=True):
            print('READ', path)"""


def make_class(root, port):
    """`{student: {file name: notebook or bytes}}`: what each learner hands in by folder."""
    solution = lambda: notebooks.read(notebooks.notebook_path(root, "solutions", MODULE))  # noqa: E731
    release = lambda: notebooks.read(notebooks.notebook_path(root, "release", MODULE))  # noqa: E731
    name = f"{MODULE}.ipynb"
    learners = {
        "full": {name: solution()},
        "blank": {name: release()},
        "honest-rng": {name: _draw_first(solution())},
    }
    for student, code in HOOK_ATTACKS.items():
        learners[student] = {name: first(release(), code)}
    for student, (body, code) in FORGE_ATTACKS.items():
        learners[student] = {name: first(stubs(release(), body), code)}
    learners["star-import"] = {name: first(release(), "from tinytorch.tensor_base import *")}
    for student, code in NO_WORK_ATTACKS.items():
        learners[student] = {name: first(release(), code)}
    for student, (code, _) in GUARD_CASES.items():
        learners[student] = {name: first(solution(), code)}
    for student, code in ESCAPES.items():
        learners[student] = {name: first(solution(), code.replace("PORT", str(port)))}
    for student, (code, _) in OVER_LIMITS.items():
        learners[student] = {name: first(solution(), code)}
    learners["busy"] = {name: first(release(), BUSY)}
    learners["cpu-neighbour"] = {name: solution()}
    learners["setuid"]["rootid"] = Path(shutil.which("id")).read_bytes()
    learners["vandal"] = {name: first(solution(), vandal_code(root))}
    learners["snoop"] = {name: first(solution(), SNOOP_CODE)}
    for student, code in LEAK_ATTACKS.items():
        learners[student] = {name: first(solution(), code)}
    live = first(solution(), LIVE_SCRIPT)
    live.cells.insert(1, nbformat.v4.new_markdown_cell("<script>window.PWNED = 5</script>"
                                                       "<a href='javascript:alert(6)' onclick='PWNED=7'>x</a>"))
    learners["live-script"] = {name: live}
    learners.update(_kernel_trouble(solution, release, name))
    learners.update(_broken_notebooks(solution, name))
    learners["timestamp-forge"] = {name: solution(), "timestamp.txt": b"2000-01-01 00:00:00.000000 UTC"}
    learners["submitter"] = {f"submitter_{name}": solution()}
    return learners


def _draw_first(notebook):
    """An honest solution that draws from numpy's global generator before each exercise."""
    for cell in _solution_cells(notebook):
        cell.source = "import numpy as _np\n_np.random.seed(99)\n_np.random.rand(17)\n" + cell.source
    return notebook


def _kernel_trouble(solution, release, name):
    edited = release()
    for cell in edited.cells:
        if notebooks.is_test(cell):
            cell.source = 'print("all tests pass")'
    deleted = solution()
    deleted_id = notebooks.grade_id([c for c in deleted.cells if notebooks.is_test(c)][-1])
    deleted.cells = [c for c in deleted.cells if notebooks.grade_id(c) != deleted_id]
    kernelspec = solution()
    kernelspec.metadata["kernelspec"] = {"name": "bash", "display_name": "Bash", "language": "bash"}
    patched = after(solution(), "import numpy\n_kept = numpy.allclose\nnumpy.allclose = lambda *a, **k: True")
    patched = after(patched, "numpy.allclose = _kept", which=-1)  # ...and put it back
    return {
        "loop": {name: first(solution(), "while True:\n    pass")},
        "stubborn-loop": {name: first(solution(), (
            "import time\nwhile True:\n    try:\n        time.sleep(0.05)\n"
            "    except BaseException:\n        pass"))},
        "sys-exit": {name: first(solution(), "import sys\nsys.exit()")},
        "os-exit": {name: first(solution(), "import os\nos._exit(1)")},
        "crash": {name: first(solution(), "import ctypes\nctypes.string_at(0)")},
        "crash-early": {name: _before_every_exercise(solution(), "import os\nos._exit(1)")},
        "memory-bomb": {name: first(solution(), (
            "def bomb():\n    hog = []\n    while True:\n        hog.append(bytearray(64 << 20))\nbomb()"))},
        "flood": {name: first(solution(), "for _ in range(300):\n    print('x' * 1_000_000)")},
        "allclose": {name: patched},
        "testing-patch": {name: after(solution(), (
            "import tinytorch.testing as _t\n_t.equal = lambda *a: (True, '')\n_t.close = lambda *a: (True, '')"))},
        "edit-locked": {name: edited},
        "delete-locked": {name: deleted},
        "kernelspec": {name: kernelspec},
        "own-package": {name: after(solution(), "import tinytorch\nprint('FROM', tinytorch.__file__)"),
                        "tinytorch/__init__.py": b"SHADOWED = True\n",
                        "tinytorch/tensor_base.py": b"SHADOWED = True\n"},
    }


def _before_every_exercise(notebook, code):
    """`code` at the top of the first code cell that is not nbgrader's (the module's imports)."""
    cell = next(c for c in notebook.cells if c.cell_type == "code" and "nbgrader" not in c.metadata
                and "default_exp" not in c.source)
    cell.source = code + "\n" + cell.source
    return notebook


def _broken_notebooks(solution, name):
    def with_metadata(change):
        notebook = solution()
        change([c for c in notebook.cells if notebooks.is_test(c)][0].metadata)
        return json.dumps(notebook).encode()

    return {
        "meta-str": {name: with_metadata(lambda m: m.__setitem__("nbgrader", "oops"))},
        "meta-list": {name: with_metadata(lambda m: m["nbgrader"].__setitem__("grade_id", ["a", "b"]))},
        "meta-dup": {name: with_metadata(lambda m: m["nbgrader"].__setitem__("grade_id", "contiguous_strides"))},
        "meta-flag": {name: with_metadata(lambda m: m["nbgrader"].__setitem__("solution", "yes"))},
        "not-nbformat": {name: b'{"cells": 5, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'},
        "corrupt": {name: b'{"cells": [{"cell_type": "code", "sour'},
        "wrong-name": {"Untitled.ipynb": solution()},
        "no-notebook": {"README.txt": b"I could not finish.\n"},
    }


def _write(folder, files):
    for file_name, content in files.items():
        path = folder / file_name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            nbformat.write(content, str(path))


def lms_archive(root, path):
    """An LMS download in which each learner's uploads sit in a folder of their own: alice hands
    in a solution, mallory a blank notebook named for alice (and her own zip with a setuid
    file), dup the same notebook twice; late uploads a zip whose entries say 2011 (the LMS took
    it on BACKDATED_UPLOAD's day); the upload area of stranger, who is not on the roster, holds
    a newer blank notebook named for alice."""
    solution = nbformat.writes(notebooks.read(notebooks.notebook_path(root, "solutions", MODULE)))
    release = nbformat.writes(notebooks.read(notebooks.notebook_path(root, "release", MODULE)))
    inner = path.with_name("mallory-upload.zip")
    with zipfile.ZipFile(inner, "w") as z:
        setuid = zipfile.ZipInfo("rootid")
        setuid.external_attr = 0o104755 << 16
        z.writestr(setuid, Path(shutil.which("id")).read_bytes())
        z.writestr(f"alice_{MODULE}.ipynb", release)
    backdated = path.with_name("late-upload.zip")
    with zipfile.ZipFile(backdated, "w") as z:
        z.writestr(zipfile.ZipInfo(f"late_{MODULE}.ipynb", (2011, 1, 1, 0, 0, 0)), solution)
        z.writestr(zipfile.ZipInfo("timestamp.txt", (2011, 1, 1, 0, 0, 0)), "2011-01-01 00:00:00.000000 UTC")
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"alice/alice_{MODULE}.ipynb", solution)
        z.writestr(f"mallory/alice_{MODULE}.ipynb", release)
        z.write(inner, f"mallory/mallory_{MODULE}.zip")
        z.writestr(zipfile.ZipInfo(f"dup/dup_{MODULE}.ipynb", (2026, 1, 1, 0, 0, 0)), release)
        z.writestr(zipfile.ZipInfo(f"dup/again/dup_{MODULE}.ipynb", (2026, 1, 2, 0, 0, 0)), solution)
        z.writestr(zipfile.ZipInfo(f"late/late_{MODULE}.zip", BACKDATED_UPLOAD), backdated.read_bytes())
        z.writestr(zipfile.ZipInfo(f"stranger/alice_{MODULE}.ipynb", (2099, 1, 1, 0, 0, 0)), release)
    return path


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _processes():
    return subprocess.run(["ps", "-eo", "uid,args"], capture_output=True, text=True).stdout


def job_cgroups():
    """The grading jobs' control groups on this machine now (their folders' paths)."""
    return {str(path) for _, parent in cgroups.own_groups().values() for path in parent.glob("tinytorch-job-*")}


class Listener:
    """A TCP server on 127.0.0.1 that notes whether anyone connected."""

    def __init__(self):
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen()
        self.server.settimeout(0.5)
        self.port, self.connected, self.stop = self.server.getsockname()[1], False, False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stop:
            try:
                self.server.accept()
                self.connected = True
            except OSError:
                pass


def import_roster(root, hand_ins, students):
    roster = hand_ins / "roster.csv"
    roster.write_text("id,first_name,last_name,email\n" + "".join(f"{s},{s},Learner,\n" for s in students))
    grading.import_roster(root, roster)


class CgroupSampler(threading.Thread):
    """Notes every grading job's control group that exists while the class is graded."""

    def __init__(self):
        super().__init__(daemon=True)
        self.seen, self.stop = set(), False
        self.start()

    def run(self):
        while not self.stop:
            self.seen |= job_cgroups()
            time.sleep(0.2)


@pytest.fixture(scope="session")  # graded once per session, as test_grading's sample class
def graded(built_course, tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile") / "course"
    shutil.copytree(built_course, root)
    hand_ins = tmp_path_factory.mktemp("hand-ins")
    listener = Listener()
    learners = make_class(root, listener.port)
    for student, files in learners.items():
        _write(hand_ins / student, files)
    os.chmod(hand_ins / "setuid" / "rootid", 0o4755)
    (hand_ins / "thief").symlink_to(hand_ins / "full")  # a "learner" that is a link to another's work
    (hand_ins / "evil\nREVIEW full: forged").mkdir()
    import_roster(root, hand_ins, [*learners, "missing", "thief", "alice", "mallory", "dup", "late"])
    collected, problems = grading.collect_folder(root, MODULE, hand_ins)
    zip_problems = grading.zip_collect(root, MODULE, [lms_archive(root, hand_ins / "lms.zip")])
    guarded = [root / "gradebook.db.before", notebooks.notebook_path(root, "submitted/full", MODULE),
               notebooks.notebook_path(root, "release", MODULE)]
    shutil.copy(root / "gradebook.db", guarded[0])
    digests = {p: digest(p) for p in guarded[1:]}
    os.environ["TINYTORCH_TEST_SECRET"] = SECRET
    groups = CgroupSampler()
    try:
        outcome = grading.autograde(root, MODULE, jobs=2, limits=LIMITS)[MODULE]
    finally:
        del os.environ["TINYTORCH_TEST_SECRET"]
        listener.stop = groups.stop = True
    return {"root": root, "outcome": outcome, "digests": digests, "problems": problems,
            "zip_problems": zip_problems, "collected": collected, "listener": listener,
            "processes": _processes(), "cgroups": groups.seen, "graded_at": time.monotonic(),
            "summary": grading.summary(root)}


def entry(graded, student):
    return graded["outcome"][student]


def maximum(graded):
    return entry(graded, "full")["max_score"]


def executed_text(graded, student):
    executed = notebooks.read(notebooks.notebook_path(graded["root"], f"autograded/{student}", MODULE))
    return "\n".join(str(o) for c in executed.cells for o in c.get("outputs", []))


def printed(graded, student):
    """What a learner's cells printed (stream outputs) when graded."""
    executed = notebooks.read(notebooks.notebook_path(graded["root"], f"autograded/{student}", MODULE))
    return "".join(o.get("text", "") for c in executed.cells for o in c.get("outputs", []))


def feedback(graded, student):
    return (graded["root"] / "feedback" / student / MODULE / f"{MODULE}.html").read_text()


def hidden_lines(root):
    """Lines of the hidden tests (13 characters or more) that no other line of the notebook contains."""
    source = notebooks.read(notebooks.notebook_path(root, "modules", MODULE))
    hidden, elsewhere = set(), set()
    for cell in source.cells:
        inside, outside = split_regions(cell.source, *notebooks.HIDDEN_MARKERS)
        hidden |= {line for line in inside if len(line) >= 13}
        elsewhere |= set(outside)
    return {line for line in hidden if not any(line in other for other in elsewhere)}


# ---------------------------------------------------------------- honest learners


@pytest.mark.parametrize("student", ["full", "honest-rng", "alice", "submitter", "timestamp-forge", "cpu-neighbour"])
def test_honest_learners_get_full_marks_unflagged(graded, student):
    got = entry(graded, student)
    assert got["status"] == "graded" and got["score"] == maximum(graded) > 0, got


def test_untouched_release_scores_zero(graded):
    got = entry(graded, "blank")
    assert got["status"] == "graded" and got["score"] == 0, got


def test_gradebook_release_and_other_submissions_stay_intact(graded):
    root = graded["root"]
    for path, before in graded["digests"].items():
        assert digest(path) == before, path
    with sqlite3.connect(root / "gradebook.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert grading.scores(root)["full"][MODULE] == (maximum(graded), maximum(graded))


# ---------------------------------------------------------------- 1. forged scores


def silent_gain(got):
    return got["status"] == "graded" and bool(got["score"])


@pytest.mark.parametrize("student", NO_WORK_ATTACKS)
def test_no_point_without_work(graded, student):
    """Forged records ahead of (or instead of) the checks, True for every yes/no record, values
    the tests compute themselves, errors hidden from nbgrader: an untouched release still scores 0."""
    got = entry(graded, student)
    assert got["score"] == 0 and got["status"] == "review", got


@pytest.mark.parametrize("student", [*HOOK_ATTACKS, *FORGE_ATTACKS, *NO_WORK_ATTACKS, "star-import"])
def test_forgery_earns_nothing_silently(graded, student):
    assert not silent_gain(entry(graded, student)), entry(graded, student)


@pytest.mark.parametrize("student", ["custom-exc", "input-transformer", "ast-transformer", "run-cell"])
def test_errors_hidden_from_nbgrader_are_flagged(graded, student):
    got = entry(graded, student)
    assert got["status"] == "review" and got["score"] == 0, got
    assert any("hid errors" in reason for reason in got["reasons"]), got


def _record(kind, line, got, **fields):
    return {"kind": kind, "what": f"line {line}", "loc": ["cell.py", line],
            "got": got if got is NOT_RUN else to_plain(got), **fields}


def test_a_cell_s_records_must_be_the_key_s_in_number_and_order():
    key = verdicts.mark_informative({"x_hidden": [_record("record", 3, (3, 1)), _record("record", 4, 7)]},
                                    {})["x_hidden"]
    honest = [_record("record", 3, (3, 1)), _record("record", 4, 7)]
    assert verdicts.judge_cell(key, honest, False, True).passed
    for forged in [[honest[0]] + honest, honest + [honest[1]], honest[::-1], honest[:1]]:
        verdict = verdicts.judge_cell(key, forged, False, True)
        assert not verdict.passed and verdict.interference, forged
    own_use = {"kind": "equal", "loc": ["solution.py", 9], "got": 1, "want": 1, "passed": True}
    assert verdicts.judge_cell(key, [own_use] + honest, False, True).passed  # the learner's own checks


def test_values_the_notebook_holds_or_a_guess_finds_show_no_work():
    key = {"x_hidden": [_record("record", 1, True), _record("record", 2, True), _record("record", 3, (2, 6)),
                        _record("record", 4, (6, 1)), _record("raises", 5, ValueError("no"), expected="ValueError"),
                        _record("record_error", 6, None)],
           "y_hidden": [_record("record_error", 1, None), _record("record_error", 2, RuntimeError("too far")),
                        _record("record", 3, False)],
           "z_visible": [_record("equal", 1, 5, want=5)]}
    release = {"x_hidden": [_record("record", 1, NOT_RUN), _record("record", 2, False), _record("record", 3, (2, 6)),
                            _record("record", 4, NOT_RUN)]}
    verdicts.mark_informative(key, release)
    assert [[r["informative"] for r in records] for records in key.values()] == [
        [False, False, False, True, False, False],  # guesses (one value: True), computed by the test, errors
        [True, True, False],  # None and an error: no one guess finds both; False alone is a guess
        [False]]  # a visible check: its expected value is in the notebook
    assert verdicts.unproven_exercises(key) == ["z"]


# Exercises none of whose checks shows work: 03's gradcheck (a checker: its results are yes or an
# error, which guesses find) and 06's attention_grad (visible tests only). Their points stand on their
# cells' own records (README, threat model); a new exercise must show work instead.
UNPROVEN = {}


@pytest.mark.parametrize("module_id", notebooks.module_ids(REPO))
def test_every_exercise_shows_work(shared_grading_cache, module_id):
    """Each exercise has a hidden check whose value is neither in the notebook nor a guess."""
    install_grader_kernel()
    key = verdicts.reference_records(REPO, module_id, shared_grading_cache / "answer-keys", GRADER_KERNEL)
    assert verdicts.unproven_exercises(key) == UNPROVEN.get(module_id, [])


def _test_cell(gid, source):
    return nbformat.v4.new_code_cell(source, metadata={"nbgrader": {
        "grade": True, "grade_id": gid, "locked": True, "points": 1, "schema_version": 3, "solution": False}})


def test_visible_points_count_only_with_the_exercise_s_informative_checks():
    hidden = "### BEGIN HIDDEN TESTS\nrecord(f(2), 'f(2)')\n### END HIDDEN TESTS"
    notebook = nbformat.v4.new_notebook(cells=[_test_cell("f_visible", "assert_equal(f(1), 1)"),
                                               _test_cell("f_hidden", hidden)])
    key = verdicts.mark_informative({"f_visible": [_record("equal", 1, 1, want=1, passed=True)],
                                     "f_hidden": [_record("record", 2, 4)]},
                                    {"f_hidden": [_record("record", 2, NOT_RUN)]})
    visible = [_record("equal", 1, 1, want=1, passed=True)]
    for learner_answer, passed in [(4, True), (3, False)]:
        judged = verdicts.judge(notebook, {0: visible, 1: [_record("record", 2, learner_answer)]}, key)
        assert [judged[g].passed for g in ("f_visible", "f_hidden")] == [passed, passed], learner_answer
    judged = verdicts.judge(notebook, {0: visible, 1: [_record("record", 2, 3)]}, key)
    assert verdicts.visible_without_hidden(notebook, judged, key) == ["f_visible"]


def test_forged_visible_checks_are_flagged(graded):
    """Checks replaced so that every visible one "passes": the grader's own recomputation fails
    them (or, where it cannot, the hidden checks disagree), and the notebook is flagged."""
    got = entry(graded, "generic-forge")
    assert got["status"] == "review" and got["score"] == 0, got
    assert any("none of the hidden checks" in reason or "the kernel reported no error" in reason
               for reason in got["reasons"]), got


def test_the_answer_being_graded_cannot_be_imported(graded):
    assert entry(graded, "star-import")["score"] == 0
    assert "No module named 'tinytorch.tensor_base'" in executed_text(graded, "star-import")


@pytest.mark.parametrize("student, reason", [
    ("allclose", "numpy.allclose"),
    ("testing-patch", "tinytorch.testing.equal"),
    ("delete-locked", "deleted the locked cell"),
    ("own-package", "ships its own tinytorch"),
])
def test_tampering_is_flagged_for_review(graded, student, reason):
    got = entry(graded, student)
    assert got["status"] == "review" and any(reason in r for r in got["reasons"]), got
    assert f"REVIEW {student}" in graded["summary"]


@pytest.mark.parametrize("student", GUARD_CASES)
def test_the_guard_flags_what_the_readme_says(graded, student):
    got = entry(graded, student)
    assert got["status"] == "review" and any(GUARD_CASES[student][1] in r for r in got["reasons"]), got
    assert got["score"] == maximum(graded), got


def test_tampering_with_a_correct_solution_keeps_its_marks(graded):
    for student in ["allclose", "testing-patch", "own-package"]:
        assert entry(graded, student)["score"] == maximum(graded), student


# ---------------------------------------------------------------- 2. escape and damage


def test_setuid_files_give_no_privilege(graded):
    text = executed_text(graded, "setuid")
    line = next(line for line in text.splitlines() if "UID" in line)
    assert "UID 0" not in line and entry(graded, "setuid")["score"] == maximum(graded)
    extracted = graded["root"] / "downloaded" / MODULE / "extracted"
    assert not [p for p in extracted.rglob("*") if p.stat().st_mode & 0o6000]


def _job_users(processes):
    return {line.split()[0]: line for line in processes.splitlines()[1:] if int(line.split()[0]) >= 2_000_000_000}


def test_no_process_of_any_job_outlives_it(graded):
    # Another worker may be grading at the same time (its jobs have other, random user ids): a
    # process of this class's jobs is one still there a minute after the class was graded.
    while True:
        later = _job_users(_processes())
        job_users = [line for uid, line in _job_users(graded["processes"]).items() if uid in later]
        if not job_users or time.monotonic() > graded["graded_at"] + 60:
            break
        time.sleep(2)
    assert not job_users, job_users
    for student in ["survivor", "odd-name", "fork-bomb"]:
        assert entry(graded, student)["status"] in ("graded", "review", "failed"), student
    assert entry(graded, "survivor")["score"] == maximum(graded)


def test_no_file_of_any_job_outlives_it(graded):
    assert "WROTE" in executed_text(graded, "tmp-litter")  # private folders, thrown away after
    for folder in ["/tmp", "/var/tmp", "/dev/shm"]:
        assert not Path(folder, "tinytorch-litter").exists()


def test_vandal_could_change_nothing_and_keeps_what_it_earned(graded):
    assert entry(graded, "vandal") == dict(entry(graded, "vandal"), status="graded", score=maximum(graded))
    printed = executed_text(graded, "vandal")
    assert "blocked:" in printed and "CHANGED" not in printed


def test_snoop_sees_no_submission_gradebook_or_solution(graded):
    read = [line for line in printed(graded, "snoop").splitlines() if line.startswith("READ")]
    assert not read, read[:5]
    assert entry(graded, "snoop")["score"] == maximum(graded)


def test_no_network(graded):
    assert "NET blocked" in executed_text(graded, "network") and not graded["listener"].connected


def test_the_grader_s_environment_does_not_reach_the_submission(graded):
    assert SECRET not in executed_text(graded, "env-secret")
    assert SECRET not in feedback(graded, "env-secret")
    # but nbgrader's own signal does: notebooks may shorten their demos while graded
    assert "('NBGRADER_EXECUTION', 'autograde')" in printed(graded, "env-secret")


@pytest.mark.parametrize("student", OVER_LIMITS)
def test_a_job_over_a_limit_of_the_whole_job_fails_with_that_reason(graded, student):
    got = entry(graded, student)
    assert got["status"] == "failed" and got["score"] is None, got
    assert got["reasons"][0] == OVER_LIMITS[student][1], got
    assert f"FAILED {student}: " in graded["summary"]


def test_busy_processes_cost_a_neighbour_nothing(graded):
    """32 busy processes in sessions of their own share one job's CPU (its control group's
    weight): graded within the limits, and every job beside them keeps its marks."""
    assert entry(graded, "busy") == dict(entry(graded, "busy"), status="graded", score=0)
    assert entry(graded, "cpu-neighbour")["score"] == maximum(graded)


def test_no_control_group_outlives_its_job(graded):
    if os.geteuid() == 0 and {"memory", "pids"} <= set(cgroups.own_groups()):
        assert graded["cgroups"], "the jobs ran in no control group of their own"
    # jobs of other tests of the session may still run: a group of this class's jobs is one
    # still there a minute after the class was graded
    while True:
        left = graded["cgroups"] & job_cgroups()
        if not left or time.monotonic() > graded["graded_at"] + 60:
            break
        time.sleep(2)
    assert not left, left


@pytest.mark.parametrize("student, note", [("loop", f"stopped at the {LIMITS.cell_timeout} s cell limit"),
                                           ("sys-exit", "called exit()"),
                                           ("memory-bomb", "ran out of memory")])
def test_a_stopped_cell_costs_only_what_depends_on_it(graded, student, note):
    got = entry(graded, student)
    assert got["status"] == "graded" and 0 < got["score"] < maximum(graded), got
    assert any(note in line for line in got["notes"]), got


def test_a_loop_that_ignores_interrupts_is_stopped_and_reported(graded):
    got = entry(graded, "stubborn-loop")
    assert got["status"] == "failed" and "ignored the interrupt" in got["reasons"][0], got


@pytest.mark.parametrize("student", ["os-exit", "crash"])
def test_a_dead_kernel_costs_only_what_depends_on_the_cell_that_died(graded, student):
    """The notebook is graded again with that exercise's cell as its stub; the feedback says why."""
    got = entry(graded, student)
    assert got["status"] == "graded" and 0 < got["score"] < maximum(graded), got
    assert any(re.match(r"the kernel died while cell \d+ \(dtypes, under .*; graded again with that cell as its "
                        r"stub$", note) for note in got["notes"]), got
    assert "KernelDied: the kernel died while cell" in feedback(graded, student)


def test_a_kernel_that_dies_before_any_exercise_fails_with_its_reason(graded):
    got = entry(graded, "crash-early")
    assert got["status"] == "failed", got
    assert re.match(r'the kernel died in cell \d+ \(under "Module 01 — The Tensor"\) \(exit, crash or resource limit\)'
                    r".*, before any exercise that could be reset to its stub$", got["reasons"][0]), got


def test_output_flood_is_cut(graded):
    got = entry(graded, "flood")
    assert got["status"] == "graded" and got["score"] == maximum(graded)
    assert any("output cut" in note for note in got["notes"])
    assert notebooks.notebook_path(graded["root"], "autograded/flood", MODULE).stat().st_size < 5 << 20


def test_shipped_package_does_not_shadow_the_reference(graded):
    line = next(line for line in executed_text(graded, "own-package").splitlines() if "FROM" in line)
    assert "/grader/reference/tinytorch/" in line


def test_edited_locked_cells_are_restored_and_a_changed_kernelspec_ignored(graded):
    assert entry(graded, "edit-locked")["score"] == 0
    assert any("edited the locked cell" in n for n in entry(graded, "edit-locked")["notes"])
    assert entry(graded, "kernelspec")["score"] == maximum(graded)
    assert any("kernelspec changed" in n for n in entry(graded, "kernelspec")["notes"])


# ---------------------------------------------------------------- 3. notebooks that would crash the run


@pytest.mark.parametrize("student, status, reason", [
    ("meta-str", "failed", "broken nbgrader metadata"),
    ("meta-list", "failed", "invalid grade id"),
    ("meta-dup", "failed", "repeats the grade id"),
    ("meta-flag", "failed", "non-boolean"),
    ("not-nbformat", "failed", "not a valid notebook"),
    ("corrupt", "failed", "not a valid notebook"),
    ("wrong-name", "failed", "wrong file name: found Untitled.ipynb"),
    ("no-notebook", "failed", "holds no notebook"),
    ("missing", "missing", "nothing submitted"),
])
def test_broken_hand_ins_fail_alone_with_their_reason(graded, student, status, reason):
    got = entry(graded, student)
    assert got["status"] == status and reason in got["reasons"][0], got
    label = {"failed": "FAILED", "missing": "missing"}[status]
    assert f"{label} {student}: " in graded["summary"]


# ---------------------------------------------------------------- 4. identity and collection


def test_a_link_to_another_learner_s_folder_is_not_collected(graded):
    assert "thief" not in graded["collected"]
    assert any(p.startswith("thief: not a folder") for p in graded["problems"])
    assert entry(graded, "thief")["status"] == "missing"


def test_a_file_named_for_another_learner_counts_for_no_one(graded):
    assert any("named for alice, but in the folder of mallory" in p for p in graded["zip_problems"])
    assert entry(graded, "alice")["score"] == maximum(graded)
    assert entry(graded, "mallory")["status"] == "missing"


def test_a_duplicate_fails_nothing_and_the_newest_counts(graded):
    assert any("more than once" in p for p in graded["zip_problems"])
    assert entry(graded, "dup")["score"] == maximum(graded)


def test_an_upload_area_of_no_roster_learner_supplies_no_one_s_file(graded):
    assert any(f"stranger/alice_{MODULE}.ipynb: named for alice, but in the upload area 'stranger' of no "
               "learner on the roster" in p for p in graded["zip_problems"]), graded["zip_problems"]
    assert entry(graded, "alice")["score"] == maximum(graded)  # the stranger's newer blank notebook lost
    assert "stranger" not in graded["outcome"]


def test_an_archive_inside_the_lms_archive_cannot_backdate_its_upload(graded):
    """late's own zip says 2011 (entries and a timestamp.txt): the LMS archive's entry time counts."""
    stamp = (graded["root"] / "submitted" / "late" / MODULE / "timestamp.txt").read_text()
    assert stamp.startswith("2026-11-30 23:59:58"), stamp
    assert entry(graded, "late")["score"] == maximum(graded)


def test_timestamps_come_from_the_collector(graded):
    stamp = (graded["root"] / "submitted" / "timestamp-forge" / MODULE / "timestamp.txt").read_text()
    assert not stamp.startswith("2000")


def test_names_cannot_forge_summary_lines(graded):
    assert any("evil\\nREVIEW" in p for p in graded["problems"])
    assert "REVIEW full: forged" not in graded["summary"]
    assert all("\n" not in p for p in graded["problems"] + graded["zip_problems"])


def test_no_submission_keeps_a_link_or_mode_bit(graded):
    for path in (graded["root"] / "submitted").rglob("*"):
        mode = path.lstat().st_mode
        assert stat.S_ISDIR(mode) and stat.S_IMODE(mode) == 0o755 or stat.S_ISREG(mode) and stat.S_IMODE(mode) == 0o644, path


# ---------------------------------------------------------------- 5. feedback


@pytest.mark.parametrize("student", [*LEAK_ATTACKS, "full", "blank"])
def test_feedback_shows_no_hidden_test_source(graded, student):
    shown = html.unescape(feedback(graded, student))
    leaked = [line for line in hidden_lines(graded["root"]) if line in shown]
    assert not leaked, leaked[:3]


@pytest.mark.parametrize("student", HISTORY_LEAKS)
def test_hidden_tests_are_not_on_disk_or_in_the_history_while_submissions_run(graded, student):
    printed = executed_text(graded, student)
    found = [line for line in hidden_lines(graded["root"]) if line in printed]
    assert not found, found[:3]


def test_feedback_runs_no_script(graded):
    page = feedback(graded, "live-script")
    assert 'http-equiv="Content-Security-Policy"' in page and "default-src 'none'" in page
    assert not re.search(r"<script[^>]*>[^<]*PWNED", page), "a learner's script survived"
    assert not re.search(r"<[a-z][^>]*\son\w+\s*=", page.lower().split("</head>", 1)[1]), \
        "an event handler survived"  # in a tag: the submission's source shows it as escaped text
    assert "javascript:alert" not in page
    for student in graded["outcome"]:
        path = graded["root"] / "feedback" / student / MODULE / f"{MODULE}.html"
        if path.is_file():
            assert "Content-Security-Policy" in path.read_text(), student


def test_every_hostile_learner_is_accounted_for(graded):
    honest = {"full", "blank", "honest-rng", "alice", "submitter", "timestamp-forge", "cpu-neighbour", "busy"}
    for student, got in graded["outcome"].items():
        if student not in honest and got["status"] == "graded" and got["score"]:
            assert got["score"] <= maximum(graded), (student, got)
    assert len(graded["outcome"]) >= 40


@pytest.fixture(scope="session")
def graded_without_cgroups(built_course, tmp_path_factory):
    """The hand-ins over the memory and disk limits beside an honest one, graded where the grader
    makes no control group (as on a machine that allows none): the sandbox's watch stops them."""
    root = tmp_path_factory.mktemp("no-cgroups") / "course"
    shutil.copytree(built_course, root)
    hand_ins = tmp_path_factory.mktemp("no-cgroups-hand-ins")
    solution = lambda: notebooks.read(notebooks.notebook_path(root, "solutions", MODULE))  # noqa: E731
    learners = {"full": solution(), **{s: first(solution(), OVER_LIMITS[s][0]) for s in ["disk-filler", "memory-hog"]}}
    for student, notebook in learners.items():
        _write(hand_ins / student, {f"{MODULE}.ipynb": notebook})
    import_roster(root, hand_ins, learners)
    grading.collect_folder(root, MODULE, hand_ins)
    limits = dataclasses.replace(LIMITS, use_cgroups=False)
    return grading.autograde(root, MODULE, jobs=2, limits=limits, feedback=False)[MODULE]


@pytest.mark.parametrize("student", ["disk-filler", "memory-hog"])
def test_without_control_groups_the_watch_fails_a_job_over_a_limit(graded_without_cgroups, student):
    got = graded_without_cgroups[student]
    assert got["status"] == "failed" and got["reasons"][0] == OVER_LIMITS[student][1], got
    full = graded_without_cgroups["full"]
    assert full["status"] == "graded" and full["score"] == full["max_score"] > 0, full
