#!/usr/bin/env python3
"""Every relative link in README.md and docs/ resolves.

For each markdown link or image `[text](target)` outside code blocks and
inline code, in README.md and every .md under docs/: a relative target must
name an existing file or folder, and a `#fragment` on a markdown file (or
alone, meaning this file) must be one of that file's headings as GitHub
makes anchors of them (lower case; letters, digits, spaces, '-' and '_'
kept; spaces become '-'; a repeated heading gets -1, -2, ...). Absolute
URLs (scheme:) are not checked: the test never touches the network.

Usage: doc_links.py SOURCE_DIR. Exit 0 when every link resolves, 1 with
one line per broken link (FILE:LINE: target: why) otherwise.
"""
import os
import re
import sys

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`+[^`]*`+")


def strip_code(lines):
    """Yield (line number, text) of the lines outside fenced code blocks."""
    fence = None
    for no, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield no, line


def slug(text):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)                      # inline html
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    out = []
    for ch in text:
        if ch.isalnum() or ch in "-_":
            out.append(ch)
        elif ch == " ":
            out.append("-")
    return "".join(out)


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen = {}
        found = set()
        with open(path, encoding="utf-8") as f:
            for _, line in strip_code(f.read().splitlines()):
                m = HEADING.match(line)
                if not m:
                    continue
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else "%s-%d" % (base, n))
        _anchors[path] = found
    return _anchors[path]


def check(root, md):
    bad = []
    here = os.path.dirname(md)
    with open(md, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for no, line in strip_code(lines):
        line = INLINE_CODE.sub("", line)
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                continue  # http:, https:, mailto: ...
            path, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(here, path)) if path else md
            rel = os.path.relpath(md, root)
            if not os.path.exists(dest):
                bad.append("%s:%d: %s: no such file" % (rel, no, target))
                continue
            if frag and dest.endswith(".md") and frag not in anchors(dest):
                bad.append("%s:%d: %s: no heading with that anchor" % (rel, no, target))
    return bad


def main():
    if len(sys.argv) != 2:
        print("usage: doc_links.py SOURCE_DIR", file=sys.stderr)
        return 2
    root = os.path.abspath(sys.argv[1])
    files = [os.path.join(root, "README.md")]
    for d, _, names in os.walk(os.path.join(root, "docs")):
        files += [os.path.join(d, n) for n in sorted(names) if n.endswith(".md")]
    bad = []
    for md in sorted(files):
        bad += check(root, md)
    for line in bad:
        print(line)
    if bad:
        print("%d broken link(s) in %d file(s)" % (len(bad), len(files)))
        return 1
    print("doc links: every relative link and anchor in %d files resolves" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
