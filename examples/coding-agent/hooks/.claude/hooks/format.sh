#!/bin/bash
# PostToolUse formatter for Edit and Write: format the file the tool just changed.
# Claude Code and dsh (the `hooks` plugin) both run it with the call's JSON on stdin.
file=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["tool_input"].get("file_path", ""))')
case "$file" in
  *.py) command -v ruff > /dev/null && ruff format --quiet "$file" ;;
  *.js|*.ts|*.tsx|*.json|*.css|*.md) command -v prettier > /dev/null && prettier --write --log-level warn "$file" ;;
esac
exit 0
