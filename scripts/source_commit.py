"""Which commit a stored result's code came from. Every stored result records the source hash
of the code that computed it (``lens_heads.core.code_version``: the package's and the analyses'
``.py`` files); this finds the commit of this repository whose files give that hash, or says
that none does (the result ran on edited, uncommitted code).

    python scripts/source_commit.py 3c00d7552a7c38e9 a3fdaab2daae76c4
    python scripts/source_commit.py --out results/benchmarks/gpu/sources.json HASH [HASH ...]

It reads every commit reachable from any ref (``git rev-list --all``), so a shallow clone
misses older commits: it refuses one. ``--out`` stores the answer with the command, the commit
searched from and the number of commits searched.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path, PurePosixPath

from lens_heads.core import hash_sources, write_atomic

ROOTS = ("lens_heads", "analyses")  # what lens_heads.core._provenance.source_hash hashes


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True
    ).stdout


class _Blobs:
    """File contents by blob id, through one ``git cat-file --batch``."""

    def __init__(self, root: Path) -> None:
        self.process = subprocess.Popen(
            ["git", "cat-file", "--batch"], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    def __call__(self, blob: str) -> bytes:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(blob.encode() + b"\n")
        self.process.stdin.flush()
        size = int(self.process.stdout.readline().split()[2])
        contents = self.process.stdout.read(size)
        self.process.stdout.read(1)  # the newline after the contents
        return contents


def commit_source(root: Path, commit: str, blobs: _Blobs) -> str:
    """The source hash of ``commit``'s files, as ``source_hash`` computes it on a checkout."""
    files: dict[PurePosixPath, str] = {}
    for line in _git(root, "ls-tree", "-r", commit, *ROOTS).splitlines():
        meta, path = line.split("\t", 1)
        if path.endswith(".py"):
            files[PurePosixPath(path)] = meta.split()[2]
    return hash_sources(
        (path.as_posix(), blobs(files[path]))
        for top in ROOTS
        for path in sorted(p for p in files if p.parts[0] == top)
    )


def find_commits(root: Path, sources: list[str]) -> dict[str, str | None]:
    """Each source hash -> the oldest commit whose files give it (the commit that brought that
    code; later commits that change no ``.py`` file give it too), or None."""
    if _git(root, "rev-parse", "--is-shallow-repository").strip() == "true":
        raise SystemExit("a shallow clone misses commits: run `git fetch --unshallow` first")
    blobs = _Blobs(root)
    found: dict[str, str | None] = dict.fromkeys(sources)
    for commit in _git(root, "rev-list", "--all").split():
        source = commit_source(root, commit, blobs)
        if source in found:
            found[source] = commit  # rev-list lists newest first: the last one is the oldest
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="+", help="source hashes (16 hex digits)")
    parser.add_argument("--out", help="store the answer in this JSON file")
    parser.add_argument("--repo", default=".", help="the repository (default: here)")
    args = parser.parse_args(argv)
    root = Path(args.repo)
    found = find_commits(root, args.sources)
    for source, commit in found.items():
        print(f"{source}: {commit or 'no commit (edited, uncommitted code)'}")
    if args.out:
        record = {
            "command": "python scripts/source_commit.py " + " ".join(args.sources),
            "searched from": _git(root, "rev-parse", "HEAD").strip(),
            "commits searched": len(_git(root, "rev-list", "--all").split()),
            "commits": found,
        }
        write_atomic(Path(args.out), json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
