"""The `context-governance` console script: argument parsing and dispatch.

`statusline` skips argparse: it runs on every assistant message, so its path imports as
little as possible.
"""

from __future__ import annotations

import os
import sys


def _statusline() -> int:
    from context_governance_cli import statusline

    return statusline.main(sys.stdin.buffer, sys.stdout, os.environ)


def _parser():
    import argparse

    from context_governance_cli import __version__

    parser = argparse.ArgumentParser(
        prog="context-governance",
        description="Context Governance in the agent's loop: Claude Code's status line and "
        "hooks, against the approved operating limit. Server and token: "
        "CONTEXT_GOVERNANCE_URL and CONTEXT_GOVERNANCE_TOKEN, or `login`.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    login = commands.add_parser("login", help="save the server URL and a token (mode 0600)")
    login.add_argument("--url", required=True, help="e.g. https://governance.example.com")
    login.add_argument(
        "--token-stdin", action="store_true", help="read the token from stdin, not a prompt"
    )
    commands.add_parser("logout", help="remove the saved server and token")
    commands.add_parser("whoami", help="the server, workspace and where the token comes from")
    commands.add_parser("statusline", help="one status line from Claude Code's JSON on stdin")

    hook = commands.add_parser("hook", help="send a Claude Code or Codex hook's payload (stdin)")
    hook.add_argument(
        "--codex", action="store_true", help="Codex's hook (input and output in Codex's format)"
    )
    hook.add_argument("event", choices=["session-start", "pre-compact", "post-compact"])
    notify = commands.add_parser(
        "codex-notify", help="record a Codex turn (Codex's `notify` program; JSON argument)"
    )
    notify.add_argument("notification", help="the JSON Codex appends")

    for name, text in (
        ("install-hooks", "add the hooks and the status line to Claude Code's settings.json, "
         "or the notify program to Codex's config.toml"),
        ("uninstall-hooks", "remove exactly what install-hooks added"),
    ):  # fmt: skip
        sub = commands.add_parser(name, help=text)
        harness = sub.add_mutually_exclusive_group(required=True)
        harness.add_argument("--claude", action="store_true", help="Claude Code")
        harness.add_argument(
            "--codex", action="store_true", help="Codex CLI: $CODEX_HOME/config.toml (~/.codex)"
        )
        where = sub.add_mutually_exclusive_group()
        where.add_argument(
            "--project", metavar="DIR", help="DIR/.claude/settings.json (default: the current "
            "directory)"
        )  # fmt: skip
        where.add_argument(
            "--user", action="store_true", help="~/.claude/settings.json ($CLAUDE_CONFIG_DIR)"
        )
        sub.add_argument("--dry-run", action="store_true", help="show the diff, write nothing")
        if name == "install-hooks":
            sub.add_argument(
                "--command", dest="program", help="how settings.json should run this command "
                "(default: its full path)"
            )  # fmt: skip
            sub.add_argument(
                "--replace-statusline",
                action="store_true",
                help="replace an existing statusLine (uninstall-hooks restores it)",
            )
            sub.add_argument(
                "--replace-notify",
                action="store_true",
                help="Codex: replace an existing notify program (uninstall-hooks restores it)",
            )
    return parser


def _describe(answer: dict) -> str:
    """'Team A as editor-a (Editor)' from GET /api/v1/workspace/."""
    workspace = answer.get("workspace") or {}
    return f"{workspace.get('name', '?')} as {answer.get('user', '?')} ({answer.get('role', '?')})"


def _login(args) -> int:
    import getpass

    from context_governance_cli import client, config

    if args.token_stdin:
        token = sys.stdin.readline().strip()
    else:
        token = getpass.getpass("API token (Settings → API tokens): ").strip()
    url = args.url.rstrip("/")
    try:
        workspace = client.request("GET", url, token, "/api/v1/workspace/", timeout=10)
    except client.TokenRejected as exc:
        print(f"The server rejected the token: {exc}", file=sys.stderr)
        return 1
    except (client.ServerUnreachable, client.ServerError) as exc:
        print(f"Could not reach {url}: {exc}", file=sys.stderr)
        return 1
    config.write_private_json(config.config_path(), {"url": url, "token": token})
    print(
        f"Logged in to {url}, workspace {_describe(workspace)}. "
        f"Saved in {config.config_path()} (mode 0600)."
    )
    return 0


def _logout() -> int:
    from context_governance_cli import config

    try:
        config.config_path().unlink()
    except FileNotFoundError:
        print("Not logged in.")
        return 0
    print(f"Removed {config.config_path()}.")
    return 0


def _whoami() -> int:
    from context_governance_cli import client, config

    settings = config.load_settings()
    if not settings.configured:
        print("Not configured: set CONTEXT_GOVERNANCE_URL and CONTEXT_GOVERNANCE_TOKEN, or run "
              "`context-governance login`.", file=sys.stderr)  # fmt: skip
        return 1
    try:
        workspace = client.request("GET", settings.url, settings.token, "/api/v1/workspace/",
                                   timeout=10)  # fmt: skip
    except (client.TokenRejected, client.ServerUnreachable, client.ServerError) as exc:
        print(f"{settings.url} (from the {settings.source}): {exc}", file=sys.stderr)
        return 1
    print(f"{settings.url} (from the {settings.source}): workspace {_describe(workspace)}")
    return 0


def _plan(args, *, install: bool) -> list:
    """The changes to make: Claude Code's settings.json; or, for Codex, the `notify` line in
    config.toml and the lifecycle hooks in hooks.json."""
    import shlex

    from context_governance_cli import install as installer

    if not args.codex:
        path = installer.settings_path(user=args.user, project=args.project)
        if not install:
            return [installer.plan_uninstall(path)]
        command = args.program or installer.default_command()
        return [
            installer.plan_install(
                path, command=command, replace_statusline=args.replace_statusline
            )
        ]
    from context_governance_cli import codex_install

    config_path, hooks_path = codex_install.config_path(), codex_install.hooks_path()
    if not install:
        return [codex_install.plan_uninstall(config_path), installer.plan_uninstall(hooks_path)]
    argv = shlex.split(args.program) if args.program else codex_install.default_argv()[:1]
    return [
        codex_install.plan_install(
            config_path, argv=[*argv, "codex-notify"], replace=args.replace_notify
        ),
        installer.plan_install(
            hooks_path, command=shlex.join(argv), hook="hook --codex", statusline=False
        ),
    ]


def _apply(change, *, dry_run: bool, install: bool) -> None:
    from context_governance_cli import install as installer

    for note in change.notes:
        print(note, file=sys.stderr)
    if not change.changed:
        print(f"{change.path}: nothing to change.")
        if not dry_run and not install:
            installer.apply(change, install=False)
        return
    if dry_run:
        sys.stdout.write(change.diff() or f"{change.path} would be removed.\n")
        return
    installer.apply(change, install=install)
    verb = "Updated" if change.after is not None else "Removed"
    print(f"{verb} {change.path}.")


def _hooks(args, *, install: bool) -> int:
    from context_governance_cli import install as installer

    if args.codex and (args.project or args.user):
        print("--codex edits $CODEX_HOME/config.toml and hooks.json (default ~/.codex): "
              "--project and --user are for --claude.", file=sys.stderr)  # fmt: skip
        return 2
    try:
        changes = _plan(args, install=install)
    except installer.InstallError as exc:
        print(exc, file=sys.stderr)
        return 1
    for change in changes:
        _apply(change, dry_run=args.dry_run, install=install)
    if install and args.codex and not args.dry_run:
        print("Codex runs a user's hooks only once they are trusted (it keeps each hook's "
              "trusted hash in config.toml): review and trust the three hooks in Codex, or it "
              "lists them as untrusted and does not run them.", file=sys.stderr)  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["statusline"]:
        return _statusline()
    if argv[:1] == ["codex-notify"]:  # Codex appends the JSON; argparse is not needed
        from context_governance_cli import codex

        return codex.main(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "statusline":
        return _statusline()
    if args.command == "hook":
        from context_governance_cli import hooks

        return hooks.main(args.event, sys.stdin.buffer, codex=args.codex)
    if args.command == "login":
        return _login(args)
    if args.command == "logout":
        return _logout()
    if args.command == "whoami":
        return _whoami()
    return _hooks(args, install=args.command == "install-hooks")
