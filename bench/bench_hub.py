"""How many learners the class hub serves on this machine: rounds of N simulated learners at once.

    sudo .venv/bin/python bench/bench_hub.py [--learners 1 4 8 16] [--module 01_tensor] [--state DIR]

Starts `./course hub` for a class of max(N) accounts (made for the run, removed after it). In each
round, N learners at once start their server through the hub's REST API, start a kernel in it and
execute the module's solution notebook cell by cell over the kernel's websocket (as JupyterLab
does), then stop. Prints per round: server start and notebook execution time (median and worst),
failed learners, and the memory the learners' processes held at the end of the executions. Bounded:
at most 32 learners, every wait has a time limit, and everything stops with the run.
"""
import argparse
import json
from pathlib import Path
import statistics
import subprocess
import sys
import threading
import time
import uuid

import requests
import websocket

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from test_hub import Hub, hub_folder, processes_of, python_open_to_all  # noqa: E402

from tinytorch_course import notebooks  # noqa: E402

LIMIT = 32
TIMEOUT = 600


class Learner(threading.Thread):
    """One simulated learner: start the server, execute the notebook in a kernel, record times."""

    def __init__(self, hub, account, token, cells):
        super().__init__()
        self.hub, self.account, self.cells = hub, account, cells
        self.headers = {"Authorization": f"token {token}"}
        self.spawn = self.execute = self.error = None

    def api(self, method, path, **kwargs):
        response = requests.request(method, f"{self.hub.url}{path}", headers=self.headers, timeout=60, **kwargs)
        response.raise_for_status()
        return response.json() if response.content else None

    def run(self):
        try:
            started = time.monotonic()
            self.api("POST", f"/hub/api/users/{self.account}/server")
            while not (self.api("GET", f"/hub/api/users/{self.account}")["servers"].get("", {}).get("ready")):
                if time.monotonic() - started > TIMEOUT:
                    raise TimeoutError("the server did not start")
                time.sleep(0.5)
            self.spawn = time.monotonic() - started
            started = time.monotonic()
            kernel = self.api("POST", f"/user/{self.account}/api/kernels", json={"name": "python3"})["id"]
            self.run_cells(kernel)
            self.execute = time.monotonic() - started
            self.api("DELETE", f"/user/{self.account}/api/kernels/{kernel}")
        except Exception as error:  # noqa: BLE001  (a failed learner is a result of the round)
            self.error = f"{type(error).__name__}: {error}"

    def run_cells(self, kernel):
        url = f"{self.hub.url.replace('http', 'ws')}/user/{self.account}/api/kernels/{kernel}/channels"
        channel = websocket.create_connection(url, header=[f"{k}: {v}" for k, v in self.headers.items()],
                                              timeout=TIMEOUT)
        session = uuid.uuid4().hex
        try:
            for source in self.cells:
                msg_id = uuid.uuid4().hex
                channel.send(json.dumps({
                    "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": self.account,
                               "session": session, "date": "", "version": "5.3"},
                    "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                    "content": {"code": source, "silent": False, "store_history": True,
                                "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
                while True:
                    message = json.loads(channel.recv())
                    if message["msg_type"] == "execute_reply" and message["parent_header"].get("msg_id") == msg_id:
                        if message["content"]["status"] != "ok":
                            raise RuntimeError(f"a cell raised: {message['content'].get('ename')}")
                        break
        finally:
            channel.close()


def memory_mb(uids):
    total = 0
    for pid in processes_of(uids):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            continue
        total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return total / 1024


def token_for(hub, account):
    env_python = json.loads((hub.state / "hub.json").read_text())["env"] + "/bin/python"
    return subprocess.run([env_python, "-m", "jupyterhub", "token", "-f", str(hub.state / "jupyterhub_config.py"),
                           account], cwd=hub.state, capture_output=True, text=True, check=True).stdout.strip()


def round_of(hub, learners, token, cells):
    threads = [Learner(hub, account, token, cells) for account in learners]
    for thread in threads:
        thread.start()
    peak = 0.0
    while any(t.is_alive() for t in threads):
        peak = max(peak, memory_mb(hub.uids()))
        time.sleep(1)
    for thread in threads:
        thread.join()
    for account in learners:
        requests.delete(f"{hub.url}/hub/api/users/{account}/server", headers={"Authorization": f"token {token}"},
                        timeout=120)
    deadline = time.monotonic() + 120
    while processes_of({hub.uid(a) for a in learners}) and time.monotonic() < deadline:
        time.sleep(1)
    return threads, peak


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--module", default="01_tensor")
    parser.add_argument("--state", type=Path, help="reuse this hub state folder (its env/ and proxy/)")
    args = parser.parse_args()
    sizes = sorted(set(min(n, LIMIT) for n in args.learners))
    cells = [c.source for c in notebooks.read(notebooks.notebook_path(REPO, "solutions", args.module)).cells
             if c.cell_type == "code"]
    with python_open_to_all():
        measure(args.module, cells, sizes, args.state)


def measure(module_id, cells, sizes, state=None):
    hub = Hub(hub_folder(), learners=[f"l{i:02d}" for i in range(max(sizes))], state=state)
    try:
        hub.wait_until_up()
        token = token_for(hub, hub.instructor)
        print(f"{module_id}: {len(cells)} code cells; the machine has {len(__import__('os').sched_getaffinity(0))} "
              "CPUs\nlearners  server start s (median / worst)  notebook s (median / worst)  failed  "
              "peak memory of the learners MB")
        for size in sizes:
            threads, peak = round_of(hub, hub.learners[:size], token, cells)
            ok = [t for t in threads if not t.error]
            spawn = [t.spawn for t in ok]
            execute = [t.execute for t in ok]
            line = (f"{size:8d}  {statistics.median(spawn):8.1f} / {max(spawn):6.1f}            "
                    f"{statistics.median(execute):8.1f} / {max(execute):6.1f}        " if ok else f"{size:8d}  -  ")
            print(f"{line}{len(threads) - len(ok):6d}  {peak:10.0f}", flush=True)
            for thread in threads:
                if thread.error:
                    print(f"          {thread.account}: {thread.error}")
    finally:
        hub.remove()


if __name__ == "__main__":
    main()
