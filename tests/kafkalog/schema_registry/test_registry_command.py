"""``kafkalog registry`` refuses a configuration it cannot run with before it starts anything, one
line naming the key; ``kafkalog registry-user`` writes a users file the registry reads."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from kafkalog.cli import main
from kafkalog.schema_registry.auth import BasicAuth, read_users


def test_a_registry_without_its_cluster_or_with_a_bad_setting_does_not_start(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["registry"], standalone_mode=True)
    assert result.exit_code == 1
    assert "error: flags:bootstrap: the cluster that holds the topic is needed (--bootstrap)" in result.output
    config = tmp_path / "registry.yaml"
    config.write_text("bootstrap: 127.0.0.1:9\ndefault_compatibility: SOMETIMES\n")
    result = runner.invoke(main, ["registry", "--config", str(config)])
    assert result.exit_code == 1
    assert f"{config}:default_compatibility: Invalid compatibility level" in result.output


def test_registry_user_writes_a_line_the_registry_reads(tmp_path: Path) -> None:
    users = tmp_path / "users"
    runner = CliRunner()
    result = runner.invoke(main, ["registry-user", "alice", "--file", str(users), "--password-stdin"], input="pw\n")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"added alice in {users}"
    result = runner.invoke(main, ["registry-user", "alice", "--file", str(users), "--password-stdin"], input="pw2\n")
    assert result.output.strip() == f"new password for alice in {users}"
    assert BasicAuth(read_users(users)).user("Basic YWxpY2U6cHcy") == "alice"  # alice:pw2
    result = runner.invoke(main, ["registry-user", "bob", "--file", str(users), "--password-stdin"], input="\n")
    assert result.exit_code == 1 and "the password may not be empty" in result.output
