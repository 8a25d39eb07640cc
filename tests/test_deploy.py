"""deploy/z2jh/: the class on Zero to JupyterHub. No image is built and no cluster runs here: the
values are checked against the chart's own schema, and everything the deployment shares with
`./course hub` against what `./course hub` itself writes (its `prepare`, run in a folder of the test
with the steps that need accounts, npm or an installation replaced)."""
import ctypes
import importlib.util
import json
import os
from pathlib import Path
import re
import shutil
import stat
import subprocess
import sys
from types import ModuleType, SimpleNamespace

import jsonschema
import pytest
from traitlets.config import Config
import yaml

from tinytorch_course.hub import hub
from tinytorch_course.nbgrader_api import load_config
from tinytorch_course.kit.workspace import KIT_NAME, learner_lock

REPO = Path(__file__).resolve().parent.parent
DEPLOY = REPO / "deploy" / "z2jh"
spec = importlib.util.spec_from_file_location("z2jh_generate", DEPLOY / "generate.py")
generate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(generate)
LEARNERS = ["ada", "grace"]  # deploy/z2jh/example-roster.csv
pytestmark = pytest.mark.xdist_group("deploy")  # one worker makes the one-machine hub and the image folder, once


def load(path):
    return yaml.safe_load(Path(path).read_text())


def helm_merge(defaults, values):
    """What helm validates: the chart's defaults with the user's values over them (maps merge, a
    null removes the key, anything else replaces)."""
    merged = dict(defaults)
    for key, value in values.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = helm_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def chart_errors(values):
    schema = load(DEPLOY / "chart" / "values.schema.yaml")
    merged = helm_merge(load(DEPLOY / "chart" / "values.yaml"), values)
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in jsonschema.Draft7Validator(schema).iter_errors(merged)]


@pytest.fixture(scope="module")
def values():
    return load(DEPLOY / "values.yaml")


def test_the_values_pass_the_charts_schema(values):
    assert chart_errors(values) == []
    # the schema does check them: a misspelt key, or a uid that is not a number, fails
    misspelt = helm_merge(values, {"singleuser": {"extraFile": {}}})
    assert any("extraFile" in error for error in chart_errors(misspelt))
    assert any(error.startswith("singleuser.uid")
               for error in chart_errors(helm_merge(values, {"singleuser": {"uid": "2000"}})))


def test_the_schema_copy_names_its_source():
    for name in ("values.schema.yaml", "values.yaml"):
        header = (DEPLOY / "chart" / name).read_text().splitlines()[:2]
        assert "zero-to-jupyterhub-k8s" in header[0] and f"jupyterhub/{name}" in header[0]
        assert re.search(r"chart version \d+\.\d+\.\d+ .*commit [0-9a-f]{40}", header[1]), header


def test_the_committed_values_are_what_generate_writes(values):
    """deploy/z2jh/values.yaml is generate.py's output for the example roster: a change of the hub's
    configuration, the course id or the generator shows here until the file is written again."""
    fresh = generate.values(REPO, DEPLOY / "example-roster.csv")
    assert (DEPLOY / "values.yaml").read_text() == fresh, (
        "deploy/z2jh/values.yaml is stale: write it again with .venv/bin/python deploy/z2jh/generate.py "
        "--roster deploy/z2jh/example-roster.csv --out deploy/z2jh --values-only")


def test_uids_are_per_person_and_kept_when_the_class_grows(values, tmp_path):
    uids = values["custom"]["tinytorch"]["uids"]
    assert list(uids) == ["instructor", *LEARNERS]
    assert len(set(uids.values())) == len(uids) and min(uids.values()) >= generate.FIRST_UID
    files = values["singleuser"]["extraFiles"]
    passwd, group = (files[key]["stringData"].splitlines()[1:] for key in ("class-passwd", "class-group"))
    assert {line.split(":")[0]: line.split(":")[2:4] for line in passwd} == {
        name: [str(uid), str(uid)] for name, uid in uids.items()}  # a group of one's own, as useradd --user-group
    assert {line.split(":")[0]: int(line.split(":")[2]) for line in group} == uids
    # a later roster, reordered and longer: everyone keeps their uid, the newcomer gets the next one
    roster = tmp_path / "roster.csv"
    roster.write_text("id,first_name,last_name,email\nzoe,Z,A,z@example.org\ngrace,G,H,g@example.org\n"
                      "ada,A,L,a@example.org\n")
    (tmp_path / "values.yaml").write_text((DEPLOY / "values.yaml").read_text())
    generate.write_values(REPO, roster, tmp_path)
    grown = load(tmp_path / "values.yaml")["custom"]["tinytorch"]["uids"]
    assert {name: grown[name] for name in uids} == uids and grown["zoe"] == max(uids.values()) + 1
    # the roster is checked as ./course hub checks it
    roster.write_text("id,first_name,last_name,email\nAda Lovelace,Ada,Lovelace,ada@example.org\n")
    with pytest.raises(hub.CourseError, match="cannot be system accounts"):
        generate.values(REPO, roster)
    roster.write_text("id,first_name,last_name,email\ninstructor,I,N,i@example.org\n")
    with pytest.raises(hub.CourseError, match="also on the roster"):
        generate.values(REPO, roster)


@pytest.fixture(scope="module")
def one_machine(tmp_path_factory):
    """What `./course hub` lays out for the example class: its own `prepare`, in a folder of the
    test, with accounts faked (homes under the folder, owned by this user) and the steps that
    install (venv and uv, npm, the grader kernels) or make the instructor's gradebook left out."""
    base = tmp_path_factory.mktemp("one-machine")
    root, state, homes = base / "course", base / "state", base / "homes"
    root.mkdir(mode=0o750)  # closed to others already: prepare leaves the repository's own mode alone
    for entry in REPO.iterdir():
        (root / entry.name).symlink_to(entry)
    roster = base / "roster.csv"
    roster.write_text((DEPLOY / "example-roster.csv").read_text())

    def account(name):
        return SimpleNamespace(pw_name=name, pw_dir=str(homes / name), pw_uid=os.getuid(), pw_gid=os.getgid())

    def run(command, what, **kwargs):
        if "venv" in command:
            Path(command[-1]).mkdir(parents=True)
        if any("sysconfig" in part for part in command):
            site = state / "env" / "site-packages"
            site.mkdir(parents=True, exist_ok=True)
            return f"{site}\n"
        return ""

    def course(root, instructor, roster_csv, log):
        folder = hub.course_folder(instructor)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    fakes = {"run": run, "ensure_account": lambda name, homes, log: None, "prepare_course": course,
             "prepare_proxy": lambda state, log: state / "proxy", "closed_folder": lambda python: None}
    with pytest.MonkeyPatch.context() as patch:
        for name, fake in fakes.items():
            patch.setattr(hub, name, fake)
        patch.setattr(hub.pwd, "getpwnam", account)
        patch.setattr(hub.os, "geteuid", lambda: 0)
        umask = os.umask(0o022)
        try:
            config = hub.prepare(root, state, roster=roster, homes=homes, log=lambda message: None)
        finally:
            os.umask(umask)
        roles = {name: by_role(config, name) for name in ["instructor", *LEARNERS]}
    return SimpleNamespace(state=state, homes=homes, roles=roles,
                           course=homes / "instructor" / hub.COURSE_FOLDER, exchange=state / "exchange")


def by_role(config_file, name):
    """(notebook_dir, environment) that the one-machine hub's pre_spawn_hook gives `name`'s server."""
    c = Config()
    exec(compile(Path(config_file).read_text(), str(config_file), "exec"),
         {"get_config": lambda: c, "__file__": str(config_file)})
    spawner = SimpleNamespace(user=SimpleNamespace(name=name), environment={}, notebook_dir=None)
    c.Spawner.pre_spawn_hook(spawner)
    return spawner.notebook_dir, spawner.environment


def pod(values, name):
    """What the chart's hub gives `name`'s pod: the values' pre_spawn_hook (hub.extraConfig) run on a
    spawner holding the volume mounts the chart makes from singleuser.extraFiles and extraVolumeMounts."""
    merged = helm_merge(load(DEPLOY / "chart" / "values.yaml"), values)

    def get_config(key, default=None):
        found = merged
        for part in key.split("."):
            if not isinstance(found, dict) or part not in found:
                return default
            found = found[part]
        return found

    c, z2jh = Config(), ModuleType("z2jh")  # the chart's hub gives its configuration `c` and the module z2jh
    z2jh.get_config = get_config
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "z2jh", z2jh)
        exec(compile(values["hub"]["extraConfig"]["tinytorch"], "hub.extraConfig.tinytorch", "exec"), {"c": c})
    files = merged["singleuser"]["extraFiles"]
    mounts = {f"{i}-files": {"mountPath": f["mountPath"], "subPath": key, "name": "files"}
              for i, (key, f) in enumerate(files.items())}
    mounts.update({f"{i}-{m['name']}": m for i, m in enumerate(merged["singleuser"]["storage"]["extraVolumeMounts"])})
    spawner = SimpleNamespace(user=SimpleNamespace(name=name), environment={}, notebook_dir=None,
                              volume_mounts=mounts, uid=merged["singleuser"]["uid"], gid=None,
                              fs_gid=merged["singleuser"]["fsGid"])
    c.KubeSpawner.pre_spawn_hook(spawner)
    spawner.files = {m["mountPath"]: files[m["subPath"]]["stringData"] for m in spawner.volume_mounts.values()
                     if m["name"] == "files"}
    return spawner


def mode_tree(folder):
    """{path below `folder`: mode bits, sticky and setgid included} of `folder` and every folder in it."""
    return {(p.relative_to(folder).as_posix() if p != folder else "."): stat.S_IMODE(p.stat().st_mode)
            for p in [Path(folder), *sorted(Path(folder).rglob("*"))] if p.is_dir()}


def test_each_role_gets_the_servers_the_hub_gives_it(one_machine, values):
    """Where each server starts, which Jupyter configuration it reads (the same files, from
    hub.prepare_config and prepare_env), and what its kernels import: as on one machine."""
    state, homes = one_machine.state, one_machine.homes
    exchange_here = str(one_machine.exchange)
    course_here = str(one_machine.course)
    course_pod = f"{generate.HOME}/{hub.COURSE_FOLDER}"
    uids = values["custom"]["tinytorch"]["uids"]
    for name in ["instructor", *LEARNERS]:
        spawner = pod(values, name)
        role = "instructor" if name == "instructor" else "learner"
        here_dir, here_env = one_machine.roles[name]
        home = homes / name

        def in_pod(path):
            return (str(path).replace(str(home), generate.HOME).replace(str(state / "config"), generate.CONFIG))

        assert spawner.notebook_dir == in_pod(here_dir), name
        for key in set(here_env) - {"PATH"}:  # PATH: the image's ENV (checked with the Dockerfile)
            assert spawner.environment[key] == in_pod(here_env[key]), (name, key)
        assert spawner.uid == spawner.gid == spawner.fs_gid == uids[name]
        # the role's configuration files, and no other role's: what prepare_config wrote for it
        config_here = state / "config" / role
        mine = {path[len(generate.CONFIG) + 1:]: text for path, text in spawner.files.items()
                if path.startswith(generate.CONFIG + "/")}
        assert mine == {f"{role}/{p.relative_to(config_here).as_posix()}":
                        p.read_text().replace(course_here, course_pod)
                        for p in config_here.rglob("*") if p.is_file()}, name
        # the servers' Python's own configuration: what prepare_env wrote into env/etc/jupyter
        etc_here = state / "env" / "etc" / "jupyter"
        assert {path: text for path, text in spawner.files.items() if path.startswith(generate.ENV)} == {
            f"{generate.ENV}/etc/jupyter/{p.name}": p.read_text().replace(exchange_here, generate.EXCHANGE)
            for p in etc_here.iterdir()}, name
        assert {m["mountPath"] for m in spawner.volume_mounts.values() if m["name"] == "exchange"} == {
            generate.EXCHANGE}
    with pytest.raises(ValueError, match="no uid"):
        pod(values, "stranger")


def test_the_exchange_is_laid_out_with_the_hubs_modes(one_machine, tmp_path):
    """The init container's script, run here on a folder, makes the layout generate.py states, and
    that layout is the one `./course hub` makes for one machine."""
    course_id = load_config(REPO).CourseDirectory.course_id
    script = generate.layout_script(course_id, os.getuid()).replace(generate.EXCHANGE, str(tmp_path / "x"))
    if os.geteuid() != 0:  # (the init container runs as root; here the root's folders become this user's)
        script = script.replace("-o 0 -g 0", f"-o {os.getuid()} -g {os.getgid()}")
    subprocess.run(["sh", "-c", script], check=True)
    subprocess.run(["sh", "-c", script], check=True)  # every pod runs it: a second run changes nothing
    made = mode_tree(tmp_path / "x")
    assert made == {path: mode for path, mode, owner in generate.exchange_layout(course_id)}
    assert made["."] & stat.S_ISVTX, "the exchange root needs the sticky bit"
    here = mode_tree(one_machine.exchange)
    if not here["."] & stat.S_ISVTX:
        pytest.skip(f"./course hub still makes exchange/ {oct(here['.'])} without the sticky bit "
                    "(issue 38 item 1 not merged): nothing to compare the layout with")
    assert made == here


def dockerfile(path):
    """The Dockerfile's instructions as (INSTRUCTION, arguments), continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", Path(path).read_text())
    return [tuple(line.split(None, 1)) for line in text.splitlines() if line.strip() and not line.startswith("#")]


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """The image's build context as generate.py writes it for the example class."""
    out = tmp_path_factory.mktemp("z2jh")
    generate.write(REPO, DEPLOY / "example-roster.csv", out, log=lambda message: None)
    return out / "image"


def test_the_image_holds_the_kit_and_installs_exactly_its_lock(image, one_machine, values):
    steps = dockerfile(image / "Dockerfile")
    copies = {}
    for instruction, arguments in steps:
        if instruction == "COPY":
            *sources, target = arguments.split()
            for source in sources:
                assert (image / source).exists(), f"the Dockerfile copies {source}, which generate.py does not write"
                copies[source] = target
    lock = (image / KIT_NAME / "requirements.lock").read_text()
    assert lock == learner_lock((REPO / "requirements.lock").read_text())
    assert lock == (one_machine.state / "requirements.lock").read_text()  # what ./course hub installs in env/
    installs = [command for instruction, arguments in steps if instruction == "RUN"
                for command in arguments.split("&&") if "pip install" in command]
    assert len(installs) == 1, installs
    words = installs[0].split()
    options = words[words.index("install") + 1:]
    assert "--no-deps" in options and options[options.index("-r") + 1] == copies[f"{KIT_NAME}/requirements.lock"]
    assert [w for w in options if not w.startswith("-") and w != copies[f"{KIT_NAME}/requirements.lock"]] == [], (
        "the image installs only the kit's lock")
    assert words[0] == f"{generate.ENV}/bin/python"
    assert copies[KIT_NAME] == generate.KIT and copies["tinytorch-start"] == "/usr/local/bin/tinytorch-start"
    # JupyterLab's settings overrides and the grader kernels, where ./course hub puts them in env/
    overrides = copies[f"{KIT_NAME}/tinytorch_kit/lab-settings/overrides.json"]
    here = one_machine.state / "env" / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    assert overrides == f"{generate.ENV}/{here.relative_to(one_machine.state / 'env')}"
    assert (image / KIT_NAME / "tinytorch_kit" / "lab-settings" / "overrides.json").read_text() == here.read_text()
    assert copies["share/jupyter/kernels"] == f"{generate.ENV}/share/jupyter/kernels"
    kernels = {p.parent.name: json.loads(p.read_text())
               for p in (image / "share" / "jupyter" / "kernels").glob("*/kernel.json")}
    assert set(kernels) == {"tinytorch-grader", "tinytorch-sandbox"}
    assert all(k["argv"][0] == f"{generate.ENV}/bin/python" for k in kernels.values())
    # what ./course hub adds to env/'s site-packages, the image adds to its own: the course's code,
    # importable from the instructor's home only (tinytorch-course.pth)
    site = one_machine.state / "env" / "site-packages"
    assert [p.name for p in site.iterdir() if f"/{p.name}" not in (image / "Dockerfile").read_text()] == []
    assert (site / "tinytorch-course.pth").read_text().strip() == str(one_machine.course)
    assert f"echo {generate.HOME}/{hub.COURSE_FOLDER} >" in (image / "Dockerfile").read_text()
    env = dict(re.findall(r"(\w+)=(\S+)", next(a for i, a in steps if i == "ENV")))
    assert env["PATH"].startswith(f"{generate.ENV}/bin:") and env["HOME"] == generate.HOME
    assert {env["NSS_WRAPPER_PASSWD"], env["NSS_WRAPPER_GROUP"]} <= set(pod(values, "ada").files)
    assert json.loads(dict(steps)["CMD"]) == [values["singleuser"]["cmd"]]
    image_name = f"{values['singleuser']['image']['name']}:{values['singleuser']['image']['tag']}"
    assert [c["image"] for c in values["singleuser"]["initContainers"]] == [image_name]


def test_a_learners_first_start_makes_the_hubs_workspace(image, one_machine, tmp_path):
    """tinytorch-start, run as a pod runs it, against ./course hub's provision_workspace: the same
    files, modes and links; made once, and then the server starts with the spawner's arguments."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "jupyterhub-singleuser").write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/started\n')
    (fake_bin / "jupyterhub-singleuser").chmod(0o755)
    workspace = tmp_path / "home" / KIT_NAME
    workspace.parent.mkdir()
    environment = {"PATH": f"{fake_bin}:/usr/bin:/bin", "TINYTORCH_KIT": str(image / KIT_NAME),
                   "TINYTORCH_ENV": str(one_machine.state / "env"), "TINYTORCH_WORKSPACE": str(workspace)}
    start = [str(image / "tinytorch-start"), "--port=8888"]
    subprocess.run(start, env=environment, check=True)
    assert (tmp_path / "started").read_text() == "--port=8888\n"

    def tree(folder):
        entries = {}
        for path in sorted(folder.rglob("*")):
            key = path.relative_to(folder).as_posix()
            if path.is_symlink():
                entries[key] = ("link", os.readlink(path))
            elif path.is_dir():
                entries[key] = ("folder",)
            else:
                entries[key] = ("file", path.read_bytes(), bool(path.stat().st_mode & stat.S_IXUSR))
        return entries

    made, hubs = tree(workspace), tree(one_machine.homes / "ada" / KIT_NAME)
    assert made.keys() == hubs.keys()
    assert [k for k in made if made[k] != hubs[k]] == []
    assert made["modules"] == ("folder",) and made["nbgrader_config.py"][0] == "file"
    (workspace / "modules" / "mine.txt").write_text("a learner's work")
    subprocess.run(start, env=environment, check=True)
    assert (workspace / "modules" / "mine.txt").read_text() == "a learner's work"
    del environment["TINYTORCH_WORKSPACE"]  # the instructor's server: no workspace
    shutil.rmtree(workspace)
    subprocess.run(start, env=environment, check=True)
    assert not workspace.exists()


def loadable(library):
    try:
        ctypes.CDLL(library)
        return True
    except OSError:
        return False


@pytest.mark.skipif(not loadable("libnss_wrapper.so"),
                    reason="libnss_wrapper is not installed (Debian: apt-get install libnss-wrapper)")
def test_the_image_names_each_uid_from_the_class_files(values, tmp_path):
    """As the image's ENV sets it up: through nss_wrapper and the class's passwd and group files, a
    process's uid has its person's name (nbgrader's submit and collect look them up)."""
    steps = dockerfile(DEPLOY / "Dockerfile")
    env = dict(re.findall(r"(\w+)=(\S+)", next(a for i, a in steps if i == "ENV")))
    files = pod(values, "instructor").files
    for variable in ("NSS_WRAPPER_PASSWD", "NSS_WRAPPER_GROUP"):
        (tmp_path / variable).write_text(files[env[variable]])
    code = ("import grp, json, pwd, sys; print(json.dumps({u: [pwd.getpwuid(u).pw_name, grp.getgrgid(u).gr_name, "
            "pwd.getpwuid(u).pw_dir] for u in json.loads(sys.argv[1])}))")
    uids = values["custom"]["tinytorch"]["uids"]
    named = subprocess.run(
        [sys.executable, "-c", code, json.dumps(list(uids.values()))], capture_output=True, text=True, check=True,
        env={"PATH": os.environ["PATH"], "LD_PRELOAD": env["LD_PRELOAD"],
             "NSS_WRAPPER_PASSWD": str(tmp_path / "NSS_WRAPPER_PASSWD"),
             "NSS_WRAPPER_GROUP": str(tmp_path / "NSS_WRAPPER_GROUP")}).stdout
    assert json.loads(named) == {str(uid): [name, name, generate.HOME] for name, uid in uids.items()}
