#!/usr/bin/env python3
"""test_layering.py - no two files of node/ call into each other both ways.

Usage: test_layering.py NM ARCHIVE...   (the static libraries gn_node and
gn_ident; NM is the nm to run)

Reads every object of the archives with `nm`, maps each undefined symbol
to the object that defines it, and so builds "file A calls file B by name".
A pair that calls both ways (A -> B and B -> A) fails the test, listed
with the symbols each side uses. Calls through function pointers (a
callback registered at open) do not show in the symbol table and are
fine: that is how a lower file talks back up (docs/design.md, "The walk
of a received slice"). Exit 0 when clean, 1 on a two-way pair, 2 when
the archives cannot be read.
"""
import collections
import re
import subprocess
import sys

LINE = re.compile(r"^.*:([^:/]+\.o): *(?:[0-9a-fA-F]+ )?([A-Za-z]) (\S+)$")


def symbols(nm, archive):
    """{object: (defined set, undefined set)} for one archive."""
    out = subprocess.run([nm, "-A", "-g", archive], check=True,
                         capture_output=True, text=True).stdout
    objs = collections.defaultdict(lambda: (set(), set()))
    for line in out.splitlines():
        # "lib.a:obj.o: 0000000000000000 T name" or "lib.a:obj.o:    U name"
        m = LINE.match(line)
        if not m:
            continue
        obj, kind, name = m.groups()
        if kind == "U":
            objs[obj][1].add(name)
        elif kind != "w":
            objs[obj][0].add(name)
    return objs


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    nm, archives = argv[1], argv[2:]
    objs = {}
    try:
        for a in archives:
            objs.update(symbols(nm, a))
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"test_layering: {e}", file=sys.stderr)
        return 2
    owner = {}
    for obj, (defined, _) in objs.items():
        for s in defined:
            owner[s] = obj
    calls = collections.defaultdict(set)  # (a, b) -> symbols a uses of b
    for obj, (_, undefined) in objs.items():
        for s in undefined:
            b = owner.get(s)
            if b and b != obj:
                calls[(obj, b)].add(s)
    bad = sorted((a, b) for (a, b) in calls if a < b and (b, a) in calls)
    print(f"{len(objs)} objects, {len(calls)} one-way uses between them")
    for a, b in bad:
        print(f"TWO-WAY: {a} <-> {b}")
        print(f"  {a} -> {b}: {', '.join(sorted(calls[(a, b)]))}")
        print(f"  {b} -> {a}: {', '.join(sorted(calls[(b, a)]))}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
