#!/usr/bin/env python3
"""docs/walkthrough.md shows exactly the commands of the walk-through scripts (examples/*.sh).

A fenced ```sh block of docs/walkthrough.md that belongs to a walk-through follows a marker line

    <!-- walkthrough: examples/grpcurl.sh examples/curl.sh -->

naming the scripts it belongs to (a set-up block may belong to several). For each
script, the lines of its blocks, in page order, must equal the script's lines after
`set -euo pipefail`, comments included; blank lines and trailing spaces do not count.
examples/run-walkthroughs then runs the scripts, so every command the page shows has
run. Also: no shell block of the README or of that page holds a prompt (`$ `) or an
ellipsis (`…`), which a reader cannot paste; and each client example of the README (a ```rust,
```python or ```ts block) is an excerpt of a usage block of that client's own README,
which its test suite runs: its lines appear there in the same order, each whole or
without its trailing comment.

    python3 tests/docs/check_walkthroughs.py       from anywhere; exits 1 on a mismatch

Standard library only.
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
WALKTHROUGH = ROOT / "docs/walkthrough.md"
MARKER = re.compile(r"^<!-- walkthrough: (.+?) -->$")
FENCE = re.compile(r"^(```|~~~)")
SCRIPT_START = "set -euo pipefail"
CLIENT_READMES = {
    "rust": ROOT / "clients/rust/README.md",
    "python": ROOT / "clients/python/README.md",
    "ts": ROOT / "clients/typescript/README.md",
    "go": ROOT / "clients/go/README.md",
    "java": ROOT / "clients/java/README.md",
}


def meaningful(lines: list[str]) -> list[str]:
    return [line.rstrip() for line in lines if line.strip()]


def walkthrough_blocks(path: Path) -> tuple[dict[str, list[str]], list[str]]:
    """`path`'s walk-through lines per script, and what no shell block may hold."""
    per_script: dict[str, list[str]] = {}
    problems: list[str] = []
    name = path.relative_to(ROOT)
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    owners: list[str] | None = None
    while index < len(lines):
        line = lines[index]
        marker = MARKER.match(line)
        if marker:
            owners = marker.group(1).split()
            index += 1
            continue
        fence = FENCE.match(line)
        if not fence:
            if line.strip():
                owners = None
            index += 1
            continue
        language = line[3:].strip()
        end = index + 1
        while end < len(lines) and not lines[end].startswith(fence.group(1)):
            end += 1
        block = lines[index + 1 : end]
        if language in ("sh", "bash", "shell"):
            for number, text in enumerate(block, start=index + 2):
                if text.lstrip().startswith("$ "):
                    problems.append(f"{name}:{number}: a prompt ('$ ') cannot be pasted")
                if "…" in text:
                    problems.append(f"{name}:{number}: an ellipsis cannot be pasted")
            for owner in owners or []:
                per_script.setdefault(owner, []).extend(block)
        elif owners:
            problems.append(f"{name}:{index + 1}: a walk-through marker before a {language!r} block")
        owners = None
        index = end + 1
    return per_script, problems


def fenced_blocks(path: Path) -> list[tuple[str, int, list[str]]]:
    """Every fenced block of `path`: its language, first line number and lines."""
    blocks, lines, index = [], path.read_text(encoding="utf-8").splitlines(), 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if not fence:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and not lines[end].startswith(fence.group(1)):
            end += 1
        blocks.append((lines[index][3:].strip(), index + 2, lines[index + 1 : end]))
        index = end + 1
    return blocks


def same_code(excerpt: str, original: str) -> bool:
    """`excerpt` is `original`, or `original` without its trailing comment."""
    if excerpt == original:
        return True
    rest = original[len(excerpt) :] if original.startswith(excerpt) else ""
    return rest.lstrip().startswith(("//", "#")) and rest[:1].isspace()


def is_excerpt(excerpt: list[str], original: list[str]) -> bool:
    remaining = iter(line.strip() for line in original)
    return all(any(same_code(line, candidate) for candidate in remaining) for line in excerpt)


def client_example_problems() -> list[str]:
    problems = []
    for language, number, block in fenced_blocks(README):
        client_readme = CLIENT_READMES.get(language)
        if client_readme is None:
            continue
        excerpt = [line.strip() for line in block if line.strip()]
        originals = [lines for lang, _, lines in fenced_blocks(client_readme) if lang == language]
        if not any(is_excerpt(excerpt, original) for original in originals):
            problems.append(
                f"README.md:{number}: this {language} example is not an excerpt of a block of "
                f"{client_readme.relative_to(ROOT)} (copy its lines, in order)"
            )
    return problems


def script_body(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    if SCRIPT_START not in lines:
        raise SystemExit(f"{path.relative_to(ROOT)}: no '{SCRIPT_START}' line to start from")
    return lines[lines.index(SCRIPT_START) + 1 :]


def main() -> int:
    per_script, problems = walkthrough_blocks(WALKTHROUGH)
    in_readme, readme_problems = walkthrough_blocks(README)
    problems += readme_problems
    for script in sorted(in_readme):
        problems.append(f"README.md marks {script}: walk-throughs live in {WALKTHROUGH.name}")
    problems += client_example_problems()
    scripts = sorted((ROOT / "examples").glob("*.sh"))
    names = {str(script.relative_to(ROOT)) for script in scripts}
    for unknown in sorted(set(per_script) - names):
        problems.append(f"{WALKTHROUGH.name} names {unknown}, which is not a script under examples/")
    for script in scripts:
        name = str(script.relative_to(ROOT))
        shown = meaningful(per_script.get(name, []))
        runs = meaningful(script_body(script))
        if not shown:
            problems.append(f"{name}: {WALKTHROUGH.name} shows none of it (mark its blocks)")
        elif shown != runs:
            diff = difflib.unified_diff(shown, runs, WALKTHROUGH.name, name, lineterm="", n=1)
            problems.append(f"{name} differs from {WALKTHROUGH.name}:\n" + "\n".join(diff))
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    print(
        f"check_walkthroughs: {WALKTHROUGH.name} shows {', '.join(sorted(names))} exactly, "
        "and its client examples are excerpts of the clients' READMEs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
