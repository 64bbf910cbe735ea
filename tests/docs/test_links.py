"""Every relative Markdown link of README.md and docs/**/*.md points to a file that exists, and
each ``#anchor`` to a heading of that file (GitHub's anchors: lower case, punctuation dropped,
spaces as hyphens, ``-1``, ``-2`` ... for repeated headings)."""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path

import pytest

from helpers import REPO

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^()\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def prose(text: str) -> list[str]:
    """The lines outside fenced code blocks, inline code spans blanked."""
    out, fence = [], False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fence = not fence
            continue
        out.append("" if fence else re.sub(r"`[^`]*`", "", line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@functools.lru_cache(maxsize=None)
def anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    out = set()
    fence = False
    for line in path.read_text().splitlines():
        if FENCE.match(line.lstrip()):
            fence = not fence
        m = None if fence else re.match(r"^#{1,6} (.*?)#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return frozenset(out)


def links(path: Path) -> list[tuple[int, str]]:
    return [(n, target) for n, line in enumerate(prose(path.read_text()), 1)
            for target in LINK.findall(line)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]   # http:, https:, mailto: ...


def broken(path: Path) -> list[str]:
    bad = []
    for n, target in links(path):
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        where = f"{path.relative_to(REPO)}:{n}: {target}"
        if not dest.exists():
            bad.append(f"{where}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{where}: no heading #{anchor} in {dest.relative_to(REPO)}")
    return bad


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_resolves(page):
    assert broken(page) == []


def test_a_broken_link_and_a_missing_anchor_are_reported(tmp_path, monkeypatch):
    """The check itself: a link to a missing file and one to a missing heading are found,
    a repeated heading's second anchor is not."""
    (tmp_path / "a.md").write_text("# Title\n\n## Same\n\n## Same\n\n## A `code`: (x) b\n")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md#same-1) [ok](a.md#a-code-x-b) [f](missing.md) [h](a.md#nope)\n"
                    "`[not a link](gone.md)`\n```\n[in a fence](gone.md)\n```\n"
                    "[web](https://example.org/x.md)\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert broken(page) == ["b.md:1: missing.md: no such file",
                            "b.md:1: a.md#nope: no heading #nope in a.md"]
