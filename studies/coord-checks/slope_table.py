"""Side by side: the fitted width slopes of chosen probes at chosen steps, for several coordinate checks (one
column per check directory), as a Markdown table; optionally the gradient RMS per role and width of the first one,
and with --local the first one's change RMS(x_t − x_0) per width with the slope between each pair of neighbouring
widths (a finite-width correction shrinks from narrow to wide pairs; an exponent does not).

    python3 studies/coord-checks/slope_table.py studies/coord-checks/eps/gdn-mup-eps1e-8 \
        studies/coord-checks/eps/gdn-mup-adameps --probes block1.mixer_out,block1.mlp_out --steps 1,5,10 [--grads 1]
    … --spread       # one more column: the mean and [min, max] over the directories (seeds of one check)
    slope_table.py DIR… --pool align --steps 10,50,100   # a per-matrix probe pooled over blocks and directories
    … --pool align --pair 512,1024                       # … its slope between two widths only
    slope_table.py DIR… --loss --steps 10,100            # the probe-batch loss per width, one row per check and step
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import polars as pl


def slope_table(dirs: list[Path], probes: list[str], steps: list[int], spread: bool = False) -> list[str]:
    """Markdown rows (probe, t, one slope per directory); '–' where a check has no such slope. spread: one more
    column, the mean and [min, max] over the directories (the same check with other seeds)."""
    slopes = [pl.read_csv(d / "slopes.csv") for d in dirs]
    extra = ["mean [min, max]"] if spread else []
    lines = ["| probe | t | " + " | ".join([d.name for d in dirs] + extra) + " |",
             "| --- | --- |" + " --- |" * (len(dirs) + len(extra))]
    for probe in probes:
        for step in steps:
            values = []
            for s in slopes:
                hit = s.filter((pl.col("probe") == probe) & (pl.col("step") == step))["slope"]
                values.append(hit[0] if len(hit) else None)
            cells = [f"{v:+.2f}" if v is not None else "–" for v in values]
            if spread:
                got = [v for v in values if v is not None]
                cells.append(f"{sum(got) / len(got):+.2f} [{min(got):+.2f}, {max(got):+.2f}]" if got else "–")
            lines.append(f"| {probe} | {step} | " + " | ".join(cells) + " |")
    return lines


def pair_slopes(directory: Path, pair: tuple[int, int]) -> pl.DataFrame:
    """(probe, step, slope): the log-log slope of each probe's size between two widths of one check (coords.parquet;
    a probe's size is its change RMS(x_t − x_0), which for the per-matrix probes is the value itself)."""
    a, b = pair
    coords = pl.read_parquet(directory / "coords.parquet").filter(pl.col("width").is_in(pair))
    if missing := set(pair) - set(coords["width"].unique().to_list()):
        raise SystemExit(f"slope_table: {directory} has no width {sorted(missing)}")
    wide = coords.pivot(on="width", index=["probe", "step"], values="delta_rms")
    return wide.select("probe", "step", slope=(pl.col(str(b)) / pl.col(str(a))).log() / math.log(b / a))


def pooled_table(dirs: list[Path], kind: str, steps: list[int], pair: tuple[int, int] | None = None) -> list[str]:
    """Markdown rows (matrix, then per step the mean [min, max] of the slope of `kind`.blocks.<i>.<matrix> over every
    block i and every directory): a per-matrix probe (--matrix-probes: dWx, dW, in, align, srank) pooled over depth.
    pair: the slope between those two widths instead of the fitted one over all widths."""
    slopes = pl.concat([pair_slopes(d, pair) if pair else pl.read_csv(d / "slopes.csv").select("probe", "step", "slope")
                        for d in dirs])
    rows = (slopes.filter(pl.col("probe").str.starts_with(f"{kind}.blocks.") & pl.col("step").is_in(steps))
            .with_columns(matrix=pl.col("probe").str.replace(r"^[^.]+\.blocks\.\d+\.", "")))
    title = f"{kind}: matrix" + (f" ({pair[0]} → {pair[1]})" if pair else "")
    lines = [f"| {title} | " + " | ".join(f"t = {t}" for t in steps) + " |",
             "| --- |" + " --- |" * len(steps)]
    for matrix in sorted(rows["matrix"].unique().to_list()):
        cells = []
        for step in steps:
            got = rows.filter((pl.col("matrix") == matrix) & (pl.col("step") == step))["slope"].drop_nulls()
            cells.append(f"{got.mean():+.2f} [{got.min():+.2f}, {got.max():+.2f}]" if len(got) else "–")
        lines.append(f"| {matrix} | " + " | ".join(cells) + " |")
    return lines


def loss_table(dirs: list[Path], steps: list[int]) -> list[str]:
    """Markdown rows (check, t, the probe-batch loss per width): the held-out batch every probe is read on."""
    coords = {d: pl.read_parquet(d / "coords.parquet").filter(pl.col("probe") == "loss") for d in dirs}
    widths = sorted({w for c in coords.values() for w in c["width"].unique().to_list()})
    lines = ["| check | t | " + " | ".join(f"width {w}" for w in widths) + " |",
             "| --- | --- |" + " --- |" * len(widths)]
    for d, c in coords.items():
        for step in steps:
            at = dict(c.filter(pl.col("step") == step).select("width", "rms").iter_rows())
            lines.append(f"| {d.name} | {step} | " + " | ".join(f"{at[w]:.3f}" if w in at else "–" for w in widths)
                         + " |")
    return lines


def grad_table(directory: Path, step: int) -> list[str]:
    """Markdown rows: the RMS of each role's gradient at `step`, per width (from coords.parquet's grad.* probes)."""
    coords = pl.read_parquet(directory / "coords.parquet")
    g = coords.filter(pl.col("probe").str.starts_with("grad.") & (pl.col("step") == step))
    widths = sorted(g["width"].unique().to_list())
    lines = [f"| gradient RMS, t = {step} | " + " | ".join(f"width {w}" for w in widths) + " |",
             "| --- |" + " --- |" * len(widths)]
    for probe in sorted(g["probe"].unique().to_list()):
        row = g.filter(pl.col("probe") == probe).sort("width")["rms"].to_list()
        lines.append(f"| {probe} | " + " | ".join(f"{v:.2e}" for v in row) + " |")
    return lines


def local_table(directory: Path, probes: list[str], steps: list[int]) -> list[str]:
    """Markdown rows (probe, t, RMS(x_t − x_0) per width, the log-log slope between neighbouring widths)."""
    coords = pl.read_parquet(directory / "coords.parquet")
    widths = sorted(coords["width"].unique().to_list())
    pairs = [f"{a}→{b}" for a, b in zip(widths, widths[1:])]
    lines = ["| probe | t | " + " | ".join(f"width {w}" for w in widths) + " | " + " | ".join(pairs) + " |",
             "| --- | --- |" + " --- |" * (len(widths) + len(pairs))]
    for probe in probes:
        for step in steps:
            rows = coords.filter((pl.col("probe") == probe) & (pl.col("step") == step)).sort("width")
            if rows.height != len(widths):
                continue
            size = rows["delta_rms"].to_list()
            local = [math.log(b / a) / math.log(wb / wa) for a, b, wa, wb in zip(size, size[1:], widths, widths[1:])]
            lines.append(f"| {probe} | {step} | " + " | ".join(f"{v:.3g}" for v in size) + " | "
                         + " | ".join(f"{v:+.2f}" for v in local) + " |")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dirs", type=Path, nargs="+", help="coordinate-check directories (each with slopes.csv)")
    p.add_argument("--probes", default=None, help="comma-separated probe names, e.g. block1.mlp_out")
    p.add_argument("--pair", default=None, help="with --pool: the slope between these two widths, e.g. 512,1024")
    p.add_argument("--loss", action="store_true", help="instead: the probe-batch loss per width at --steps")
    p.add_argument("--pool", choices=("dWx", "dW", "in", "align", "srank"), default=None,
                   help="instead: this per-matrix probe's slope per matrix, pooled over blocks and the directories")
    p.add_argument("--steps", required=True, help="comma-separated steps")
    p.add_argument("--grads", type=int, default=None, metavar="STEP",
                   help="also the first check's gradient RMS per role and width at STEP")
    p.add_argument("--spread", action="store_true",
                   help="also the mean and [min, max] of each slope over the checks (the same check, other seeds)")
    p.add_argument("--local", action="store_true",
                   help="also the first check's change per width and the slopes between neighbouring widths")
    args = p.parse_args()
    for d in args.dirs:
        if not (d / ("coords.parquet" if args.loss else "slopes.csv")).is_file():
            raise SystemExit(f"slope_table: {d} has no {'coords.parquet' if args.loss else 'slopes.csv'}")
    if [args.probes is not None, args.pool is not None, args.loss].count(True) != 1:
        raise SystemExit("slope_table: give --probes, --pool or --loss (one of them)")
    if args.pair is not None and args.pool is None:
        raise SystemExit("slope_table: --pair goes with --pool")
    if (args.spread or args.grads is not None or args.local) and args.probes is None:
        raise SystemExit("slope_table: --spread, --grads and --local go with --probes")
    if args.loss:
        print("\n".join(loss_table(args.dirs, [int(s) for s in args.steps.split(",")])))
        return
    if args.pool is not None:
        pair = tuple(int(w) for w in args.pair.split(",")) if args.pair else None
        if pair is not None and len(pair) != 2:
            raise SystemExit(f"slope_table: --pair takes two widths, got {args.pair}")
        print("\n".join(pooled_table(args.dirs, args.pool, [int(s) for s in args.steps.split(",")], pair)))
        return
    print("\n".join(slope_table(args.dirs, args.probes.split(","), [int(s) for s in args.steps.split(",")],
                                args.spread)))
    if args.grads is not None:
        print()
        print("\n".join(grad_table(args.dirs[0], args.grads)))
    if args.local:
        print()
        print("\n".join(local_table(args.dirs[0], args.probes.split(","), [int(s) for s in args.steps.split(",")])))


if __name__ == "__main__":
    main()
