"""Per-agent registration layers: ``create_scope``, ``scope_of`` and ``Scope``."""

from __future__ import annotations

from ._scope import Scope, ScopeError, ScopeKeyError, create_scope, scope_of

__all__ = ["Scope", "ScopeError", "ScopeKeyError", "create_scope", "scope_of"]
