"""Reports of a sweep: optima and transfer tables, figures (PNG + SVG) and one self-contained HTML page.

    from reports.report import build_report
    report = build_report("runs/gdn-adamw")          # writes runs/gdn-adamw/report/index.html, tables, figures

reports.report builds the page, reports.plots and reports.coord draw the figures, reports.html writes the HTML,
reports.tuned turns a sweep's optimum into an export, reports.cli holds `deltamup report` and `deltamup export`.
Nothing is imported here, so the CLI starts without matplotlib.
"""
