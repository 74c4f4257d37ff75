#!/usr/bin/env python3
"""The documentation's checks.

  check_docs.py links ROOT
      Every relative link of README.md, docs/*.md and bench/results/*.md
      ([text](path), ![alt](path), <a href="path">) must name a file or
      folder of the tree; an anchor (#...) is not checked. Prints each broken
      link as FILE:LINE: TARGET and exits 1 when there is one.

  check_docs.py snippets OUT FILE.md...
      Writes every ```cpp (and ```cuda) block of the given pages to OUT as a
      translation unit of its own (PAGE_N.cpp or .cu), for CTest's build to
      compile, and prints one CMake list entry per block:
      "path|needs", needs one of host, mpi, ucx, cuda (from its includes).
      A block must be a whole translation unit: one without an #include is
      an error naming it.

  check_docs.py provenance ROOT
      Every table of bench/results/*.md has, just above it, a line
      "*Commit `HASH`; command: `...`.*" saying what produced it; no header
      under include/ cites bench/results (figures live in the reports, a
      header keeps the reason) or runs past HEADER_LINES lines (files of
      one concern). Prints each miss as FILE:LINE: WHAT and exits 1 when
      there is one.
"""
import os
import re
import sys

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|<a\s+href=\"([^\"]+)\"")
FENCE = re.compile(r"^```(cpp|cuda)\s*\n(.*?)^```", re.S | re.M)


def pages(root):
    yield os.path.join(root, "README.md")
    for folder in ("docs", os.path.join("bench", "results")):
        d = os.path.join(root, folder)
        if os.path.isdir(d):
            for name in sorted(os.listdir(d)):
                if name.endswith(".md"):
                    yield os.path.join(d, name)


def links(root):
    broken = 0
    for page in pages(root):
        in_code = False
        for n, line in enumerate(open(page, encoding="utf-8"), 1):
            if line.startswith("```"):
                in_code = not in_code
            if in_code:
                continue
            for m in LINK.finditer(line):
                target = m.group(1) or m.group(2)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                    continue  # http:, mailto:, an anchor of this page
                path = target.split("#", 1)[0]
                if not os.path.exists(os.path.join(os.path.dirname(page), path)):
                    print(f"{os.path.relpath(page, root)}:{n}: {target}")
                    broken += 1
    print(f"check_docs: {broken} broken link(s)")
    return 1 if broken else 0


def needs(code):
    if "ddl/cuda.hpp" in code or "ddl/mpi_cuda.hpp" in code:
        return "cuda"
    if "ddl/ucx.hpp" in code:
        return "ucx"
    if "ddl/mpi.hpp" in code:
        return "mpi"
    return "host"


def snippets(out, files):
    os.makedirs(out, exist_ok=True)
    entries, bad = [], 0
    for page in files:
        text = open(page, encoding="utf-8").read()
        stem = re.sub(r"[^A-Za-z0-9]+", "_", os.path.splitext(os.path.basename(page))[0])
        if os.path.basename(os.path.dirname(os.path.abspath(page))) == "docs":
            stem = "docs_" + stem
        for k, m in enumerate(FENCE.finditer(text), 1):
            kind, code = m.group(1), m.group(2)
            line = text.count("\n", 0, m.start()) + 1
            if "#include" not in code:
                print(f"{page}:{line}: a ```{kind} block that is not a whole translation unit (no #include)",
                      file=sys.stderr)
                bad += 1
                continue
            path = os.path.join(out, f"{stem}_{k}.{'cu' if kind == 'cuda' else 'cpp'}")
            body = f'#line {line + 1} "{os.path.abspath(page)}"\n{code}'
            if not os.path.exists(path) or open(path, encoding="utf-8").read() != body:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(body)
            entries.append(f"{path}|{'cuda' if kind == 'cuda' else needs(code)}")
    print(";".join(entries))
    return 1 if bad else 0


HEADER_LINES = 520
NOTE = re.compile(r"^\*Commit `[0-9a-f]{7,40}(-dirty)?(/[0-9a-f]{7,40}(-dirty)?)*`; command: `.+`\.\*$")


def provenance(root):
    misses = 0
    reports = os.path.join(root, "bench", "results")
    for name in sorted(os.listdir(reports)):
        if not name.endswith(".md"):
            continue
        lines = open(os.path.join(reports, name), encoding="utf-8").read().split("\n")
        for i in range(len(lines) - 1):
            starts = lines[i].startswith("|") and (i == 0 or not lines[i - 1].startswith("|"))
            if starts and re.match(r"^\|[-: |]+\|\s*$", lines[i + 1]):
                if not any(NOTE.match(lines[k]) for k in range(max(0, i - 3), i)):
                    print(f"bench/results/{name}:{i + 1}: a table without its commit and command above it")
                    misses += 1
    for folder, _, files in os.walk(os.path.join(root, "include")):
        for name in sorted(files):
            if not name.endswith(".hpp"):
                continue
            path = os.path.join(folder, name)
            text = open(path, encoding="utf-8").read()
            rel = os.path.relpath(path, root)
            if "bench/results" in text:
                print(f"{rel}:{text[:text.index('bench/results')].count(chr(10)) + 1}: cites bench/results")
                misses += 1
            if text.count("\n") > HEADER_LINES:
                print(f"{rel}: {text.count(chr(10))} lines, more than {HEADER_LINES}")
                misses += 1
    print(f"check_docs: {misses} provenance miss(es)")
    return 1 if misses else 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "provenance":
        sys.exit(provenance(sys.argv[2]))
    if len(sys.argv) >= 3 and sys.argv[1] == "links":
        sys.exit(links(sys.argv[2]))
    if len(sys.argv) >= 3 and sys.argv[1] == "snippets":
        sys.exit(snippets(sys.argv[2], sys.argv[3:]))
    sys.exit(__doc__)
