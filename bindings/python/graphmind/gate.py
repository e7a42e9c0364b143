"""The public gate types (the decisions themselves come from the core)."""

from __future__ import annotations

from typing import Any, ClassVar


class GateDecision:
    """How a gate was released: ``continue``, ``retry``, ``inject`` (with ``output``) or
    ``abort``."""

    __slots__ = ("action", "output")

    CONTINUE: ClassVar[GateDecision]

    def __init__(self, action: str, output: Any = None) -> None:
        self.action = action
        self.output = output

    @classmethod
    def _from_native(cls, decision: Any) -> GateDecision:
        return cls(decision.action, decision.output)

    def __repr__(self) -> str:
        if self.output is not None:
            return f"GateDecision({self.action}, output={self.output!r})"
        return f"GateDecision({self.action})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, GateDecision)
            and other.action == self.action
            and other.output == self.output
        )

    def __hash__(self) -> int:
        return hash((self.action, repr(self.output)))


GateDecision.CONTINUE = GateDecision("continue")
CONTINUE = GateDecision.CONTINUE


class GateNode:
    """The logical node a gate belongs to."""

    __slots__ = ("kind", "name", "node_id")

    def __init__(self, node_id: str, kind: str, name: str) -> None:
        self.node_id = node_id
        self.kind = kind
        self.name = name

    def __repr__(self) -> str:
        return f"GateNode({self.node_id!r}, {self.kind!r}, {self.name!r})"
