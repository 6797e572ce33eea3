"""Developer tools of the repository (not installed with the package): ``python -m tools.bench``."""
