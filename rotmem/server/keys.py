"""API keys: a random token per tenant, stored only as its SHA-256, mapped to one namespace.

The key file is JSON: ``{"keys": [{"namespace": "alice", "sha256": "<64 hex>"}, ...]}``.
``KeyRing.add`` makes a token (32 random bytes, URL-safe base64), stores its hash and returns the
token once; ``namespace_of`` hashes a presented token and compares it with every stored hash in
constant time (``hmac.compare_digest``, no early exit), so timing tells nothing about the keys.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path

from rotmem.memory.storage.database import check_namespace


def token_hash(token: str) -> str:
    """SHA-256 hex of ``token`` (what the key file stores)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class KeyRing:
    """Hashed API keys -> namespaces (module docs)."""

    def __init__(self, entries: list[tuple[str, str]] | None = None):
        self.entries: list[tuple[str, str]] = []  # (sha256 hex, namespace)
        for digest, namespace in entries or []:
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise ValueError(f"a key hash must be 64 lower-case hex digits, got {digest!r}")
            self.entries.append((digest, check_namespace(namespace)))

    @classmethod
    def load(cls, path: str | Path) -> KeyRing:
        """The key file at ``path``; a missing or malformed file raises a ValueError naming it."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            entries = [(str(e["sha256"]), str(e["namespace"])) for e in data["keys"]]
        except FileNotFoundError:
            raise ValueError(
                f"{path}: no such key file (make one with rotmem serve --add-key NAMESPACE)"
            ) from None
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{path}: not a rotmem key file ({type(error).__name__}: {error})") from None
        try:
            return cls(entries)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None

    def save(self, path: str | Path) -> None:
        """Write the key file atomically (a temporary file renamed over it), readable by the owner only."""
        path = Path(path)
        temporary = path.with_name(path.name + ".tmp")
        data = {"keys": [{"namespace": n, "sha256": d} for d, n in self.entries]}
        temporary.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)

    def add(self, namespace: str) -> str:
        """A new token for ``namespace`` (returned once; only its hash is kept)."""
        token = secrets.token_urlsafe(32)
        self.entries.append((token_hash(token), check_namespace(namespace)))
        return token

    def namespace_of(self, token: str | None) -> str | None:
        """The namespace of ``token``, or None for an unknown or missing one (constant time over keys)."""
        if not token:
            return None
        presented = token_hash(token).encode("ascii")
        found = None
        for digest, namespace in self.entries:
            if hmac.compare_digest(presented, digest.encode("ascii")) and found is None:
                found = namespace
        return found
