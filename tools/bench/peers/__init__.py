"""The systems eventstore is measured against, one module each. A peer that needs a library
that is not installed says so through ``available()``, and its rows read "skipped"."""
