"""docker/ (no Docker engine here): every volume our image mounts exists in it, owned by the app."""

import re
import shlex
from pathlib import Path

import yaml

DOCKER = Path(__file__).resolve().parents[2] / "docker"


def run_commands(dockerfile: str) -> list[list[str]]:
    """Each shell command of each RUN instruction, as argv lists."""
    joined = re.sub(r"\\\n", " ", dockerfile)
    commands = []
    for line in joined.splitlines():
        if line.startswith("RUN "):
            for part in line[4:].split("&&"):
                commands.append(shlex.split(part))
    return commands


def test_every_mounted_directory_is_created_and_owned_by_the_app_user():
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    dockerfile = (DOCKER / "Dockerfile").read_text()
    commands = run_commands(dockerfile)
    created = {arg for cmd in commands if cmd[:1] == ["mkdir"] for arg in cmd[1:]}
    owned = {
        arg
        for cmd in commands
        if cmd[:1] == ["chown"] and cmd[1].split(":")[0] == "governance"
        for arg in cmd[2:]
    }
    assert "USER governance" in dockerfile.splitlines()
    assert ["useradd", "--create-home", "--uid", "10001", "governance"] in commands
    ours = {
        name: service
        for name, service in compose["services"].items()
        if service.get("build", {}).get("dockerfile") == "docker/Dockerfile"
    }
    optional = {name for name, service in ours.items() if service.get("profiles")}
    assert optional == {"follow"}  # started only with `--profile follow`
    for volume in ours["follow"]["volumes"]:
        target = volume.split(":")[1]
        assert target == "/var/lib/governance/media" or volume.endswith(":ro"), (
            f"the follower only reads transcripts: {volume}"
        )
    ours = {name: service for name, service in ours.items() if name not in optional}
    assert set(ours) == {"web", "worker", "beat"}
    targets = {
        volume.split(":")[1] for service in ours.values() for volume in service.get("volumes", [])
    }
    assert targets == {"/var/lib/governance/media"}
    for target in targets:
        assert target in created, f"{target} is not created in the image"
        assert target in owned, f"{target} is not chowned to the app user"
    # The media root the app writes to is the mounted one.
    assert ours["web"]["environment"]["GOVERNANCE_MEDIA_ROOT"] in targets
