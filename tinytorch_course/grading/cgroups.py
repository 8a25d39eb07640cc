"""Limits for a whole grading job, all its processes together: memory, process count, CPU share.

`job_group` makes a control group for one job inside the grader's own group (so whatever bounds
the grader bounds its jobs too), in each hierarchy that has the controller: cgroups v1 (one
folder per controller: `memory.limit_in_bytes`, `pids.max`, `cpu.shares`) or v2 (one folder:
`memory.max`, `pids.max`, `cpu.weight`). The sandbox's launcher writes its own process id into
every `cgroup.procs` of the group before it becomes bubblewrap, so every process of the job,
however it forks or detaches, is counted. After the job, `JobGroup.exceeded` says which limit the
job hit (the kernel's own counters: OOM kills, refused forks), and `JobGroup.remove` kills what is
left and deletes the group. Where no hierarchy can be written (not root, no delegation),
`job_group` returns None and the sandbox falls back to its own watch (`sandbox.JobWatch`).
"""
import os
from pathlib import Path
import signal
import time

ROOT = Path("/sys/fs/cgroup")
DEFAULT_CPU_WEIGHT = 100  # v2's default weight (v1: 1024 shares): every job counts as one process


def _v1_shares(weight):
    return str(max(2, weight * 1024 // DEFAULT_CPU_WEIGHT))


REASONS = {  # why a job failed, whoever noticed (its control group or the sandbox's watch)
    "memory": "out of memory for the job: its processes together reached the limit of {mb} MB",
    "pids": "too many processes: the job tried to run more than {processes} at once",
    "disk": "disk full: the job filled {folder} ({mb} MB)",
}

# controller: (v1 limits, v2 limits, {version: (event file, counter) that says the limit was hit});
# each limit is (file, how to write the job's number, required?)
CONTROLLERS = {
    "memory": ([("memory.limit_in_bytes", str, True), ("memory.memsw.limit_in_bytes", str, False)],
               [("memory.max", str, True), ("memory.swap.max", lambda _: "0", False)],
               {1: ("memory.oom_control", "oom_kill"), 2: ("memory.events", "oom_kill")}),
    "pids": ([("pids.max", str, True)], [("pids.max", str, True)],
             {1: ("pids.events", "max"), 2: ("pids.events", "max")}),
    "cpu": ([("cpu.shares", _v1_shares, True)], [("cpu.weight", str, True)], {}),
}


def own_groups(proc_self="/proc/self"):
    """`{controller: (version, folder of the grader's own group)}` for memory, pids and cpu, where
    a mounted hierarchy has them (v1 first: a hybrid machine binds each controller to one)."""
    mounts = {}  # controller (or "" for v2) -> (mount root, mount point)
    with open(f"{proc_self}/mountinfo") as f:
        for line in f:
            fields, _, tail = line.partition(" - ")
            fstype, _, options = tail.split()[:3]
            mount_root, mount_point = fields.split()[3:5]
            if fstype == "cgroup2":
                mounts.setdefault("", (mount_root, mount_point))
            elif fstype == "cgroup":
                for option in options.split(","):
                    mounts.setdefault(option, (mount_root, mount_point))
    found = {}
    with open(f"{proc_self}/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in (controllers.split(",") if controllers else [""]):
                if name in mounts:
                    mount_root, mount_point = mounts[name]
                    inside = os.path.relpath(path, mount_root) if path.startswith(mount_root) else "."
                    found[name] = Path(mount_point) / inside
    groups = {name: (1, found[name]) for name in CONTROLLERS if name in found}
    if "" in found:
        try:
            enabled = (found[""] / "cgroup.controllers").read_text().split()
        except OSError:
            enabled = []
        groups.update({name: (2, found[""]) for name in CONTROLLERS if name in enabled and name not in groups})
    return groups


class JobGroup:
    """One job's control group: a folder per v1 controller, or one v2 folder (or both, on a hybrid
    machine); `limits` says what each bounds, for the reasons."""

    def __init__(self, folders, limits):
        self.folders, self.limits = folders, limits
        self._baseline = self._counters()

    @property
    def procs_files(self):
        """The `cgroup.procs` files the job's first process writes its id into."""
        return [str(folder / "cgroup.procs") for folder, _ in self._unique()]

    def _unique(self):
        seen = {}
        for name, (version, folder) in self.folders.items():
            seen.setdefault(folder, (folder, version))
        return seen.values()

    def _counters(self):
        found = {}
        for name, (version, folder) in self.folders.items():
            event = CONTROLLERS[name][2].get(version)
            if event:
                found[name] = read_counter(folder / event[0], event[1])
        return found

    def exceeded(self):
        """What the job ran into, as reasons: each limit whose kernel counter went up."""
        reasons = []
        for name, count in self._counters().items():
            if count > self._baseline.get(name, 0):
                reasons.append(REASONS[name].format(**self.limits))
        return reasons

    def remove(self, attempts=100):
        """Kill every process left in the group, then delete its folders (retried while the
        kernel still holds exiting processes)."""
        folders = [folder for folder, _ in self._unique()]
        for _ in range(attempts):
            for folder in folders:
                kill_all(folder)
            for folder in list(folders):
                try:
                    folder.rmdir()
                    folders.remove(folder)
                except FileNotFoundError:
                    folders.remove(folder)
                except OSError:
                    pass
            if not folders:
                return
            time.sleep(0.05)
        raise RuntimeError(f"could not remove the job's control groups {', '.join(map(str, folders))}")


def read_counter(path, key):
    """The number after `key` in a cgroup's flat key-value file (0 when absent)."""
    try:
        for line in Path(path).read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def kill_all(folder):
    """SIGKILL every process in a group (`cgroup.kill` where the kernel has it)."""
    if (folder / "cgroup.kill").exists():
        try:
            (folder / "cgroup.kill").write_text("1")
            return
        except OSError:
            pass
    try:
        pids = (folder / "cgroup.procs").read_text().split()
    except OSError:
        return
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


def sweep(groups, prefix, older_than=60):
    """Delete the groups named `prefix*` that hold no process and were made more than
    `older_than` seconds ago: left by a grader that was killed before it could delete them (a
    job's group holds its first process within moments of being made, until the job ends)."""
    for _, parent in groups.values():
        for folder in parent.glob(f"{prefix}*"):
            try:
                if not (folder / "cgroup.procs").read_text().split() and \
                        time.time() - folder.stat().st_ctime > older_than:
                    folder.rmdir()
            except OSError:
                pass


def job_group(name, memory_bytes, processes, cpu_weight=DEFAULT_CPU_WEIGHT, groups=None):
    """A new group `name` under the grader's own, with the job's limits; None where the machine
    lets the grader limit neither memory nor processes this way (the sandbox then falls back).
    A controller that cannot be limited (the CPU share, say) is left out."""
    groups = own_groups() if groups is None else groups
    values = {"memory": memory_bytes, "pids": processes, "cpu": cpu_weight}
    limited, made = {}, []
    for controller, (version, parent) in groups.items():
        folder = parent / name
        try:
            if version == 2:  # the grader's group hands the controller down to its children
                (parent / "cgroup.subtree_control").write_text(f"+{controller}")
            if not folder.is_dir():
                folder.mkdir()
                made.append(folder)
            for file_name, written, required in CONTROLLERS[controller][version - 1]:
                try:
                    (folder / file_name).write_text(written(values[controller]))
                except OSError:
                    if required:
                        raise
        except OSError:
            continue
        limited[controller] = (version, folder)
    group = JobGroup(limited, {"mb": memory_bytes >> 20, "processes": processes})
    for folder in made:  # folders of controllers that could not be limited: nothing runs there yet
        if folder not in {f for _, f in limited.values()}:
            folder.rmdir()
    if {"memory", "pids"} <= set(limited):
        return group
    group.remove()
    return None
