#!/usr/bin/env python3
"""Every path docs/DESIGN.md names in backquotes exists.

A backquoted word is a path of the repository when its first component is
one of the repository's top-level folders, a folder of src/, or `rckpt`
(the public headers, include/rckpt/, and the package, python/rckpt/). It is
looked for under the repository root, src/, include/ and python/; `NAME.*`
stands for any file NAME.EXT, and a trailing `/` for a folder. Exits 1 with
every missing path and its line when one is gone, so a change that moves a
file and leaves the page behind fails the test command.

Usage: design_paths.py REPOSITORY_ROOT [PAGE...]   (default page: docs/DESIGN.md)
"""
import glob
import os
import re
import sys

ROOTS = ("", "src", "include", "python")
WORD = re.compile(r"`([^`\s]+)`")


def first_components(repo):
    names = {"rckpt"}
    for base in ("", "src"):
        folder = os.path.join(repo, base)
        names.update(n for n in os.listdir(folder) if os.path.isdir(os.path.join(folder, n)))
    return names - {".git", "build"}


def names_a_path(word, components):
    if "://" in word or "/" not in word.rstrip("/") and not word.endswith("/"):
        return False
    return word.split("/")[0] in components


def exists(repo, word):
    for base in ROOTS:
        where = os.path.join(repo, base, word)
        if word.endswith("/"):
            if os.path.isdir(where):
                return True
        elif glob.glob(where) if "*" in word else os.path.exists(where):
            return True
    return False


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    repo = argv[1]
    pages = argv[2:] or [os.path.join(repo, "docs", "DESIGN.md")]
    components = first_components(repo)
    missing, checked = [], 0
    for page in pages:
        with open(page, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                for word in WORD.findall(line):
                    if not names_a_path(word, components):
                        continue
                    checked += 1
                    if not exists(repo, word):
                        missing.append(f"{os.path.relpath(page, repo)}:{number}: `{word}` does not exist")
    for m in missing:
        print(m)
    print(f"{checked} paths named, {len(missing)} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
