"""A cheaper ``__init__`` for the frozen slots dataclasses built per heartbeat or per plan row."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["fast_init"]

T = TypeVar("T")


def fast_init(cls: type[T]) -> type[T]:
    """Replace a frozen slots dataclass's ``__init__`` with one that sets each slot directly.

    Why: the generated ``__init__`` of a frozen dataclass goes through
    ``object.__setattr__`` once per field, which is half the cost of building the
    small messages and results every heartbeat creates (a request, its arguments,
    the write and the result: four per beat) and the entry a plan builds per row.
    Pure (no I/O), so the policy layer uses it too. This one calls each slot's
    descriptor instead. Same parameters, order, keyword-only marker and defaults;
    the instance is the same frozen object. The dataclass's own ``__init__`` stays
    reachable as ``__init__.original`` (the tests compare the two).

    Only the plain case is supported: no ``__post_init__``, no ``default_factory``,
    every field in ``__init__``. Anything else is refused here, at import time.
    """
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} is not a frozen slots dataclass")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has __post_init__, which fast_init would skip")
    namespace: dict[str, Any] = {}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        if not field.init or field.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{field.name}: only plain fields are supported")
        name = field.name
        param = name
        if field.default is not dataclasses.MISSING:
            namespace[f"_default_{name}"] = field.default
            param = f"{name}=_default_{name}"
        (keyword if field.kw_only else positional).append(param)
        namespace[f"_set_{name}"] = cls.__dict__[name].__set__
        body.append(f"    _set_{name}(self, {name})")
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = "\n".join([f"def __init__({signature}):", *(body or ["    pass"])])
    # The source is built above from the field names alone.
    exec(source, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.original = cls.__init__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
