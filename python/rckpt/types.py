"""Values of the state tree that have no Python class of their own."""

from __future__ import annotations

from typing import Any, Optional


class InertObject:
    """An object of a class rckpt does not rebuild: its class path and fields.

    Files converted from torch.save pickles hold such objects (a hippynn
    MetricTracker, say); rckpt never imports or runs the class. Saving an
    InertObject stores it back unchanged.
    """

    __slots__ = ("class_path", "fields")

    def __init__(self, class_path: str, fields: Any = None) -> None:
        self.class_path = class_path
        self.fields = fields

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, InertObject) and self.class_path == other.class_path
                and self.fields == other.fields)

    def __repr__(self) -> str:
        return f"InertObject({self.class_path!r}, {self.fields!r})"


class FunctionRef:
    """A function or bound method of a saved state, by name; never imported or called.

    ``name`` is ``module.qualname`` of the function, ``bound_to`` the class
    path of the object a method was bound to (None for a plain function).
    A load leaves dict entries holding one out (see docs/PYTHON.md, "What
    a state may hold"); in lists and tuples it stays, as this inert record.
    """

    __slots__ = ("name", "bound_to")

    def __init__(self, name: str, bound_to: Optional[str] = None) -> None:
        self.name = name
        self.bound_to = bound_to

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, FunctionRef) and self.name == other.name
                and self.bound_to == other.bound_to)

    def __hash__(self) -> int:
        return hash((self.name, self.bound_to))

    def __repr__(self) -> str:
        bound = f", bound_to={self.bound_to!r}" if self.bound_to else ""
        return f"FunctionRef({self.name!r}{bound})"
