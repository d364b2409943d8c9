"""Scale-out: distributed indexing on Ray (``ray_index``), serving from Milvus (``milvus_store``) and
copying an index between stores (``migrate``). Importing this package registers the Milvus store with
search's registry (``qkv.search.store.register_store``: backend ``milvus`` and its URI schemes), so
``Index.open`` / ``open_store`` read Milvus-backed indexes; the ``qkv.stores`` entry point in
pyproject.toml names this package, so the registry imports it by itself when it meets a backend or
scheme it does not know. Ray and pymilvus are optional extras (``qkv[ray]``, ``qkv[milvus]``),
imported only when used."""

from __future__ import annotations

from qkv.search.store import register_store

register_store("milvus", "qkv.scale.milvus_store:MilvusStore", schemes=("milvus", "http", "https", "tcp", "grpc"))

__all__ = ["index_with_ray", "migrate"]


def __getattr__(name):  # lazy: importing qkv.scale must not pull ray or pymilvus in
    if name == "index_with_ray":
        from qkv.scale.ray_index import index_with_ray

        return index_with_ray
    if name == "migrate":
        from qkv.scale.migrate import migrate

        return migrate
    raise AttributeError(name)
