"""requirements.lock, what `make deps` installs, is in step with the files it is made from.

The lock pins every dependency, transitive ones included; requirements.txt and
requirements-dev.txt pin the ones the project asks for by name. Editing either without
running `make lock` would leave the lock installing something else: these tests say so, with
no network (the resolver that makes the lock needs the package index; checking it does not).
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INPUTS = ("requirements.txt", "requirements-dev.txt")
LOCK = ROOT / "requirements.lock"

# name[extras]==version, then an optional environment marker.
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(?P<version>[^\s;]+)")


def _canonical(name: str) -> str:
    """The name as the package index compares names (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_lines(path: Path) -> list[str]:
    lines = []
    for raw in path.read_text().splitlines():
        line = raw.split(" #", 1)[0].strip()
        if line and not line.startswith(("#", "-r ", "--requirement ")):
            lines.append(line)
    return lines


def pins(path: Path) -> dict[str, str]:
    """{canonical name: version} of a requirements file; a line that is not an exact pin
    raises, naming it."""
    found = {}
    for line in _requirement_lines(path):
        pin = _PIN.match(line)
        if pin is None:
            raise ValueError(f"{path.name}: not pinned with ==: {line!r}")
        found[_canonical(pin["name"])] = pin["version"]
    return found


def _lock_problems(inputs: dict[str, str], lock: dict[str, str]) -> list[str]:
    problems = []
    for name, version in sorted(inputs.items()):
        if name not in lock:
            problems.append(f"{name}=={version} is not in the lock")
        elif lock[name] != version:
            problems.append(f"{name}=={version}, but the lock has {name}=={lock[name]}")
    return problems


def test_every_pin_of_the_inputs_is_in_the_lock_at_the_same_version():
    inputs = {name: version for file in INPUTS for name, version in pins(ROOT / file).items()}
    assert _lock_problems(inputs, pins(LOCK)) == [], "run `make lock`"


def test_the_lock_says_how_it_is_made():
    assert "make lock" in LOCK.read_text().splitlines()[1]


def test_a_pin_the_lock_lacks_or_holds_at_another_version_is_named(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text("django==5.2.19\n    # via -r requirements.txt\nasgiref==3.9.0\n")
    inputs = {"django": "5.2.20", "celery": "5.7.0", "asgiref": "3.9.0"}

    assert _lock_problems(inputs, pins(lock)) == [
        "celery==5.7.0 is not in the lock",
        "django==5.2.20, but the lock has django==5.2.19",
    ]


def test_a_requirement_without_an_exact_pin_is_refused(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# the app\nDjango==5.2.19\ncelery>=5\n")
    with pytest.raises(ValueError, match="not pinned with ==: 'celery>=5'"):
        pins(requirements)


def test_names_extras_and_markers_are_read_as_the_index_reads_them(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(
        "-r other.txt\npsycopg[binary]==3.3.9\nuvloop==0.23.0 ; sys_platform != 'win32'\n"
        "Django_Stubs.Ext==6.1.2  # a comment\n"
    )
    assert pins(requirements) == {
        "psycopg": "3.3.9",
        "uvloop": "0.23.0",
        "django-stubs-ext": "6.1.2",
    }


def test_the_environment_the_suite_runs_in_is_the_locks():
    """`make deps` installs the lock: a package at another version means the lock changed
    since, and `make deps` (or `make test`, which runs it) brings the environment in step."""
    wrong = []
    for name, version in sorted(pins(LOCK).items()):
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            wrong.append(f"{name}=={version} is not installed")
            continue
        if installed != version:
            wrong.append(f"{name}=={version}, but {installed} is installed")
    assert wrong == [], "run `make deps`"
