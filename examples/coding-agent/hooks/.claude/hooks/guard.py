"""PreToolUse guard for Bash: refuse commands that destroy what they cannot undo.

Claude Code and dsh (the `hooks` plugin) both run it: the call's JSON arrives on
stdin, and a JSON answer on stdout denies the call with a reason the model reads.
"""

import json
import re
import sys

RULES = [
    (
        r"\brm\s+(-[a-zA-Z]*[rf][a-zA-Z]*\s+)+(/|~|\$HOME)(\s|$)",
        "rm -rf on / or the home directory",
    ),
    (r"\bgit\s+push\b.*\s(--force|-f)\b", "a force push"),
    (r"\bmkfs(\.\w+)?\b|\bdd\s+.*\bof=/dev/", "writing over a disk"),
]

call = json.load(sys.stdin)
command = call.get("tool_input", {}).get("command", "")
for pattern, what in RULES:
    if re.search(pattern, command):
        answer = {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": f"{what} is not allowed here; ask the user to run it",
            }
        }
        sys.stdout.write(json.dumps(answer) + "\n")
        break
