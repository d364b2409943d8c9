"""Scale-out: distributed indexing on Ray (``ray_index``), serving from Milvus (``milvus_store``) and
copying an index between stores (``migrate``). Importing this package registers the ``"milvus"``
backend with ``qkv.search.store`` so ``Index.open`` / ``open_store`` read Milvus-backed indexes.
Ray and pymilvus are optional extras (``qkv[ray]``, ``qkv[milvus]``), imported only when used."""

from __future__ import annotations

from qkv.search.store import BACKENDS

BACKENDS.setdefault("milvus", "qkv.scale.milvus_store:MilvusStore")

__all__ = ["index_with_ray", "migrate"]


def __getattr__(name):  # lazy: importing qkv.scale must not pull ray or pymilvus in
    if name == "index_with_ray":
        from qkv.scale.ray_index import index_with_ray

        return index_with_ray
    if name == "migrate":
        from qkv.scale.migrate import migrate

        return migrate
    raise AttributeError(name)
