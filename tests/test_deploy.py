"""deploy/z2jh/: the class on Zero to JupyterHub. No image is built and no cluster runs here: the
values are checked against the chart's own schema, and everything the deployment shares with
`./course hub` against what `./course hub` itself writes (its `prepare`, run in a folder of the test
with the steps that need accounts, npm or an installation replaced)."""
import importlib.util
import json
import os
from pathlib import Path
import re
import shutil
import stat
import subprocess
from types import SimpleNamespace

import jsonschema
import pytest
from traitlets.config import Config
import yaml

from tinytorch_course import hub
from tinytorch_course.nbgrader_api import load_config
from tinytorch_course.workspace import KIT_NAME, learner_lock

REPO = Path(__file__).resolve().parent.parent
DEPLOY = REPO / "deploy" / "z2jh"
spec = importlib.util.spec_from_file_location("z2jh_generate", DEPLOY / "generate.py")
generate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(generate)
LEARNERS = ["ada", "grace"]  # deploy/z2jh/example-roster.csv


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
    grown = generate.class_uids("instructor", ["zoe", "grace", "ada"], uids)
    assert {name: grown[name] for name in uids} == uids and grown["zoe"] == max(uids.values()) + 1
    # the roster is checked as ./course hub checks it
    roster = tmp_path / "roster.csv"
    roster.write_text("id,first_name,last_name,email\nAda Lovelace,Ada,Lovelace,ada@example.org\n")
    with pytest.raises(hub.CourseError, match="cannot be system accounts"):
        generate.values(REPO, roster)
    roster.write_text("id,first_name,last_name,email\ninstructor,I,N,i@example.org\n")
    with pytest.raises(hub.CourseError, match="also on the roster"):
        generate.values(REPO, roster)
