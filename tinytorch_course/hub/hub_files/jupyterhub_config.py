"""JupyterHub configuration of `./course hub` (copied into the hub's state folder; reads hub.json beside it).

One class on one machine: PAM logins for the system accounts `./course hub` made or found, one
JupyterLab server per account started as that account (LocalProcessSpawner), the proxy and the hub
on 127.0.0.1. Learners start in their workspace (`~/tinytorch-workspace`, the learner kit);
the instructor starts in the home folder that holds the course (`~/tinytorch-course`) and gets
the formgrader. README.md, "Running a class on JupyterHub", says what carries over to Zero to
JupyterHub on Kubernetes.
"""
import json
from pathlib import Path
import pwd

c = get_config()  # noqa: F821  (provided by JupyterHub when it loads this file)
settings = json.loads((Path(__file__).resolve().parent / "hub.json").read_text())
state = Path(settings["state"])

c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = settings["port"]
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = settings["port"] + 2
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{settings['port'] + 1}"
c.ConfigurableHTTPProxy.command = [settings["proxy"]]
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(state / "jupyterhub.pid")

c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = set(settings["learners"]) | {settings["instructor"]}
c.Authenticator.admin_users = {settings["instructor"]}

c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [str(Path(settings["env"]) / "bin" / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
# A 2-core machine that starts several servers at once needs more than the default 60 s / 30 s.
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 120


def by_role(spawner):
    """Where each account's server starts, and which Jupyter configuration it reads."""
    home = Path(pwd.getpwnam(spawner.user.name).pw_dir)
    role = "instructor" if spawner.user.name == settings["instructor"] else "learner"
    environment = {
        "PATH": f"{Path(settings['env']) / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "JUPYTER_CONFIG_PATH": str(state / "config" / role),
    }
    if role == "learner":
        workspace = home / settings["workspace"]
        spawner.notebook_dir = str(workspace)
        environment["PYTHONPATH"] = str(workspace)  # kernels import the learner's own tinytorch
    else:
        spawner.notebook_dir = str(home)
    spawner.environment = {**spawner.environment, **environment}


c.Spawner.pre_spawn_hook = by_role
