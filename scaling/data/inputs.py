"""What `data prepare` reads, as an ordered list of Inputs: each one manifest entry and the documents it yields.

    default_corpus(names)   the prose of the Python sources in scaling.data.sources (DEFAULT_SOURCES)
    text_files(patterns)    plain UTF-8 text files or globs, one document per file, in sorted path order
    parquet_files(paths)    the string column `text_column` of parquet files, one document per row
"""
from __future__ import annotations

import codecs
import glob
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from hashlib import blake2b
from pathlib import Path

from .pysource import prose_paragraphs
from .sources import DEFAULT_SOURCES, Source, find_source

MIN_WORDS = 3  # corpus paragraphs with fewer words ("# x", "Returns") are dropped


@dataclass
class Input:
    entry: dict                                # the manifest's description of this input
    items: int                                 # documents it yields (for the progress bar)
    documents: Callable[[], Iterator[str]] = field(repr=False)


def file_prose(path: Path) -> list[str]:
    return prose_paragraphs(path.read_bytes())


def default_corpus(names: tuple[str, ...] = DEFAULT_SOURCES, max_files: int | None = None,
                   jobs: int = 2, folders: dict[str, Path] | None = None) -> list[Input]:
    """One Input per source (folders: {name: a folder holding another version of it than the installed one,
    sources.pinned_folder}). Paragraphs are deduplicated across the whole corpus in order (licence headers and
    boilerplate repeat in every file), so the Inputs must be consumed in order, each once."""
    if not names:
        raise ValueError("name at least one corpus source")
    sources = [find_source(n, (folders or {}).get(n)) for n in names]
    seen: set[bytes] = set()

    def documents(source: Source) -> Iterator[str]:
        paths = [source.path(f) for f in source.files[:max_files]]
        if jobs > 1:
            with ProcessPoolExecutor(jobs) as pool:
                yield from (keep_new(p, seen) for p in pool.map(file_prose, paths, chunksize=8))
        else:
            yield from (keep_new(file_prose(p), seen) for p in paths)

    return [Input({"name": s.name, "version": s.version, "files": len(s.files[:max_files])},
                  len(s.files[:max_files]), lambda s=s: documents(s)) for s in sources]


def keep_new(paragraphs: list[str], seen: set[bytes]) -> str:
    """The file's paragraphs not seen before (and of ≥ MIN_WORDS words), joined by blank lines."""
    kept = []
    for p in paragraphs:
        key = blake2b(p.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        if key not in seen and len(p.split()) >= MIN_WORDS:
            seen.add(key)
            kept.append(p)
    return "\n\n".join(kept)


def expand(patterns: list[str]) -> list[Path]:
    """Sorted unique files matching the patterns (recursive ** allowed); ValueError if a pattern matches none."""
    found: set[Path] = set()
    for pattern in patterns:
        matches = [Path(m) for m in glob.glob(pattern, recursive=True) if Path(m).is_file()]
        if not matches:
            raise ValueError(f"no file matches {pattern!r}")
        found.update(matches)
    return sorted(found)


SNIFF_BYTES = 1 << 16  # of each text file, checked as UTF-8 before any work


def check_text(path: Path) -> None:
    """ValueError when the file's start is not UTF-8 text (a NUL byte or an invalid sequence): a binary file."""
    with open(path, "rb") as f:
        head = f.read(SNIFF_BYTES)
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not UTF-8 text (byte {e.start}): pass --binary-ok to read it with invalid "
                         "bytes replaced") from None
    if b"\0" in head:
        raise ValueError(f"{path} holds NUL bytes (a binary file?): pass --binary-ok to read it anyway")


def text_files(patterns: list[str], binary_ok: bool = False) -> list[Input]:
    """The files as documents; without binary_ok a file that is not UTF-8 is refused (its start before any work,
    the rest while it is read)."""
    paths = expand(patterns)
    if not binary_ok:
        for p in paths:
            check_text(p)

    def documents() -> Iterator[str]:
        for p in paths:
            try:
                yield p.read_text(encoding="utf-8", errors="replace" if binary_ok else "strict")
            except UnicodeDecodeError as e:
                raise ValueError(f"{p} is not UTF-8 text (byte {e.start}): pass --binary-ok to read it with "
                                 "invalid bytes replaced") from None

    return [Input({"name": "text", "files": [p.as_posix() for p in paths]}, len(paths), documents)]


def parquet_files(patterns: list[str], text_column: str = "text") -> list[Input]:
    import pyarrow.parquet as pq

    inputs = []
    for path in expand(patterns):
        meta = pq.ParquetFile(path)
        if text_column not in meta.schema_arrow.names:
            raise ValueError(f"{path}: no column {text_column!r} (columns: {', '.join(meta.schema_arrow.names)})")

        def documents(meta=meta) -> Iterator[str]:
            for batch in meta.iter_batches(columns=[text_column], batch_size=4096):
                yield from (t or "" for t in batch.column(0).to_pylist())

        inputs.append(Input({"name": path.as_posix(), "column": text_column, "rows": meta.metadata.num_rows},
                            meta.metadata.num_rows, documents))
    return inputs


def user_inputs(patterns: list[str], text_column: str = "text", binary_ok: bool = False) -> list[Input]:
    """Parquet files (*.parquet) and text files (UTF-8; binary_ok: invalid bytes replaced), in the order given;
    ValueError on a mix."""
    is_parquet = [p.endswith(".parquet") for p in patterns]
    if any(is_parquet) and not all(is_parquet):
        raise ValueError("give either text files or parquet files, not both")
    return parquet_files(patterns, text_column) if all(is_parquet) else text_files(patterns, binary_ok)
