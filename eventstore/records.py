"""Frozen records without importing :mod:`dataclasses`: :func:`frozen_record`.

``dataclasses`` imports ``inspect`` (and with it ``ast``, ``dis`` and ``tokenize``), which
costs a small command such as ``eventstore sessions`` more than its query. A class made by
:func:`frozen_record` behaves as the same class under ``@dataclass(frozen=True,
slots=True)``: the same ``__init__``, ``repr``, equality, hash, pickling and
``FrozenInstanceError``, and ``dataclasses.fields``, ``asdict``, ``replace`` and
``is_dataclass`` take it as that dataclass (its ``__dataclass_fields__`` are made by
``dataclasses`` itself, on first use).
"""

from __future__ import annotations

__all__ = ["frozen_record"]


class _DataclassFields:
    """A record class's ``__dataclass_fields__`` and ``__dataclass_params__``, made on first
    use by ``dataclasses`` from a twin dataclass of the same fields, then kept on the class."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: object, owner: type | None = None) -> object:
        import dataclasses

        cls = owner if owner is not None else type(obj)
        twin = dataclasses.dataclass(frozen=True)(type(cls.__name__, (), {
            "__annotations__": dict(cls.__annotations__), "__module__": cls.__module__,
            "__qualname__": cls.__qualname__}))
        for name in ("__dataclass_fields__", "__dataclass_params__"):
            setattr(cls, name, getattr(twin, name))  # (replaces this descriptor)
        return getattr(cls, self.name)


def _frozen_error(message: str) -> Exception:
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(message)


def frozen_record(cls: type) -> type:
    """Complete ``cls`` (a class with ``__slots__`` naming its fields in order, and their
    annotations) as ``@dataclass(frozen=True, slots=True)`` would: ``__init__`` taking the
    fields in order, ``__repr__``, ``__eq__``, ``__hash__``, ``__match_args__``, frozen
    ``__setattr__`` and ``__delattr__``, ``__getstate__``/``__setstate__`` (pickle, copy),
    and the dataclass fields (see the module's docstring)."""
    names = tuple(cls.__slots__)
    setters = [cls.__dict__[n].__set__ for n in names]
    getters = [cls.__dict__[n].__get__ for n in names]
    scope: dict = {"_set": setters}  # __init__ spelled with the fields as its parameters, as dataclass does
    exec(f"def __init__(self, {', '.join(names)}):\n"
         + "".join(f"    _set[{i}](self, {n})\n" for i, n in enumerate(names)), scope)
    cls.__init__ = scope["__init__"]
    cls.__init__.__qualname__ = f"{cls.__qualname__}.__init__"

    def values(self) -> tuple:
        return tuple(get(self) for get in getters)

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}(" + ", ".join(
            f"{n}={v!r}" for n, v in zip(names, values(self), strict=True)) + ")"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(values(self))

    def __setattr__(self, name: str, value: object) -> None:
        raise _frozen_error(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise _frozen_error(f"cannot delete field {name!r}")

    def __getstate__(self) -> list:
        return list(values(self))

    def __setstate__(self, state: list) -> None:
        for set_, value in zip(setters, state, strict=True):
            set_(self, value)

    for f in (__repr__, __eq__, __hash__, __setattr__, __delattr__, __getstate__, __setstate__):
        f.__qualname__ = f"{cls.__qualname__}.{f.__name__}"
        setattr(cls, f.__name__, f)
    cls.__match_args__ = names
    fields = _DataclassFields()
    params = _DataclassFields()
    for name, descriptor in (("__dataclass_fields__", fields), ("__dataclass_params__", params)):
        setattr(cls, name, descriptor)
        descriptor.__set_name__(cls, name)
    return cls
