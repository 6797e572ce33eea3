"""Developer tools of the repository (not installed with the package): ``python -m tools.bench``
(the benchmarks) and ``python -m tools.web_screenshots`` (the viewer's screenshots in docs/img)."""
