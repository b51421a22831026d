#!/usr/bin/env python3
"""Checks the relative links of the project's Markdown files and the `DESIGN.md#anchor`
references of its source comments.

Usage: scripts/check-doc-links.py   (from anywhere; exits 1 and lists what is broken)

- A relative link `[text](path)` or `[text](path#anchor)` in a tracked `*.md` file must name
  an existing file or directory; an anchor must be a heading of that Markdown file, slugged as
  GitHub slugs headings (lower case, punctuation but `-` and `_` dropped, spaces to `-`,
  `-1`, `-2`, ... for repeats). Links with a scheme (`https:`, `mailto:`) are not checked.
- A `docs/DESIGN.md#anchor` (or `DESIGN.md#anchor`) in a tracked source file or script must
  name a heading of docs/DESIGN.md.
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+(?:\([^()]*\))?)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def tracked(*patterns):
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", *patterns], cwd=ROOT, capture_output=True, text=True, check=True)
    return [p for p in out.stdout.split("\n") if p]


def slug(heading):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    text = text.lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, found, fence = {}, set(), False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if FENCE.match(line):
                    fence = not fence
                    continue
                m = None if fence else re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
                if m:
                    s = slug(m.group(2))
                    n = seen.get(s, 0)
                    seen[s] = n + 1
                    found.add(s if n == 0 else f"{s}-{n}")
        cache[path] = found
    return cache[path]


def check_target(src, target, errors, where):
    path, _, anchor = target.partition("#")
    full = os.path.normpath(os.path.join(os.path.dirname(os.path.join(ROOT, src)), path)) if path else os.path.join(ROOT, src)
    if not os.path.exists(full):
        errors.append(f"{where}: {target}: no such file")
        return
    if anchor and full.endswith(".md") and anchor not in anchors(full):
        errors.append(f"{where}: {target}: no heading with anchor #{anchor}")


def main():
    errors = []
    for md in tracked("*.md"):
        fence = False
        with open(os.path.join(ROOT, md), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if FENCE.match(line):
                    fence = not fence
                    continue
                if fence:
                    continue
                for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
                    target = m.group(1)
                    if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                        continue
                    check_target(md, target, errors, f"{md}:{n}")
    design = os.path.join(ROOT, "docs", "DESIGN.md")
    for src in tracked("*.rs", "*.sh", "*.py", "*.toml"):
        if src == "scripts/check-doc-links.py":
            continue
        with open(os.path.join(ROOT, src), encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                for m in re.finditer(r"DESIGN\.md#([A-Za-z0-9_-]+)", line):
                    if m.group(1) not in anchors(design):
                        errors.append(f"{src}:{n}: DESIGN.md#{m.group(1)}: no heading with that anchor in docs/DESIGN.md")
    for e in errors:
        print(e)
    if errors:
        print(f"check-doc-links: {len(errors)} broken", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
