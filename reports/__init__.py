"""Reports of a sweep: the analysis (optimum per width, transfer across widths), figures (PNG + SVG), the summary
table and one self-contained HTML page.

    from deltamup.reports.analysis import analyze, load_sweep
    from deltamup.reports.report import build_report
    report = build_report("runs/gdn-adamw")          # writes runs/gdn-adamw/report/index.html, tables, figures

analysis finds the optima and measures transfer, summary writes summary.md, plots and coord draw the figures, html
writes the page, overview puts several studies side by side, tuned turns a sweep's optimum into an export.
Nothing is imported here, so the CLI starts without matplotlib.
"""
