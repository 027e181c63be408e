"""The image built from Debian packages and the consortium run from it, with podman.

deploy/build-image.sh makes the base image with mmdebstrap (no registry is needed) and builds
deploy/Dockerfile on it; deploy/container-consortium.sh runs compose.yaml's four services as
containers of that image and compares Protocol B's result with the image's own central
anonymization. Building takes minutes and reaches a Debian mirror and a package index, so the
test runs only when FEDANON_CONTAINER_TESTS=1 (the container lane of .ci/run sets it) and where
podman and mmdebstrap are installed; otherwise it is skipped with the reason.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
IMAGE = "localhost/fedanon-test:ci"
BASE_IMAGE = "localhost/fedanon-test-base:bookworm"


def _unavailable() -> str | None:
    if os.environ.get("FEDANON_CONTAINER_TESTS") != "1":
        return "set FEDANON_CONTAINER_TESTS=1 to build the image and run it (minutes; .ci/run's container lane)"
    missing = [tool for tool in ("podman", "mmdebstrap") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not installed (apt-get install podman runc mmdebstrap)"
    return None


REASON = _unavailable()
pytestmark = [pytest.mark.slow, pytest.mark.container,
              pytest.mark.skipif(REASON is not None, reason=str(REASON)), pytest.mark.timeout(1500)]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHON=sys.executable, PYTHONPATH=str(ROOT), IMAGE=IMAGE, BASE_IMAGE=BASE_IMAGE)


def _podman(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if "CONTAINERS_CONF" not in env and _restricted_host():
        env["CONTAINERS_CONF"] = str(ROOT / "deploy" / "podman" / "restricted-host.conf")
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=120, env=env)


@functools.cache
def _restricted_host() -> bool:
    probe = subprocess.run(["podman", "run", "--rm", "--network", "none", "--entrypoint", "/bin/true", BASE_IMAGE],
                           capture_output=True, text=True, timeout=120)
    return probe.returncode != 0


@pytest.fixture(scope="module")
def image() -> str:
    build = subprocess.run([str(ROOT / "deploy" / "build-image.sh")], capture_output=True, text=True,
                           timeout=1200, env=_env(), cwd=ROOT)
    assert build.returncode == 0, (build.stdout[-3000:], build.stderr[-3000:])
    assert f"built {IMAGE} on {BASE_IMAGE}" in build.stdout
    return IMAGE


def test_image_runs_fedanon_as_its_user_and_holds_only_the_install(image: str) -> None:
    config = json.loads(_podman("image", "inspect", image).stdout)[0]["Config"]
    assert config["User"] == "fedanon"
    assert config["Entrypoint"] == ["fedanon"]
    assert "50051/tcp" in config["ExposedPorts"]
    whoami = _podman("run", "--rm", "--health-cmd", "none", "--entrypoint", "id", image, "-u")
    assert whoami.returncode == 0, whoami.stderr
    assert whoami.stdout.strip() == "10001"
    # as root, to see every folder: the source tree was removed after the install, and no key or
    # config came in with the build context
    listing = _podman("run", "--rm", "--health-cmd", "none", "--user", "0", "--entrypoint", "sh", image, "-c",
                      "ls -A /opt/fedanon; find / -xdev \\( -name '*.key' -o -name 'run.toml' -o -name 'party.toml' \\) -print")
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.split() == ["README.md", "pyproject.toml", "venv"], listing.stdout


def test_consortium_from_the_image_equals_central_anonymization(image: str, tmp_path: Path) -> None:
    port_base = 51000 + (os.getpid() % 500) * 8
    env = dict(_env(), FEDANON_PORT_BASE=str(port_base))
    run = subprocess.run([str(ROOT / "deploy" / "container-consortium.sh"), str(tmp_path)], capture_output=True,
                         text=True, timeout=900, env=env)
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:])
    assert run.stdout.strip().splitlines()[-1].startswith("OK Protocol B over 4 containers")
    for service in ("clinic-a", "clinic-b", "clinic-c", "trust-center"):
        assert f"{service}: healthy" in run.stdout
    lines = (tmp_path / "compose" / "result.csv").read_text().splitlines()
    assert len(lines) == 1 + 30162
    report = json.loads((tmp_path / "compose" / "report.json").read_text())
    assert report["protocol"] == "B"
    # everything the run started is gone: no container, no network with its tag
    assert "fedanon-fa" not in _podman("network", "ls", "--format", "{{.Name}}").stdout
    assert _podman("ps", "-a", "--filter", f"ancestor={image}", "--format", "{{.Names}}").stdout.strip() == ""
