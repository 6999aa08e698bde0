"""`context-governance`: the command that puts the approved operating limit where the agent
runs (Claude Code's status line and hooks). A thin HTTP client of the server: it imports no
Django, and its status-line path imports no HTTP code unless it must call the server."""

__version__ = "0.1.0"
