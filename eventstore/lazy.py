"""Work deferred from import time to first use: :class:`LazyPattern`, :class:`LazyModule`.

Compiling a regular expression is Python code (``re._compiler``); a character class with
ranges beyond ASCII costs about a millisecond. A module that compiled its patterns on import
made every command pay for patterns that only some commands use.
"""

from __future__ import annotations

__all__ = ["LazyModule", "LazyPattern"]


class LazyPattern:
    """``re.compile(pattern, flags)``, compiled when one of its attributes is first used
    (``.sub``, ``.search``, ...); each attribute is then kept on this object, so later uses
    cost what the compiled pattern's own do. Pass ``.pattern`` to no ``re`` function: use its
    methods."""

    def __init__(self, pattern: str | bytes, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags_given = flags

    def __getattr__(self, name: str) -> object:
        import re

        value = getattr(re.compile(self.pattern, self.flags_given), name)
        setattr(self, name, value)
        return value

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r})"


class LazyModule:
    """The module ``name``, imported when one of its attributes is first used (each attribute
    is then kept on this object): for a module that only some calls need, such as ``json``
    (whose import compiles its patterns) in a command that decodes no JSON."""

    def __init__(self, name: str) -> None:
        self.module_name = name

    def __getattr__(self, attribute: str) -> object:
        # (__import__ with a fromlist returns the module itself, without importing importlib)
        value = getattr(__import__(self.module_name, fromlist=["__name__"]), attribute)
        setattr(self, attribute, value)
        return value

    def __repr__(self) -> str:
        return f"LazyModule({self.module_name!r})"
