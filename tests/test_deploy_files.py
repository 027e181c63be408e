"""deploy/: the image, compose file, systemd unit and .dockerignore agree with the CLI and each other.

These checks need no container engine (building and running the image is the container lane,
tests/test_container_consortium.py): every command the files run parses with the real CLI
and is the documented one, users and ports line up, keys stay out of the build context, and
compose-init.sh's keys are readable by the container's uid and nobody else.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from fedanon.cli import build_parser
from fedanon.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
CONFIG = "/etc/fedanon/party.toml"


def _dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _instr(name: str) -> list[str]:
    return [rest for word, rest in _dockerfile() if word == name]


def _exec_form(text: str) -> list[str]:
    return json.loads(text[text.index("["):])


def _cli(argv: list[str]):
    args = build_parser().parse_args(argv)
    return args, args.handler.__name__


def _compose() -> dict:
    import yaml

    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def _unit() -> dict[str, list[str]]:
    values: dict[str, list[str]] = {}
    for line in (DEPLOY / "fedanon-party.service").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith(("#", "[")):
            key, _, value = line.partition("=")
            values.setdefault(key.strip(), []).append(value.strip())
    return values


# ---------------------------------------------------------------------------- image

def test_every_compose_service_gets_more_shared_memory_than_dockers_default() -> None:
    """64 MiB of /dev/shm (Docker's default) keeps Protocol C's helper in one process on tables
    beyond ~100,000 rows; compose gives each daemon 1 GiB."""
    units = {"kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30}
    for name, service in _compose()["services"].items():
        size = str(service.get("shm_size", "64mb")).lower()
        number, unit = size.rstrip("kmgb"), size[len(size.rstrip("kmgb")):]
        assert int(number) * units.get(unit, 1) >= 512 << 20, (name, size)


def test_image_runs_serve_as_non_root_user_with_fixed_uid() -> None:
    entry = _exec_form(_instr("ENTRYPOINT")[0])
    cmd = _exec_form(_instr("CMD")[0])
    assert entry == ["fedanon"]
    args, handler = _cli(cmd)
    assert handler == "_serve" and str(args.config) == CONFIG
    users = _instr("USER")
    assert users == ["fedanon"], "the daemon must not run as root"
    assert "ARG FEDANON_UID=10001" in (DEPLOY / "Dockerfile").read_text()
    useradd = next(rest for word, rest in _dockerfile() if word == "RUN" and "useradd" in rest)
    assert '--uid "${FEDANON_UID}"' in useradd and "fedanon" in useradd
    assert _dockerfile().index(("USER", "fedanon")) > max(i for i, (w, _) in enumerate(_dockerfile()) if w == "RUN")


def test_healthcheck_is_party_health_on_the_served_config() -> None:
    check = _instr("HEALTHCHECK")[0]
    argv = _exec_form(check)
    assert argv[0] == "fedanon"
    args, handler = _cli(argv[1:])
    assert handler == "_health" and str(args.config) == CONFIG


def test_image_copies_only_existing_sources_and_exposes_the_listen_port() -> None:
    for rest in _instr("COPY"):
        *sources, _dest = rest.split()
        for src in sources:
            assert (ROOT / src).exists(), src
            assert not _ignored(src), f"{src} is copied but excluded by .dockerignore"
    assert _instr("EXPOSE") == ["50051"]
    assert 'listen = "0.0.0.0:50051"' in (DEPLOY / "compose-init.sh").read_text()


def _ignored(path: str) -> bool:
    """Docker's .dockerignore rule: the last matching pattern wins; a pattern also covers a folder's contents."""
    result = False
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line[1:] if negate else line
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        glob = pattern.replace("**/", "*")  # fnmatch's * also crosses '/'
        if any(fnmatch.fnmatchcase(p, glob) or fnmatch.fnmatchcase(p, pattern) for p in prefixes):
            result = not negate
    return result


@pytest.mark.parametrize("path", [".git/config", ".venv/bin/python", "fedanon/__pycache__/x.pyc", "ca/ca.key",
                                  "deploy/compose/clinic-a/clinic-a.key", "clinic-a.toml", "certs/party.crt",
                                  "tests/test_x.py", "bench/results/x.json"])
def test_dockerignore_keeps_history_envs_keys_and_configs_out(path: str) -> None:
    assert _ignored(path)


@pytest.mark.parametrize("path", ["pyproject.toml", "README.md", "fedanon/cli/party.py",
                                  "fedanon/data/adult/adult.csv", "fedanon/proto/fedanon.proto"])
def test_dockerignore_keeps_what_the_image_needs(path: str) -> None:
    assert not _ignored(path)


# ---------------------------------------------------------------------------- compose

def test_compose_has_three_primaries_and_a_helper_matching_compose_init() -> None:
    services = _compose()["services"]
    init = (DEPLOY / "compose-init.sh").read_text()
    clinics = re.search(r"CLINICS=\(([^)]*)\)", init).group(1).split()
    helper = re.search(r"HELPER=(\S+);", init).group(1)
    assert sorted(services) == sorted(clinics + [helper]) and len(clinics) == 3


def test_compose_binds_ports_to_a_configurable_address_and_runs_the_image_user() -> None:
    compose = _compose()
    dockerfile_health = _exec_form(_instr("HEALTHCHECK")[0])
    host_ports = []
    for name, svc in compose["services"].items():
        (port,) = svc["ports"]
        bind, host_port, container_port = port.rsplit(":", 2)
        assert bind == "${FEDANON_BIND:-127.0.0.1}", f"{name} publishes on every interface"
        assert container_port == _instr("EXPOSE")[0]
        host_ports.append(host_port)
        assert svc["user"] == "${FEDANON_UID:-10001}:${FEDANON_GID:-10001}"
        assert svc["healthcheck"]["test"] == ["CMD", *dockerfile_health]
        (volume,) = svc["volumes"]
        source, target, mode = volume.split(":")
        assert source == f"./compose/{name}" and target == str(Path(CONFIG).parent) and mode == "ro"
        assert svc["read_only"] is True and svc["cap_drop"] == ["ALL"]
        assert svc["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert len(set(host_ports)) == len(host_ports)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown of the keys to the container uid needs root")
def test_compose_init_makes_configs_that_load_and_keys_only_the_container_uid_reads() -> None:
    base = Path(tempfile.mkdtemp(prefix="fedanon-compose-"))
    try:
        base.chmod(0o755)  # pytest's tmp_path is private to root; the container uid must reach the key
        _check_compose_init(base / "compose")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _check_compose_init(folder: Path) -> None:
    done = subprocess.run([str(DEPLOY / "compose-init.sh"), str(folder)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHON=sys.executable), timeout=120)
    assert done.returncode == 0, done.stderr
    for name in _compose()["services"]:
        assert cli_main(["party", "check-config", "--config", str(folder / name / "party.toml")]) == 0
        key = folder / name / f"{name}.key"
        info = key.stat()
        assert stat.S_IMODE(info.st_mode) == 0o400 and (info.st_uid, info.st_gid) == (10001, 10001)
        assert _readable_as(10001, key) and not _readable_as(10002, key)
        assert not (folder / name / "ca.key").exists(), "the CA key must not be mounted into a container"


def _readable_as(uid: int, path: Path) -> bool:
    """Open `path` in a child that has dropped to `uid` (what the container's user can do)."""
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            with open(path, "rb"):
                pass
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


# ---------------------------------------------------------------------------- systemd

def test_systemd_unit_runs_serve_from_the_venv_as_fedanon() -> None:
    unit = _unit()
    assert unit["User"] == ["fedanon"] and unit["Group"] == ["fedanon"]
    (exec_start,) = unit["ExecStart"]
    binary, *argv = shlex.split(exec_start)
    assert binary == "/opt/fedanon/venv/bin/fedanon", "Debian refuses system-wide pip: the unit uses a venv"
    args, handler = _cli(argv)
    assert handler == "_serve" and str(args.config) == CONFIG
    assert str(Path(CONFIG).parent) in unit["ReadOnlyPaths"][0].split()
    header = (DEPLOY / "fedanon-party.service").read_text()
    for step in ("useradd --system", "python3 -m venv /opt/fedanon/venv", "fedanon party health --config " + CONFIG):
        assert step in header, f"the unit's setup comment lacks {step!r}"
    manual = _deployment_docs()
    assert "useradd --system" in manual and "/opt/fedanon/venv" in manual


def _deployment_docs() -> str:
    """The manual's deployment pages (docs/deployment/), where the README's deployment text lives."""
    return "\n".join(p.read_text() for p in sorted((ROOT / "docs" / "deployment").glob("*.md")))


def test_manual_commands_for_the_image_parse() -> None:
    section = _deployment_docs()
    commands = re.findall(r"fedanon (party (?:serve|health|check-config) [^`\n)#]*)", section)
    assert len(commands) >= 4, "the deployment pages show too few fedanon party commands"
    for command in commands:
        _cli(shlex.split(command.strip()))


def test_container_consortium_runs_each_service_as_compose_does() -> None:
    """deploy/container-consortium.sh stands in for compose where no compose is installed: each
    container must get compose.yaml's hardening, shared memory, user and container port, so the
    container lane tests the deployment users get, not a laxer one."""
    script = (DEPLOY / "container-consortium.sh").read_text()
    run = script[script.index("podman run -d"):script.index("done", script.index("podman run -d"))]
    words = shlex.split(run.replace("\\\n", " "), comments=False)
    service = next(iter(_compose()["services"].values()))
    assert "--read-only" in words and service["read_only"] is True
    assert words[words.index("--tmpfs") + 1] == service["tmpfs"][0]
    assert words[words.index("--shm-size") + 1] == service["shm_size"].removesuffix("b")
    assert words[words.index("--cap-drop") + 1] == service["cap_drop"][0] == "ALL"
    assert words[words.index("--security-opt") + 1] == service["security_opt"][0].split(":")[0]
    assert "--user 10001:10001" in script and service["user"] == "${FEDANON_UID:-10001}:${FEDANON_GID:-10001}"
    container_port = service["ports"][0].rsplit(":", 1)[1]
    assert any(w.endswith(f":{container_port}") and w.startswith("127.0.0.1:") for w in words)
    assert f'SERVICES=({" ".join(_compose()["services"])})' in script
