"""The launcher of the `tinytorch-sandbox` kernel: `python -I -m tinytorch_course.grading.sandbox_kernel -f FILE`.

jupyter_client starts it, as the grader, with $TINYTORCH_SANDBOX naming the job's spec (written by
`sandbox.SandboxedExecute`, readable by the grader only). It copies the connection file into the
job's `ipc/` folder (as the sandbox sees it), opens the records file for appending (the kernel writes to that descriptor and
never sees the file's path), hands the job's folders to the job's user, joins the job's control
groups (so every process of the job counts against its memory, process and CPU limits), sets the
resource limits (address space, file size, CPU time, processes, no core dumps), and replaces itself with bubblewrap
(`bwrap_command`), which runs `kernel_main` inside the sandbox. It imports nothing but the
standard library: it starts once per submission.
"""
import json
import os
from pathlib import Path
import resource
import sys

INSIDE = "/grader"  # where the sandbox sees the reference package, its own files, input/, work/ and ipc/


def _system_mounts():
    """Read-only mounts of the system folders a Python process needs (symlinks kept as such)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ["/bin", "/sbin", "/lib", "/lib32", "/lib64"]:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for name in ["ld.so.cache", "localtime", "alternatives"]:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


def bwrap_command(spec, records_fd):
    """The argv that runs the kernel inside bubblewrap (and, as root, as the job's own user)."""
    prefix = os.path.realpath(sys.prefix)  # what is mounted: a link on the way would not be
    python_homes = sorted({os.path.realpath(sys.base_prefix), prefix})
    python = os.path.join(prefix, "bin", "python")
    command = ["bwrap", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
               "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--clearenv"]
    if spec["uid"] is None:
        command += ["--unshare-user", "--disable-userns"]
    command += _system_mounts()
    command += ["--dev", "/dev"]
    for folder in ["/tmp", "/var/tmp", "/dev/shm"]:  # before the binds: Python or a job may live in /tmp
        command += ["--perms", "1777", "--size", str(spec["tmp_bytes"]), "--tmpfs", folder]
    for home in python_homes:  # its folders on the way open to all (bubblewrap makes them 0700)
        parts = Path(home).parts
        for depth in range(2, len(parts)):
            command += ["--perms", "0755", "--dir", str(Path(*parts[:depth]))]
        command += ["--ro-bind", home, home]
    command += ["--proc", "/proc"]
    command += ["--perms", "0755", "--dir", INSIDE,
                "--ro-bind", spec["reference"], f"{INSIDE}/reference",
                "--ro-bind", spec["kernel"], f"{INSIDE}/kernel",
                "--ro-bind", spec["work"], f"{INSIDE}/input",  # kernel_main copies it into work/
                "--perms", "1777", "--size", str(spec["disk_bytes"]), "--tmpfs", f"{INSIDE}/work",
                "--bind", spec["ipc"], f"{INSIDE}/ipc"]
    environment = {"HOME": "/tmp/home", "TMPDIR": "/tmp", "USER": "learner", "LOGNAME": "learner",
                   "LANG": "C.UTF-8", "PATH": f"{prefix}/bin:/usr/bin:/bin",
                   "MPLCONFIGDIR": "/tmp/matplotlib", "MPLBACKEND": "agg", "IPYTHONDIR": "/tmp/ipython",
                   "JUPYTER_RUNTIME_DIR": "/tmp/runtime", "OPENBLAS_NUM_THREADS": "1",
                   "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                   "TINYTORCH_RECORDS": f"fd:{records_fd}", "TINYTORCH_HIDDEN_SEED": spec["hidden_seed"],
                   "TINYTORCH_OUTPUT_BYTES": str(spec["output_bytes"])}
    if "NBGRADER_EXECUTION" in os.environ:  # set by the grader only after sandbox.execution_mode checked it
        environment["NBGRADER_EXECUTION"] = os.environ["NBGRADER_EXECUTION"]
    for name, value in environment.items():
        command += ["--setenv", name, value]
    command += ["--chdir", f"{INSIDE}/work", "--"]
    if spec["uid"] is not None:
        uid = str(spec["uid"])
        command += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
                    "--inh-caps=-all", "--bounding-set=-all", "--"]
    return command + [python, "-I", f"{INSIDE}/kernel/kernel_main.py", "-f",
                      f"{INSIDE}/ipc/kernel.json", "--IPKernelApp.log_level=ERROR"]


def _limit(kind, value):
    if value:
        resource.setrlimit(kind, (value, value))


def main(argv):
    with open(os.environ["TINYTORCH_SANDBOX"]) as f:
        spec = json.load(f)
    with open(argv[argv.index("-f") + 1]) as f:
        connection = json.load(f)
    connection["ip"] = f"{INSIDE}/ipc/" + os.path.basename(connection["ip"])  # the same sockets, seen inside
    with open(os.path.join(spec["ipc"], "kernel.json"), "w") as f:
        json.dump(connection, f)
    records = os.open(spec["records"], os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    os.set_inheritable(records, True)
    for procs in spec["cgroup_procs"]:  # before bubblewrap: everything it starts is counted
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    uid = spec["uid"]
    if uid is not None:
        for folder in (spec["work"], spec["ipc"]):
            for path, dirs, files in os.walk(folder):
                for name in [path] + [os.path.join(path, n) for n in dirs + files]:
                    os.lchown(name, uid, uid)
    _limit(resource.RLIMIT_AS, spec["memory_bytes"])
    _limit(resource.RLIMIT_FSIZE, spec["file_bytes"])
    _limit(resource.RLIMIT_CPU, spec["cpu_seconds"])
    if uid is not None:  # counted per user: the job's own user has only the job's processes
        _limit(resource.RLIMIT_NPROC, spec["processes"])
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    log = os.open(spec["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    os.dup2(log, 1)  # what the sandbox writes outside the kernel's own streams (and bubblewrap's errors)
    os.dup2(log, 2)
    command = bwrap_command(spec, records)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv)
