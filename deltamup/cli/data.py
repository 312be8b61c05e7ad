"""`deltamup data`: prepare token files (the default corpus or your text/parquet) and inspect them.

    deltamup data prepare --out data/corpus                      the default corpus, bytes
    deltamup data prepare --out data/corpus-bpe --tokenizer bpe --vocab-size 8192
    deltamup data prepare 'books/**/*.txt' --out data/books      your text files (or *.parquet, --text-column)
    deltamup data prepare --like other/corpus --out data/corpus   the default corpus another machine built, rebuilt
    deltamup data sources                                         what the default corpus is made of, here
    deltamup data info data/corpus                                a prepared directory's manifest and splits
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from deltamup.console import print_table, writable_dir
from deltamup.scaling.data.corpus import cache_root
from deltamup.scaling.data.inputs import default_corpus, user_inputs
from deltamup.scaling.data.prepare import prepare, read_manifest
from deltamup.scaling.data.sources import DEFAULT_SOURCES, find_source, sources_like
from deltamup.scaling.data.tokens import holdout


def register(subparsers: argparse._SubParsersAction) -> None:
    data = subparsers.add_parser("data", help="prepare and inspect training data",
                                 description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = data.add_subparsers(dest="data_command", required=True, metavar="ACTION")

    p = sub.add_parser("prepare", help="build tokens.bin + manifest.json (+ tokenizer.json) with a progress bar")
    p.add_argument("inputs", nargs="*", help="text files/globs or *.parquet (default: the default corpus)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--tokenizer", default="bytes", choices=("bytes", "bpe"))
    p.add_argument("--vocab-size", type=int, default=8192, help="BPE vocabulary (default 8192)")
    p.add_argument("--sources", default=",".join(DEFAULT_SOURCES),
                   help="default corpus: comma-separated sources (default: all; see `data sources`)")
    p.add_argument("--max-files", type=int, default=None, help="default corpus: first N files of each source")
    p.add_argument("--text-column", default="text", help="parquet inputs: the text column (default text)")
    p.add_argument("--jobs", type=int, default=2, help="processes that extract the default corpus (default 2)")
    p.add_argument("--force", action="store_true", help="replace an existing prepared directory")
    p.add_argument("--binary-ok", action="store_true",
                   help="read text files that are not UTF-8, invalid bytes replaced (default: refused)")
    p.add_argument("--like", metavar="MANIFEST",
                   help="rebuild the default corpus whose manifest.json (or prepared directory) this is: its sources "
                        "at the versions it lists (those installed at another fetched by pip, without dependencies, "
                        "into the data cache), its tokenizer; fails unless the tokens' sha256 comes out the same")
    p.set_defaults(run=run_prepare)

    s = sub.add_parser("sources", help="list the default corpus's sources as installed here")
    s.set_defaults(run=run_sources)

    i = sub.add_parser("info", help="print a prepared directory's manifest summary and split sizes")
    i.add_argument("path")
    i.add_argument("--val-fraction", type=float, default=0.01)
    i.add_argument("--json", action="store_true", help="print the whole manifest")
    i.set_defaults(run=run_info)


def run_prepare(args: argparse.Namespace) -> None:
    if args.tokenizer == "bpe" and args.vocab_size <= 256:
        raise ValueError(f"--vocab-size must be above 256 for a BPE, got {args.vocab_size}")
    if args.max_files is not None and args.max_files < 1:
        raise ValueError("--max-files must be positive")
    writable_dir(str(Path(args.out).parent))  # before any work
    out = Path(args.out)
    if (out / "manifest.json").exists() and not args.force:
        raise ValueError(f"{out} already holds a prepared dataset (use --force to rebuild it)")
    if args.like:
        like = like_manifest(args.like, args)
        names, folders = sources_like(like, cache_root())
        inputs = default_corpus(names, None, max(1, args.jobs), folders)
        tokenizer = like["tokenizer"]
        manifest = prepare(inputs, out, tokenizer["kind"], tokenizer["vocab_size"], force=args.force)
        if manifest["tokens_sha256"] != like["tokens_sha256"]:
            raise ValueError(f"{out}: tokens sha256 {manifest['tokens_sha256'][:16]}…, not the "
                             f"{like['tokens_sha256'][:16]}… of {args.like} (`deltamup data info --json` on both "
                             "names the source whose text differs)")
    elif args.inputs:
        manifest = prepare(user_inputs(args.inputs, args.text_column, args.binary_ok), out, args.tokenizer,
                           args.vocab_size, force=args.force)
    else:
        names = tuple(n.strip() for n in args.sources.split(",") if n.strip())
        manifest = prepare(default_corpus(names, args.max_files, max(1, args.jobs)), out, args.tokenizer,
                           args.vocab_size, force=args.force)
    print_summary(out, manifest, 0.01)


def like_manifest(path: str, args: argparse.Namespace) -> dict:
    """--like's manifest (a manifest file or the prepared directory holding one); ValueError where another option
    would contradict it."""
    if args.inputs or args.max_files is not None or args.sources != ",".join(DEFAULT_SOURCES):
        raise ValueError("--like rebuilds a default corpus as its manifest lists it: no inputs, --sources or "
                         "--max-files with it")
    return read_manifest(path)


def run_sources(args: argparse.Namespace) -> None:
    rows = []
    for name in DEFAULT_SOURCES:
        try:
            s = find_source(name)
            size = sum(s.path(f).stat().st_size for f in s.files)
            rows.append({"source": name, "version": s.version, "files": len(s.files), "MB of .py": f"{size / 1e6:.1f}"})
        except ValueError:
            rows.append({"source": name, "version": "MISSING", "files": 0, "MB of .py": "0"})
    print_table(rows)


def run_info(args: argparse.Namespace) -> None:
    manifest = read_manifest(args.path)
    if args.json:
        print(json.dumps(manifest, indent=1, ensure_ascii=False))
        return
    print_summary(Path(args.path), manifest, args.val_fraction)


def print_summary(path: Path, manifest: dict, val_fraction: float) -> None:
    train, val = holdout(manifest["tokens"], val_fraction)
    tok = manifest["tokenizer"]
    print(f"{path}: {manifest['tokens']:,} tokens ({manifest['dtype']}), tokenizer {tok['kind']} "
          f"(vocab {tok['vocab_size']}), {manifest['documents']:,} documents, {manifest['text_bytes']:,} bytes of text")
    print(f"text sha256   {manifest['text_sha256']}\ntokens sha256 {manifest['tokens_sha256']}")
    print(f"split (val_fraction {val_fraction}): train {sum(b - a for a, b in train):,} tokens, "
          f"val {sum(b - a for a, b in val):,} tokens in {len(val)} spans")
    print_table([{"input": e["name"], "version": e.get("version", ""), "documents": e["documents"],
                  "text bytes": f"{e['text_bytes']:,}", "sha256": e["sha256"][:16]} for e in manifest["inputs"]])
