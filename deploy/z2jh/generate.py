"""The class on Zero to JupyterHub (Kubernetes): the single-user image's build folder and the chart's values.

    .venv/bin/python deploy/z2jh/generate.py --roster roster.csv --out DIR [--image NAME:TAG] [--instructor NAME]
                                             [--values-only]

writes

    DIR/image/        the image's build context: Dockerfile, tinytorch-start, the learner kit
                      (`./course workspace`) and the grader kernels' specs
    DIR/values.yaml   the values of the jupyterhub chart (deploy/z2jh/chart/ names its version)
    DIR/exchange-pvc.yaml  the ReadWriteMany claim that holds nbgrader's exchange

Everything that `./course hub` also sets up on one machine comes from the same place: the Jupyter
configuration of each role from `hub.prepare_config`, the roster's checks from `hub.read_roster`,
the kit from `workspace.make_workspace`, the image's Python from the kit's lock. tests/test_deploy.py
checks the rest against what `./course hub` writes (the exchange's modes, each role's servers, a
learner's workspace) and the committed example (deploy/z2jh/values.yaml, made from
example-roster.csv) against this script.
"""
import argparse
import json
from pathlib import Path
import posixpath
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from tinytorch_course.hub import hub  # noqa: E402  (the repository's course tooling, found from here)
from tinytorch_course.nbgrader_api import CourseError, load_config  # noqa: E402
from tinytorch_course.kit.workspace import KIT_NAME, make_workspace  # noqa: E402

HOME = "/home/jovyan"  # z2jh's singleuser.storage.homeMountPath: each user's own volume
ENV = "/opt/tinytorch/env"  # the servers' Python in the image (`./course hub`: STATE/env)
KIT = "/opt/tinytorch/kit"  # the learner kit in the image (STATE/kit)
CONFIG = "/etc/tinytorch/config"  # each role's Jupyter configuration (STATE/config)
ACCOUNTS = "/etc/tinytorch"  # passwd and group of the class, read through nss_wrapper (see the Dockerfile)
EXCHANGE = "/srv/nbgrader/exchange"  # nbgrader's exchange on the ReadWriteMany volume (STATE/exchange)
EXCHANGE_CLAIM = "tinytorch-exchange"
FIRST_UID = 2000  # the instructor's; learners follow in roster order (accounts of their own, as useradd makes)
# The exchange's layout, made before any user's server starts (an init container in every pod, as root):
# the root sticky (no account can rename or replace another's entries), the course's folders the
# instructor's, with the modes `./course hub` gives them (hub.EXCHANGE_FOLDERS).
EXCHANGE_LAYOUT = [(".", 0o1777, "root"), *((f"{{course}}/{name}".rstrip("/"), mode, "instructor")
                                            for name, mode in hub.EXCHANGE_FOLDERS.items())]


def exchange_layout(course_id):
    """(path below the exchange root, mode, owner role) of each folder `EXCHANGE_LAYOUT` makes."""
    return [(path.format(course=course_id), mode, owner) for path, mode, owner in EXCHANGE_LAYOUT]


def server_files(exchange, course_id):
    """ENV/etc/jupyter/: the files `hub.prepare_env` writes there, for an exchange at `exchange`."""
    return {
        # Terminals: a plain bash keeps the server's PATH (the servers' Python first).
        "jupyter_server_config.json": json.dumps(
            {"ServerApp": {"terminado_settings": {"shell_command": ["/bin/bash"]}}}, indent=1),
        "nbgrader_config.py": hub.exchange_config(exchange, course_id),
    }


def role_files(course):
    """{path below CONFIG: text}: what `hub.prepare_config` writes for the course at `course`."""
    with tempfile.TemporaryDirectory() as state:
        hub.prepare_config(Path(state), Path(course))
        config = Path(state) / "config"
        return {p.relative_to(config).as_posix(): p.read_text() for p in sorted(config.rglob("*")) if p.is_file()}


def class_uids(instructor, learners, previous=None):
    """{account: uid}: the instructor FIRST_UID, each learner the next free uid; `previous` (an earlier
    values.yaml's) is kept, so that adding learners never changes who owns which files."""
    uids = dict(previous or {})
    for name in [instructor, *learners]:
        if name not in uids:
            uids[name] = max([FIRST_UID - 1, *uids.values()]) + 1
    return uids


def accounts(uids):
    """The class's passwd and group files: an account and a group of its own per person, as useradd
    --user-group makes them on one machine (nbgrader names the owner of a submission from them)."""
    people = sorted(uids.items(), key=lambda item: item[1])
    passwd = ["root:x:0:0:root:/root:/bin/bash", *(f"{n}:x:{u}:{u}::{HOME}:/bin/bash" for n, u in people)]
    group = ["root:x:0:", *(f"{n}:x:{u}:" for n, u in people)]
    return "\n".join(passwd) + "\n", "\n".join(group) + "\n"


def layout_script(course_id, instructor_uid):
    """The init container's shell command: `exchange_layout` made (or put back) with `install -d`."""
    owners = {"root": 0, "instructor": instructor_uid}
    lines = ["set -eu"] + [
        f"install -d -o {owners[owner]} -g {owners[owner]} -m {mode:o} {posixpath.normpath(f'{EXCHANGE}/{path}')}"
        for path, mode, owner in exchange_layout(course_id)]
    return "\n".join(lines) + "\n"


HOOK = '''\
# The class's roles, as ./course hub's by_role on one machine (tinytorch_course/hub/hub_files/jupyterhub_config.py):
# each person's server runs as their own uid and group; a learner starts in their workspace and imports
# their own tinytorch; the instructor starts in the home that holds the course, and only the
# instructor's pod mounts the instructor's configuration.
from z2jh import get_config

tinytorch = get_config("custom.tinytorch")


def tinytorch_by_role(spawner):
    name = spawner.user.name
    if name not in tinytorch["uids"]:
        raise ValueError(f"{name} has no uid in custom.tinytorch.uids: add them to the roster and "
                         "run deploy/z2jh/generate.py again")
    spawner.uid = spawner.gid = spawner.fs_gid = tinytorch["uids"][name]
    role = "instructor" if name == tinytorch["instructor"] else "learner"
    others = tinytorch["config"] + "/" + ("learner" if role == "instructor" else "instructor") + "/"
    spawner.volume_mounts = {key: mount for key, mount in spawner.volume_mounts.items()
                             if not mount["mountPath"].startswith(others)}
    home = get_config("singleuser.storage.homeMountPath")
    environment = {"JUPYTER_CONFIG_PATH": tinytorch["config"] + "/" + role}
    if role == "learner":
        workspace = home + "/" + tinytorch["workspace"]
        spawner.notebook_dir = workspace
        environment["PYTHONPATH"] = workspace  # kernels import the learner's own tinytorch
        environment["TINYTORCH_WORKSPACE"] = workspace  # made from the kit on the first start (tinytorch-start)
    else:
        spawner.notebook_dir = home
    spawner.environment = {**spawner.environment, **environment}


c.KubeSpawner.pre_spawn_hook = tinytorch_by_role
'''


class Literal(str):
    """A string written as a YAML block (`|`), as a person would write a file's text."""


yaml.SafeDumper.add_representer(Literal, lambda dumper, text: dumper.represent_scalar(
    "tag:yaml.org,2002:str", text, style="|"))


def values(root, roster, instructor="instructor", image="tinytorch-singleuser:1", previous_uids=None):
    """The chart's values for the class of `roster` (a CSV with column id), as YAML text."""
    if not Path(roster).is_file():
        raise CourseError(f"no roster at {roster}: a CSV with columns id, first_name, last_name, email")
    if ":" not in image.rsplit("/", 1)[-1]:
        raise CourseError(f"the image {image!r} has no tag: give NAME:TAG, as pushed to the cluster's registry")
    learners = hub.read_roster(roster)
    if instructor in learners:
        raise CourseError(f"the instructor's account {instructor!r} is also on the roster")
    course_id = load_config(root).CourseDirectory.course_id
    uids = class_uids(instructor, learners, previous_uids)
    passwd, group = accounts(uids)
    files = {"class-passwd": (f"{ACCOUNTS}/passwd", passwd), "class-group": (f"{ACCOUNTS}/group", group)}
    for name, text in server_files(EXCHANGE, course_id).items():
        files["env-" + name.replace("_", "-").replace(".", "-")] = (f"{ENV}/etc/jupyter/{name}", text)
    for path, text in role_files(f"{HOME}/{hub.COURSE_FOLDER}").items():
        files[path.replace("/", "-").replace("_", "-").replace(".", "-")] = (f"{CONFIG}/{path}", text)
    image_name, image_tag = image.rsplit(":", 1)
    exchange_mount = {"name": "exchange", "mountPath": EXCHANGE}
    chart = {
        "custom": {"tinytorch": {"instructor": instructor, "uids": uids, "config": CONFIG, "workspace": KIT_NAME}},
        "hub": {
            "config": {
                "JupyterHub": {"authenticator_class": "generic-oauth"},
                "Authenticator": {"allowed_users": sorted([*learners, instructor]), "admin_users": [instructor]},
            },
            "extraConfig": {"tinytorch": Literal(HOOK)},
        },
        "singleuser": {
            "image": {"name": image_name, "tag": image_tag},
            "cmd": "tinytorch-start",
            "defaultUrl": "/lab",
            "uid": 65534,  # nobody, until the hook gives a server its person's uid (and no server to a stranger)
            "fsGid": 65534,
            "extraFiles": {key: {"mountPath": path, "stringData": Literal(text)}
                           for key, (path, text) in files.items()},
            "storage": {
                "extraVolumes": [{"name": "exchange", "persistentVolumeClaim": {"claimName": EXCHANGE_CLAIM}}],
                "extraVolumeMounts": [dict(exchange_mount)],
            },
            "initContainers": [{
                "name": "exchange-layout", "image": image, "securityContext": {"runAsUser": 0},
                "command": ["sh", "-c", Literal(layout_script(course_id, uids[instructor]))],
                "volumeMounts": [exchange_mount]}],
        },
    }
    header = ("# Zero to JupyterHub values of the TinyTorch class: written by deploy/z2jh/generate.py (do not edit;\n"
              "# run it again). The institution's login goes in a values file of its own (deploy/z2jh/README.md).\n")
    return header + yaml.safe_dump(chart, sort_keys=False, width=110)


def previous_uids(values_yaml):
    """The uids of an earlier values.yaml, or None."""
    if not Path(values_yaml).is_file():
        return None
    return yaml.safe_load(Path(values_yaml).read_text())["custom"]["tinytorch"]["uids"]


def grader_kernels(image):
    """The grader kernels' specs under `image`/share/jupyter/kernels, as `install_grader_kernel` makes
    them for the image's Python (the instructor's servers run the grader; learners cannot import it)."""
    code = ("import sys; sys.prefix, sys.executable = sys.argv[1:3]; "
            "from tinytorch_course.nbgrader_api import install_grader_kernel; install_grader_kernel()")
    subprocess.run([sys.executable, "-c", code, str(image), f"{ENV}/bin/python"], cwd=ROOT, check=True)


def write_values(root, roster, out, instructor="instructor", image="tinytorch-singleuser:1"):
    """`out`/values.yaml, keeping the uids of the one already there."""
    text = values(root, roster, instructor, image, previous_uids(Path(out) / "values.yaml"))
    (Path(out) / "values.yaml").write_text(text)


def write(root, roster, out, instructor="instructor", image="tinytorch-singleuser:1", log=print):
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    write_values(root, roster, out, instructor, image)  # first: it checks the roster and the image's name
    build = out / "image"
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir(parents=True)
    for name in ("Dockerfile", "tinytorch-start"):
        shutil.copy2(HERE / name, build / name)
    shutil.copy2(hub.FILES / "tinytorch_exchange.py", build / "tinytorch_exchange.py")  # learners' private submit
    make_workspace(root, build, log=lambda message: None)
    (build / f"{KIT_NAME}.zip").unlink()
    grader_kernels(build)
    shutil.copy2(HERE / "exchange-pvc.yaml", out / "exchange-pvc.yaml")
    log(f"wrote {build} (docker build -t {image} {build}), {out / 'values.yaml'} and {out / 'exchange-pvc.yaml'}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--roster", required=True, help="the class: a CSV with column id (as ./course hub)")
    parser.add_argument("--out", required=True, type=Path, help="where to write (an earlier values.yaml there "
                                                                "keeps its uids)")
    parser.add_argument("--instructor", default="instructor", help="the instructor's name (default: instructor)")
    parser.add_argument("--image", default="tinytorch-singleuser:1", help="the image, NAME:TAG, as pushed to "
                                                                          "the cluster's registry")
    parser.add_argument("--values-only", action="store_true", help="write only DIR/values.yaml (how "
                        "deploy/z2jh/values.yaml is made from example-roster.csv)")
    args = parser.parse_args(argv)
    try:
        (write_values if args.values_only else write)(ROOT, args.roster, args.out, args.instructor, args.image)
    except CourseError as error:
        sys.exit(f"error: {error}")


if __name__ == "__main__":
    main()
