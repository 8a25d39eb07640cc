"""The README and docs/ show only commands that exist: each `./course ...` and `./learn ...` line of
their shell blocks answers `--help`, and every page of docs/ is linked from the README."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from tinytorch_course.kit.workspace import KIT_NAME, make_workspace
from conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "tinytorch_course" / "kit" / "README.md"]
WORD = re.compile(r"^[a-z][a-z0-9_-]*$")  # a subcommand or a fixed choice; placeholders are upper case


def shown_commands(text, program):
    """`{(subcommand words...)}` of every `program ...` line in the page's fenced shell blocks."""
    found = set()
    for block in re.findall(r"```(?:bash|sh|console)?\n(.*?)```", text, re.S):
        for line in block.splitlines():
            words = line.split("#")[0].split()
            if not words or words[0] != program:
                continue
            command = []
            for word in words[1:]:
                if not WORD.match(word):
                    break
                command.append(word)
            found.add(tuple(command))
    return found


def all_shown(program):
    return sorted({c for page in PAGES for c in shown_commands(page.read_text(), program)})


def test_the_readme_opens_with_the_two_commands():
    first = REPO.joinpath("README.md").read_text().split("```bash\n", 1)[1].split("```")[0].splitlines()
    assert [line.split("#")[0].strip() for line in first] == ["./course demo", "./course test"]


def test_every_docs_page_is_linked_from_the_readme():
    readme = REPO.joinpath("README.md").read_text()
    for page in sorted((REPO / "docs").glob("*.md")):
        assert f"(docs/{page.name})" in readme, f"docs/{page.name} is not linked from README.md"
    for target in re.findall(r"\]\(((?:docs/)?[\w./-]+\.md)(?:#[\w-]+)?\)", readme):
        assert (REPO / target).is_file(), f"README.md links to {target}, which does not exist"


@pytest.mark.parametrize("command", all_shown("./course"), ids=" ".join)
def test_every_course_command_shown_answers_help(command):
    if command[:1] == ("test",):
        return  # ./course test is pytest itself: this very run
    result = subprocess.run([sys.executable, "-m", "tinytorch_course", *command, "--help"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.startswith("usage: "), \
        f"./course {' '.join(command)} --help: exit {result.returncode}\n{result.stdout}{result.stderr}"


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return make_workspace(REPO, tmp_path_factory.mktemp("kit"), log=lambda message: None)[0]


@pytest.mark.parametrize("command", all_shown("./learn"), ids=" ".join)
def test_every_learn_command_shown_answers_help(kit, command, tmp_path):
    """`./learn lab --help` is JupyterLab's own help; the others are argparse's or a milestone's."""
    workspace = shutil.copytree(kit, tmp_path / KIT_NAME, symlinks=True)
    env = dict(os.environ, LEARN_PYTHON=sys.executable)
    env.pop("PYTHONPATH", None)
    result = subprocess.run([str(workspace / "learn"), *command, "--help"], cwd=workspace, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip(), \
        f"./learn {' '.join(command)} --help: exit {result.returncode}\n{result.stdout}{result.stderr}"
