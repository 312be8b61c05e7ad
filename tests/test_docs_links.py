"""The documentation's links resolve: every relative link and image in README.md, docs/, the studies' READMEs and the
benchmark tables names a file or folder of the repository (and a heading, for a link with #anchor into Markdown).
No network: web links are not followed."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted({ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("studies/**/README.md"),
               *ROOT.glob("benchmarks/*.md")})
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)|<img[^>]*\bsrc=\"([^\"]+)\"")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")


def links(text: str) -> list[str]:
    """Link and image targets outside code blocks and inline code."""
    text = CODE.sub("", FENCE.sub("", text))
    return [a or b for a, b in LINK.findall(text)]


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation dropped, spaces as hyphens."""
    heads = re.findall(r"^#+\s+(.*?)\s*$", FENCE.sub("", markdown), re.M)
    return {re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", h.lower())) for h in heads}


def test_links_are_found():
    """The parser sees links, images and anchors, and skips code."""
    text = "[a](x.md) ![b](img/y.png) <img src=\"z.png\" width=\"8\"> `[c](no.md)`\n```\n[d](no2.md)\n```\n"
    assert links(text) == ["x.md", "img/y.png", "z.png"]
    assert anchors("# Where the measurement disagrees\n## The S3 check (CPU)\n") == \
        {"where-the-measurement-disagrees", "the-s3-check-cpu"}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path):
    broken = []
    for target in links(doc.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{doc.relative_to(ROOT)}: {broken}"


@pytest.mark.parametrize("sweeps", [("gdn-adamw/sweep", "gdn-sgd/sweep", "gdp2-adamw/sweep"),
                                    ("gdn-adamw-8l/sweep",), ("gdn-adamw-8l/sweep-4l",),
                                    ("gdn-sgd-noclip/sweep",), ("gdn-hparams-8l/sweep",), ("gdp2-adamw/sweep-neg",)])
def test_sweeps_table_is_what_the_committed_sweeps_give(sweeps):
    """benchmarks/sweeps.md's GPU tables are benchmarks/sweep_runs.py's output over the studies' committed sweeps."""
    sweeps = [f"studies/{s}" for s in sweeps]
    run = subprocess.run([sys.executable, "benchmarks/sweep_runs.py", *sweeps], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    table = run.stdout.strip()
    assert table.count("\n") >= 2 and table in (ROOT / "benchmarks" / "sweeps.md").read_text()


def test_forward_pass_table_is_what_the_committed_kernel_reports_give(tmp_path):
    """benchmarks/kernels.md's pass-by-pass table is benchmarks/forward_passes.py's output over the committed reports;
    a kernel the script cannot place ends it with one line, not a table that drops it."""
    reports = ["benchmarks/logs/kernels-h100-blockwise-2026-12-05.md",
               "benchmarks/logs/kernels-h100-blockwise-1warp-2026-12-05.md"]
    run = subprocess.run([sys.executable, "benchmarks/forward_passes.py", *reports], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    table = run.stdout.strip()
    assert table.count("\n") == 8 and table in (ROOT / "benchmarks" / "kernels.md").read_text()
    odd = tmp_path / "odd.md"
    odd.write_text("- 1, 64, 1, 16, 16: ours bf16: o 1e-3\n  - ours fwd kernels (ms): `new_kernel` 0.1\n"
                   "  - fla fwd kernels (ms): `l2norm_fwd_kernel` 0.1\n")
    bad = subprocess.run([sys.executable, "benchmarks/forward_passes.py", str(odd)], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode != 0 and bad.stdout == "" and bad.stderr.count("\n") == 1 and "new_kernel" in bad.stderr
