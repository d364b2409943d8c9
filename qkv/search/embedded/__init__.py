"""The embedded store: one directory, no server. faiss for vectors, SQLite (+FTS5) for rows.

Layout::

    DIR/manifest.json        which generation is current, the model, dims, counts (replaced atomically)
    DIR/gen-000007/          one immutable generation
        catalog.sqlite       products(slot, id, title, ktext, title_hash, f0, f1 …), fields, fts (FTS5),
                             term_df, word_df, keyword_stats, term_postings
        vectors.npy          float32 or float16 [slots, dim]; slot = faiss id = FTS rowid
        ann.faiss            the ANN index over the slots (absent while empty)
        doclen.npy, postings.npy, postings_tf.npy    the keyword side's arrays
    DIR/.lock                held (flock) by the one writer

One module per job, as a Lucene/tantivy segment has one codec per concern:
``generations`` (the files, opening one, publishing the next), ``rows`` (stored fields, filters),
``vectors`` (faiss ANN), ``keyword`` (BM25 query plans) over ``vocabulary`` (stems, df, the
catalog's words for spelling) and ``postings`` (the keyword files), ``bm25`` (the formula), ``writer`` (the one writer)
and ``store`` (``EmbeddedStore``, the ``VectorStore`` they make together).

Every write builds a new generation in a temporary directory next to the current one, renames it
into place, then swaps ``manifest.json`` with ``os.replace``; readers open the generation the
manifest names with SQLite's ``immutable`` flag, so they take no locks and never wait, and
``reopen_if_changed`` moves a reader to the newest generation.
"""

from __future__ import annotations

from qkv.search.store import register_store

register_store("embedded", "qkv.search.embedded.store:EmbeddedStore")  # the default backend

__all__ = ["EmbeddedStore"]


def __getattr__(name):  # lazy: importing the package must not pull numpy/faiss in
    if name == "EmbeddedStore":
        from qkv.search.embedded.store import EmbeddedStore

        return EmbeddedStore
    raise AttributeError(name)
