"""The node kinds a span may declare (the wire's ``NodeKind`` that the reference's
Python SDK accepted for spans)."""

NODE_KINDS = frozenset({"agent", "llm", "tool", "chain", "retriever", "custom"})
