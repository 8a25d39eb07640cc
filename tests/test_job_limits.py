"""Control groups for whole grading jobs (`tinytorch_course.grading.cgroups`): where they are found, what a
job's group is limited to, which limit a job hit, and that nothing is left behind.

The grading of hostile jobs through the real route is in test_hostile.py (a disk filler, a memory
hog, a fork bomb, busy processes beside an honest neighbour, the same without control groups)."""
import os
from pathlib import Path
import secrets
import subprocess
import sys
import time

import pytest

from tinytorch_course.grading import cgroups

MOUNTINFO = """\
30 25 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
31 30 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
32 30 0:28 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
33 30 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
34 30 0:30 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
"""
CGROUP = "5:memory:/grader/7\n4:pids:/\n3:cpu,cpuacct:/\n0::/grader\n"


def fake_proc(tmp_path, mountinfo, cgroup):
    (tmp_path / "mountinfo").write_text(mountinfo)
    (tmp_path / "cgroup").write_text(cgroup)
    return str(tmp_path)


def test_each_controller_is_found_in_the_grader_s_own_group_of_its_hierarchy(tmp_path):
    assert cgroups.own_groups(fake_proc(tmp_path, MOUNTINFO, CGROUP)) == {
        "memory": (1, Path("/sys/fs/cgroup/memory/grader/7")),
        "pids": (1, Path("/sys/fs/cgroup/pids")),
        "cpu": (1, Path("/sys/fs/cgroup/cpu,cpuacct"))}


def test_on_cgroups_v2_only_the_controllers_the_group_may_use_count(tmp_path):
    group = tmp_path / "fs" / "grader"
    group.mkdir(parents=True)
    (group / "cgroup.controllers").write_text("cpu memory pids io\n")
    mountinfo = f"34 30 0:30 / {tmp_path / 'fs'} rw - cgroup2 cgroup2 rw\n"
    found = cgroups.own_groups(fake_proc(tmp_path, mountinfo, "0::/grader\n"))
    assert found == {name: (2, group) for name in ["memory", "pids", "cpu"]}
    (group / "cgroup.controllers").write_text("cpu\n")  # not delegated: no group for memory or pids
    assert cgroups.own_groups(fake_proc(tmp_path, mountinfo, "0::/grader\n")) == {"cpu": (2, group)}


def test_a_v2_job_group_holds_the_job_s_limits_and_reports_an_oom_kill(tmp_path):
    parent = tmp_path / "grader"  # a stand-in for cgroupfs: plain files
    parent.mkdir()
    group = cgroups.job_group("job", 300 << 20, 17, cpu_weight=50,
                              groups={name: (2, parent) for name in ["memory", "pids", "cpu"]})
    folder = parent / "job"
    written = {name: (folder / name).read_text() for name in
               ["memory.max", "memory.swap.max", "pids.max", "cpu.weight"]}
    assert written == {"memory.max": str(300 << 20), "memory.swap.max": "0", "pids.max": "17", "cpu.weight": "50"}
    assert group.procs_files == [str(folder / "cgroup.procs")]
    assert group.exceeded() == []
    (folder / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n")
    (folder / "pids.events").write_text("max 3\n")
    assert group.exceeded() == [
        "out of memory for the job: its processes together reached the limit of 300 MB",
        "too many processes: the job tried to run more than 17 at once"]


def test_without_memory_and_process_limits_there_is_no_group():
    assert cgroups.job_group("job", 1 << 30, 10, groups={}) is None


def test_v1_cpu_shares_scale_from_v2_weights():
    assert [cgroups._v1_shares(w) for w in [100, 50, 1, 10000]] == ["1024", "512", "10", "102400"]


def writable_hierarchies():
    found = cgroups.own_groups()
    return os.geteuid() == 0 and {"memory", "pids"} <= set(found)


JOIN = "import os, sys\nfor f in sys.argv[1:]:\n    open(f, 'w').write(str(os.getpid()))\n"


@pytest.fixture
def real_group():
    """A job's group on this machine (192 MB, 12 processes); after the test, nothing of it is left:
    no folder, no process."""
    if not writable_hierarchies():
        pytest.skip("needs root and cgroup hierarchies for memory and pids")
    group = cgroups.job_group(f"tinytorch-job-test-{secrets.token_hex(4)}", 192 << 20, 12)
    yield group
    left = in_group(group)
    group.remove()
    assert not [folder for _, folder in group.folders.values() if folder.exists()]
    for pid in left:  # killed: gone, or a zombie until its parent reaps it
        assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def in_group(group):
    return {pid for procs in group.procs_files for pid in Path(procs).read_text().split()}


def test_a_real_group_bounds_the_memory_of_all_processes_together(real_group):
    # two processes of 128 MB each: each below the limit, together above it
    hogs = JOIN + ("import time\nfor _ in range(2):\n    if os.fork() == 0:\n"
                   "        hog = bytearray(128 << 20)\n        time.sleep(30)\n        os._exit(0)\nos.wait()\n")
    subprocess.run([sys.executable, "-c", hogs, *real_group.procs_files], timeout=60)
    assert real_group.exceeded() == ["out of memory for the job: its processes together reached the limit of 192 MB"]


def test_a_real_group_bounds_the_number_of_all_processes_together(real_group):
    forks = JOIN + ("n = 0\ntry:\n    while n < 100:\n        if os.fork() == 0:\n"
                    "            os.close(1)\n            __import__('time').sleep(30)\n            os._exit(0)\n"
                    "        n += 1\nexcept OSError:\n    print(n)\n")
    started = subprocess.run([sys.executable, "-c", forks, *real_group.procs_files], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, timeout=60).stdout  # (its children keep stderr)
    assert 0 < int(started) < 12
    assert real_group.exceeded() == ["too many processes: the job tried to run more than 12 at once"]
    assert len(in_group(real_group)) == int(started), "its children sleep on in the group (removed after)"


def test_a_group_left_by_a_killed_grader_is_swept_once_it_is_old_and_empty():
    if not writable_hierarchies():
        pytest.skip("needs root and cgroup hierarchies for memory and pids")
    groups = cgroups.own_groups()
    prefix = f"tinytorch-job-sweep-{secrets.token_hex(4)}-"
    empty = cgroups.job_group(prefix + "empty", 64 << 20, 4, groups=groups)
    busy = cgroups.job_group(prefix + "busy", 64 << 20, 4, groups=groups)
    sleeper = subprocess.Popen([sys.executable, "-c", JOIN + "import time\ntime.sleep(60)", *busy.procs_files])
    try:
        while not in_group(busy) and sleeper.poll() is None:
            time.sleep(0.01)
        assert in_group(busy)
        cgroups.sweep(groups, prefix)  # both are young
        assert all(folder.is_dir() for _, folder in [*empty.folders.values(), *busy.folders.values()])
        cgroups.sweep(groups, prefix, older_than=-1)
        assert not [folder for _, folder in empty.folders.values() if folder.exists()]
        assert all(folder.is_dir() for _, folder in busy.folders.values())
    finally:
        busy.remove()
        sleeper.wait()
