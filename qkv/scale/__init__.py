"""Scale-out: distributed indexing on Ray (``ray_index``), serving from Milvus (``milvus_store``) and
copying an index between stores (``migrate``). ``qkv.search.store.BACKENDS`` names the Milvus store,
so ``Index.open`` / ``open_store`` read Milvus-backed indexes. Ray and pymilvus are optional extras
(``qkv[ray]``, ``qkv[milvus]``), imported only when used."""

from __future__ import annotations

__all__ = ["index_with_ray", "migrate"]


def __getattr__(name):  # lazy: importing qkv.scale must not pull ray or pymilvus in
    if name == "index_with_ray":
        from qkv.scale.ray_index import index_with_ray

        return index_with_ray
    if name == "migrate":
        from qkv.scale.migrate import migrate

        return migrate
    raise AttributeError(name)
