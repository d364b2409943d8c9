"""The web face of qkv: a FastAPI JSON API under ``/api/`` and one static page that uses it.

``create_app(index_dir=..., model=...)`` builds the application; ``qkv serve`` runs it. Nothing here
computes attention maps, search results, attributes or summaries itself: each route calls the
Python API of ``qkv.model``, ``qkv.explain``, ``qkv.search``, ``qkv.attributes`` or ``qkv.summarize``.
"""

from qkv.web.app import create_app
from qkv.web.limits import Limits

__all__ = ["Limits", "create_app"]
