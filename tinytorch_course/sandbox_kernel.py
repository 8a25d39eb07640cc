"""The kernel that runs a learner's submission: `python -I -m tinytorch_course.sandbox_kernel -f FILE`.

The grader writes a job file (named by $TINYTORCH_SANDBOX, readable by root only) and starts this
kernel in the submission's private copy. Before any notebook cell runs, the kernel:

* checks that it runs inside that copy, and moves its connection file to a private folder;
* puts the course's reference package first on sys.path, imports it, and installs the guard
  (`kernel_guard`) that notices patching of numpy, builtins, the reference package or test helpers;
* limits itself: address space (memory), file size (a write past it fails with EFBIG instead of
  killing the kernel), CPU seconds, processes, no core dumps;
* when started as root: in a mount namespace of its own, covers the course folder and the
  grader's home with empty folders (re-exposing, read-only as they were, only the Python install
  and the sandbox it needs), then hands its working copy to a fresh user id that owns nothing
  else and drops to it. So it can neither read the gradebook, solutions or other learners' work,
  nor write anything outside its copy. It also dies with the grader process (PR_SET_PDEATHSIG).
"""
import ctypes
import json
import os
import resource
import shutil
import signal
import sys

PR_SET_PDEATHSIG = 1
CLONE_NEWNS, MS_BIND, MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV, MNT_DETACH = (
    0x20000, 4096, 16384, 1 << 18, 2, 4, 2)


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _call(result, what):
    if result != 0:
        raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")


def _mount(source, target, fstype=None, flags=0, data=None):
    encode = lambda s: None if s is None else s.encode()  # noqa: E731
    _call(_libc().mount(encode(source), encode(target), encode(fstype), flags, encode(data)),
          f"mount {source} on {target}")


def _inside(path, folder):
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _minimal(paths):
    paths = sorted(set(paths))
    return [p for p in paths if not any(q != p and _inside(p, q) for q in paths)]


def hide_paths(hide, need, stage):
    """In a new mount namespace, cover each folder of `hide` with an empty tmpfs, binding back the
    parts of `need` inside it; folders that others may not enter on the way to `need` are covered
    too (so an unprivileged user reaches exactly `need`)."""
    need = [os.path.realpath(p) for p in need]
    hide = [os.path.realpath(p) for p in hide]
    for path in need:
        parts = path.strip(os.sep).split(os.sep)
        for depth in range(1, len(parts)):
            ancestor = os.sep + os.sep.join(parts[:depth])
            if not os.stat(ancestor).st_mode & 0o001:
                hide.append(ancestor)
                break
    _call(_libc().unshare(CLONE_NEWNS), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    for index, folder in enumerate(_minimal(hide)):
        staged = os.path.join(stage, str(index))
        os.makedirs(staged)
        _mount(folder, staged, None, MS_BIND | MS_REC)
        _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
        for path in _minimal(p for p in need if _inside(p, folder) and p != folder):
            relative = os.path.relpath(path, folder)
            os.makedirs(os.path.join(folder, relative), mode=0o755, exist_ok=True)
            _mount(os.path.join(staged, relative), os.path.join(folder, relative), None,
                   MS_BIND | MS_REC)
        _call(_libc().umount2(staged.encode(), MNT_DETACH), f"umount {staged}")


def _chown_tree(path, uid, gid):
    os.lchown(path, uid, gid)
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            os.lchown(os.path.join(folder, name), uid, gid)


def _limit(kind, value):
    if value:
        resource.setrlimit(kind, (value, value))


def prepare(spec, argv):
    """Everything up to (not including) starting IPython; returns the kernel's argv."""
    cwd = os.path.realpath(os.getcwd())
    inside = os.path.realpath(spec["workdir"])
    if cwd != inside and not cwd.startswith(inside + os.sep):
        raise SystemExit(f"sandbox kernel: refusing to run in {cwd} (outside {inside})")
    private = spec["private"]
    for sub in ["home", "tmp", "ipython", "runtime", "mpl"]:
        os.makedirs(os.path.join(private, sub), exist_ok=True)
    for name in os.listdir(spec["mpl_cache"]):  # a prebuilt font cache: no rebuild, no warning
        shutil.copy(os.path.join(spec["mpl_cache"], name), os.path.join(private, "mpl", name))
    index = argv.index("-f") + 1
    connection = os.path.join(private, "runtime", "kernel.json")
    shutil.copy(argv[index], connection)
    argv = argv[:index] + [connection] + argv[index + 1:]

    os.environ.pop("TINYTORCH_SANDBOX", None)
    os.environ.update(HOME=os.path.join(private, "home"), TMPDIR=os.path.join(private, "tmp"),
                      IPYTHONDIR=os.path.join(private, "ipython"),
                      JUPYTER_RUNTIME_DIR=os.path.join(private, "runtime"),
                      MPLCONFIGDIR=os.path.join(private, "mpl"), USER="learner", LOGNAME="learner",
                      OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    sys.path.insert(0, spec["reference"])

    from . import kernel_guard  # imports numpy and the whole reference package

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _limit(resource.RLIMIT_AS, spec.get("memory_bytes"))
    _limit(resource.RLIMIT_FSIZE, spec.get("file_bytes"))
    _limit(resource.RLIMIT_CPU, spec.get("cpu_seconds"))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    uid = spec.get("uid")
    if uid is not None and os.geteuid() == 0:
        hide_paths(spec["hide"], [sys.base_prefix, sys.prefix, spec["reference"], spec["mpl_cache"],
                                  spec["sandbox"]],
                   os.path.join(private, "stage"))
        os.chdir(cwd)
        _limit(resource.RLIMIT_NPROC, spec.get("processes"))
        _chown_tree(cwd, uid, uid)
        _chown_tree(private, uid, uid)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:  # the grader already went away
        raise SystemExit(1)
    return argv, kernel_guard


def _cap(stream, budget):
    """Drop what a stream is sent past `budget` characters (the grader caps outputs as well;
    this keeps a flood from filling the kernel's memory and the connection)."""
    write, left = stream.write, [budget]

    def capped(text):
        left[0] -= len(text)
        if left[0] >= 0:
            return write(text)
        if left[0] + len(text) > 0:
            write(text[:left[0] + len(text)])
        return len(text)

    stream.write = capped


def main(argv):
    with open(os.environ["TINYTORCH_SANDBOX"]) as f:
        spec = json.load(f)
    argv, kernel_guard = prepare(spec, argv)
    from ipykernel.kernelapp import IPKernelApp

    app = IPKernelApp.instance()
    app.initialize(argv[1:])
    kernel_guard.install(app.shell, os.path.join(spec["reference"], "tinytorch", ""))
    for stream in (sys.stdout, sys.stderr):
        _cap(stream, 2 * spec["output_bytes"])
    app.start()


if __name__ == "__main__":
    main(sys.argv)
