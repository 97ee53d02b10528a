#!/usr/bin/env python3
"""Every link of the repository's front documents resolves inside the repository.

README.md is strict: each of its links must name a file or folder of the repository
(and, with `#anchor`, a heading there); a link out of it (http, mailto) is an error,
since a reader of a clone, an archive or a mirror has only the repository. The other
documents (CONTRIBUTING.md, CODE_STYLE.md, docs/, the READMEs of bench/, faults/,
deploy/, helm/idemd/ and clients/) may link out; their links into the repository must
resolve the same way. Links inside code (fenced blocks, `spans`) are not links.

    python3 tests/docs/check_links.py               those documents; exits 1 on a dead link
    python3 tests/docs/check_links.py FILE.md ...   these (README.md is always strict)

Standard library only.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[2]
STRICT = {ROOT / "README.md"}
DOCUMENTS = [
    "README.md",
    "CONTRIBUTING.md",
    "CODE_STYLE.md",
    "docs/*.md",
    "bench/README.md",
    "faults/README.md",
    "deploy/README.md",
    "helm/idemd/README.md",
    "clients/*/README.md",
]
# [text](target) and ![alt](target), the target up to a space (a title may follow).
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
AUTOLINK = re.compile(r"<((?:https?|mailto):[^>\s]+)>")
BARE_URL = re.compile(r"(?<![(<\w])(?:https?://|www\.)[^\s)>\]]+")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def outside_fences(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, with their numbers."""
    lines, fence = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.lstrip()
        if fence:
            if stripped.startswith(fence):
                fence = None
            continue
        if stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            lines.append((number, ""))
            continue
        lines.append((number, line))
    return lines


def paragraphs(text: str) -> list[tuple[int, str]]:
    """The paragraphs outside fenced code, each joined onto one line (a link's text
    may wrap) with its first line's number, inline code spans blanked; headings,
    table rows and list items start paragraphs of their own."""
    found: list[tuple[int, str]] = []
    current: list[str] = []
    start = 0
    for number, line in outside_fences(text) + [(0, "")]:
        stripped = line.strip()
        new_block = not stripped or HEADING.match(line) or stripped.startswith(("|", "- ", "* "))
        if new_block and current:
            joined = " ".join(current)
            found.append((start, re.sub(r"(`+)(?:(?!\1).)+?\1", "``", joined)))
            current = []
        if stripped:
            if not current:
                start = number
            current.append(stripped)
    return found


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text, lowercased, punctuation dropped,
    spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in outside_fences(path.read_text(encoding="utf-8")):
        found.update(HTML_ANCHOR.findall(line))
        heading = HEADING.match(line)
        if not heading:
            continue
        base = slug(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def check(path: Path) -> list[str]:
    problems = []
    strict = path in STRICT
    name = path.relative_to(ROOT)
    for number, line in paragraphs(path.read_text(encoding="utf-8")):
        targets = INLINE_LINK.findall(line) + AUTOLINK.findall(line)
        if strict:
            targets += BARE_URL.findall(INLINE_LINK.sub("", line))
        for target in targets:
            where = f"{name}:{number}: {target}"
            if re.match(r"^(?:[a-z][a-z0-9+.-]*:|www\.)", target, re.I):
                if strict:
                    problems.append(f"{where}: links out of the repository")
                continue
            file_part, _, anchor = target.partition("#")
            resolved = (path.parent / unquote(file_part)).resolve() if file_part else path
            if resolved != ROOT and ROOT not in resolved.parents:
                problems.append(f"{where}: points outside the repository")
            elif not resolved.exists():
                problems.append(f"{where}: no such file or folder")
            elif anchor and resolved.suffix == ".md" and unquote(anchor) not in anchors(resolved):
                problems.append(f"{where}: no heading '#{anchor}' in {resolved.relative_to(ROOT)}")
    return problems


def main(arguments: list[str]) -> int:
    if arguments:
        paths = [Path(argument).resolve() for argument in arguments]
    else:
        paths = sorted({path for pattern in DOCUMENTS for path in ROOT.glob(pattern)})
    problems = [problem for path in paths for problem in check(path)]
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    print(f"check_links: every link of {len(paths)} documents resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
