"""Integrations with LLM client libraries and agent frameworks (imported on demand)."""
