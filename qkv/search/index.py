"""Searching an index: the Python API the CLI and the web app call (building is ``build``).

    from qkv.search import Index, build_index
    report = build_index("catalog.csv", "my-index")              # or upsert=True to update
    idx = Index.open("my-index")                                  # or a store URI it was built at
    hits = idx.search("breathable running shoes", k=5)            # hybrid by default
    hits = idx.search("跑鞋", mode="dense", where="price < 50", explain=True)
    hits.searched_as, hits.timings                                # 'running shoes': Chinese is translated

One way through: ``plan`` (``qkv.search.plan``: translation, keyword text and groups, dense texts,
prefix — plain data) → retrieval (each side's candidates, from the plan) → fusion (the two lists)
→ rows. ``search`` returns a ``SearchResponse``: the results (it iterates and indexes as their
list), the plan and the timings. Nothing is left on the ``Index`` for a caller to read back.

Titles and queries are embedded with the prefixes the index's manifest records (E5: "passage: " /
"query: "; none for MiniLM): ``query_vectors`` applies them, so callers never do.

A query holding Han characters is also translated (``qkv.translate.translator``, against the catalog's
own vocabulary): the keyword side searches the original and its English together, each word's
English alternatives as one synonym group; the dense side searches normalize(w·v(original) +
(1 − w)·v(English)), w = ``ORIGINAL_WEIGHT``, which ranks by w·cos(original) + (1 − w)·cos(English),
then again with the top results' vectors fed back (``qkv.search.crosslingual``).
``translate=False`` searches the query as typed. An English query against a catalog that also
holds Chinese titles is searched, in hybrid mode, with its phrases' Chinese words as synonyms
(``Translator.chinese_for``, ``crosslingual.english_groups``), so it reaches both languages'
listings of a product (docs/search.md, "English queries in a bilingual catalog").

(Over 500 lines on purpose: this one class is what every face calls; what it coordinates — stores,
fusion, translation, explanations — lives in modules of its own.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from qkv.errors import InputError
from qkv.search import fusion
from qkv.search.crosslingual import ORIGINAL_WEIGHT, mix_vectors  # noqa: F401 (API)
from qkv.search.build import BuildReport, build_index, check_model, delete_products  # noqa: F401 (API)
from qkv.search.explain import MatchExplanation, TokenVectorCache, explain_titles
from qkv.search.filters import Filter, parse_filter
from qkv.search.plan import QueryPlan, plan_query
from qkv.search.store import Manifest, VectorStore, open_store

MODES = ("hybrid", "dense", "keyword")
FUSIONS = ("score", "rrf")
CANDIDATES = 200  # depth each side contributes to hybrid fusion (at least k); 200 tuned on dev half a
MAX_QUERY_CHARS = 2000
# The token vectors of recent queries' passes (kept so the match grids of their results reuse the
# search's own pass) and of titles already explained (~30 KB each for a 384-wide model: ~1,000)
QUERY_CACHE_ENTRIES, QUERY_CACHE_BYTES = 256, 16 << 20
TITLE_CACHE_BYTES = 32 << 20


@dataclass(frozen=True)
class SearchResult:
    rank: int
    id: str
    title: str
    score: float  # the mode's score: cosine (dense), BM25 (keyword), fused (hybrid)
    fields: dict
    dense_score: float | None = None  # cosine, when known
    keyword_score: float | None = None  # BM25, when the keyword side matched
    dense_rank: int | None = None
    keyword_rank: int | None = None
    explanation: MatchExplanation | None = None
    searched_as: str | None = None  # the English a Chinese query was also searched as (None: as typed)

    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in ("rank", "id", "title", "score", "fields", "dense_score",
                                            "keyword_score", "dense_rank", "keyword_rank")}
        if self.searched_as is not None:
            d["searched_as"] = self.searched_as
        if self.explanation is not None:
            d["explanation"] = self.explanation.to_json()
        return d


@dataclass(frozen=True)
class SearchResponse:
    """What ``Index.search`` answers: the ``results`` (the response iterates, indexes and has the
    length of them), the ``plan`` the query was searched by, and ``timings`` (seconds per stage:
    encode, ann, keyword, fuse, fetch; translate and translated search for a translated query;
    explain), and the dense query ``vector`` the search ran (None in keyword mode), which a second
    look at the same query (``qkv.search.floor``) reuses instead of running the model again."""

    results: tuple[SearchResult, ...]
    plan: QueryPlan
    timings: dict = field(default_factory=dict)
    vector: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def searched_as(self) -> str | None:
        """The English a Chinese query was also searched as (None: as typed)."""
        return self.plan.searched_as

    @property
    def translation(self):
        """The query's ``qkv.translate.Translation`` (None: searched as typed)."""
        return self.plan.translation

    @property
    def corrected(self) -> str | None:
        """The spelling an English query was searched as (``QueryPlan.corrected``; None: as typed)."""
        return self.plan.corrected

    def __iter__(self):
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, i):
        return self.results[i]


def query_precision() -> str:
    """The precision of a lone query's pass: bfloat16 on AMX tiles (forward 4.2 ms CPU against
    5.3 for float16 panels and 7.2 for float32, docs/engine.md), else float16 panels (half the
    bytes of a pass bound by reading the weights; within cosine distance ~2e-7 of float32)."""
    from qkv.kernels import cpu

    return "bfloat16" if cpu.ISA == "amx" else "float16"


class Index:
    """A searchable index (any ``VectorStore`` backend) plus the encoder its vectors came from."""

    def __init__(self, store: VectorStore, encoder=None, glossary=None, trade_glossary: str | None = "default",
                 adapter: bool = True):
        from qkv.translate import DEFAULT_TRADE_GLOSSARY, trade_glossary as load_trade

        self.store = store
        self.use_adapter = adapter  # the index's query adapter, if it has one (``qkv.search.adapter``)
        self._adapter = (None, None)  # ((store, file stat) it was read for, QueryAdapter or None)
        self.trade_glossary = DEFAULT_TRADE_GLOSSARY if trade_glossary == "default" else (trade_glossary or "none")
        load_trade(self.trade_glossary)  # an unknown name is refused now, not at the first Chinese query
        self._encoder = encoder
        if encoder is not None:
            check_model(store.manifest, encoder, store.path)
        self._glossary = glossary
        self._translator = (None, None)  # (store it counts in, Translator)
        self._query_vectors = TokenVectorCache(QUERY_CACHE_BYTES, QUERY_CACHE_ENTRIES)
        self._title_vectors = TokenVectorCache(TITLE_CACHE_BYTES)

    @classmethod
    def open(cls, path, encoder=None, *, ef_search: int | None = None, glossary=None,
             trade_glossary: str | None = "default", adapter: bool = True) -> "Index":
        """Open an index (its directory, or the store URI it was built at). ``ef_search``: HNSW's
        search breadth for this session (the store's default is 96; more recall for more time,
        see docs/search.md); a store without the setting refuses it. ``glossary``: a seller's
        CSV (Chinese term, English term) or dict, which overrides the dictionary when Chinese
        queries are translated. ``trade_glossary``: the built-in trade glossary consulted after
        the seller's and before the dictionary (``qkv.translate.translator.TRADE_GLOSSARIES``;
        "default": home-improvement; "none" or None: the dictionary alone). ``adapter``: apply the
        index's query adapter (``qkv terms adapt``) when it has one; False searches without it."""
        store = open_store(path)
        if ef_search is not None:
            try:
                store.ef_search = ef_search
            except InputError:
                store.close()
                raise
        try:
            return cls(store, encoder, glossary, trade_glossary, adapter)
        except Exception:
            store.close()
            raise

    @property
    def generation(self) -> str:
        """The published generation this index searches (``VectorStore.generation``)."""
        return self.store.generation

    def refresh(self, warm: bool = True) -> bool:
        """Switch to the newest published generation if there is one (``reopen_if_changed``):
        True when it switched. One small file read when nothing changed, so a server may call it
        before every request. The new store is ``warm``ed (its ANN index and keyword arrays
        loaded) before the switch, which is one assignment: a search runs on the store it started
        with (``search`` and ``retrieve`` read ``self.store`` once), so searches running during
        the swap finish on the old generation and the next ones see the new. A generation whose
        vectors came from another model is refused (IndexError_) and the current one kept."""
        new = self.store.reopen_if_changed()
        if new is None:
            return False
        try:
            if self._encoder is not None:
                check_model(new.manifest, self._encoder, new.path)
            if warm:
                new.warm()
        except Exception:
            new.close()
            raise
        self.store = new  # the old store is closed when the last search holding it lets go
        self._title_vectors.clear()  # the cache follows the catalog served
        return True

    def close(self) -> None:
        self.store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def encoder(self):
        if self._encoder is None:  # the model the manifest names, shared in the process (qkv.model.shared)
            from qkv.model import shared_encoder

            enc = shared_encoder(self.store.manifest.model)
            check_model(self.store.manifest, enc, self.store.path)
            self._encoder = enc
        return self._encoder

    @property
    def manifest(self) -> Manifest:
        return self.store.manifest

    def __len__(self) -> int:
        return self.store.count()

    # ------------------------------------------------------------------ Chinese queries
    def translator(self, store: VectorStore | None = None):
        """The query translator for ``store``'s catalog (default: the current generation), built
        on first use; a store that cannot count its keyword terms gets first dictionary senses."""
        from qkv.translate import Translator, UniformVocabulary

        st = self.store if store is None else store
        held, tr = self._translator
        if held is not st or tr is None:
            vocab = st.keyword_vocabulary() if hasattr(st, "keyword_vocabulary") else UniformVocabulary()
            tr = Translator(vocab, glossary=self._glossary, trade=self.trade_glossary)
            self._translator = (st, tr)
        return tr

    def plan(self, query: str, translate: bool = True, store: VectorStore | None = None,
             spell: bool = True) -> QueryPlan:
        """How ``query`` is searched (``qkv.search.plan.QueryPlan``): translated against ``store``'s
        catalog (default the current generation) when it holds Han characters and ``translate``;
        an English query's words that no title holds corrected when ``spell`` (``store.spell``,
        keeping the model's own words: ``model_knows``);
        the keyword text and groups; the dense texts; the query prefix ``store``'s manifest
        records. Deterministic for a given store and glossary. An explanation's BM25 terms are
        ``store.keyword_terms(plan.keyword, ids)``, as the search's keyword side matched them."""
        st = self.store if store is None else store
        return plan_query(query, (lambda: self.translator(st)) if translate else None, glossary=bool(self._glossary),
                          query_prefix=st.manifest.extra.get("query_prefix", ""),
                          speller=(lambda q: st.spell(q, keep=self.model_knows)) if spell else None)

    def model_knows(self, word: str) -> bool:
        """Whether the index's model reads ``word`` as one token of its vocabulary: a real word
        that no title holds ("skirt" in a catalog of shirts) is searched as typed, not turned into
        the nearest catalog word; a typo ("celing") comes in pieces. Asked only of words no title holds, so
        a keyword-only search loads the model only for those."""
        tok = self.encoder.tokenizer
        return len(tok.content([word])[0].ids) == 1

    mix_vectors = staticmethod(mix_vectors)  # a translated query's dense vector (crosslingual.mix_vectors)

    def adapter(self, store: VectorStore | None = None, query: "str | QueryPlan | None" = None):
        """The query adapter ``store``'s index holds (``qkv.search.adapter``: the seller's search
        terms fitted into the query vector), or None (none, switched off, or fitted for another
        model). Re-read when its file changes, so a server picks up a new fit at the next search
        (one ``stat`` a search). With ``query`` (its text or plan): None as well for a Chinese
        query when the adapter was fitted on no Chinese query (``QueryAdapter.fits``)."""
        if not self.use_adapter:
            return None
        from qkv.search import adapter as adapter_mod
        from qkv.search.store import index_dir

        st = self.store if store is None else store
        try:
            s = adapter_mod.adapter_path(index_dir(st.path)).stat()
            key = (st, s.st_mtime_ns, s.st_size, s.st_ino)
        except (OSError, AttributeError, TypeError):
            key = (st, None)
        held, ad = self._adapter
        if held != key:
            ad = None if key[1] is None else adapter_mod.load_for(index_dir(st.path), st.manifest)
            self._adapter = (key, ad)
        if ad is not None and query is not None and not ad.fits(query if isinstance(query, str) else query.query):
            return None
        return ad

    def fusion_alpha(self, store: VectorStore | None = None, plan: QueryPlan | None = None) -> float:
        """Score fusion's weight of the cosine for this index (and ``plan``'s query): its model's
        (``fusion.alpha_for``), kept at the same pull when a query adapter widened the cosines' spread."""
        st = self.store if store is None else store
        ad = self.adapter(st, plan)
        return fusion.alpha_for(st.manifest.model, 1.0 if ad is None else ad.spread)

    def adapt(self, v: np.ndarray, store: VectorStore | None = None, query: "str | QueryPlan | None" = None) -> np.ndarray:
        """``v`` (a query vector or rows of them, of ``query``) through the index's query adapter;
        as is without one (``adapter``)."""
        ad = self.adapter(store, query)
        return v if ad is None else ad.apply(v)

    def dense_vector(self, plan: QueryPlan, exact: bool = False, store: VectorStore | None = None) -> np.ndarray:
        """The dense query of ``plan``: its text's vector, or a translated query's original and
        English mixed (``mix_vectors``), through the index's query adapter (``adapt``)."""
        vs = [self.encode_query(text, exact, store, plan.query_prefix) for text in plan.dense]
        return self.adapt(vs[0] if len(vs) == 1 else self.mix_vectors(*vs), store, plan)

    def plan_vectors(self, plans: list[QueryPlan], adapt: bool = True, progress=None) -> np.ndarray:
        """The dense queries of many plans at once (``dense_vector``'s vectors, batched: evaluation
        and fitting the adapter), float32 [n, d]; ``adapt`` False leaves the adapter out.
        ``progress``: a ``qkv.progress.Count`` advanced per plan."""
        vecs = np.array(self.query_vectors([p.dense[0] for p in plans]), np.float32, copy=True)
        tr_at = [i for i, p in enumerate(plans) if len(p.dense) > 1]
        if tr_at:  # the dense query of a translated query mixes in its English
            tv = self.query_vectors([plans[i].dense[1] for i in tr_at])
            vecs[tr_at] = self.mix_vectors(vecs[tr_at], tv)
        if progress is not None:
            progress.add(len(plans))
        ad = self.adapter() if adapt else None
        if ad is not None:  # one read of the adapter, one product for the queries it fits
            rows = [i for i, p in enumerate(plans) if ad.fits(p.query)]
            if rows:
                vecs[rows] = ad.apply(vecs[rows])
        return vecs

    # ------------------------------------------------------------------ search
    @staticmethod
    def _check(query: str, k: int, mode: str, fusion_: str) -> str:
        if not isinstance(query, str) or not query.strip():
            raise InputError("the query is empty; type what a shopper would search for")
        if len(query) > MAX_QUERY_CHARS:
            raise InputError(f"the query has {len(query)} characters; keep it under {MAX_QUERY_CHARS}")
        if not isinstance(k, int) or k <= 0:
            raise InputError(f"k must be a positive whole number, got {k!r}")
        if mode not in MODES:
            raise InputError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        if fusion_ not in FUSIONS:
            raise InputError(f"fusion must be one of {', '.join(FUSIONS)}, not {fusion_!r}")
        return query.strip()

    def encode_query(self, query: str, exact: bool = False, store: VectorStore | None = None,
                     prefix: str | None = None) -> np.ndarray:
        """The query's vector, in ``query_precision()``: the fastest pass for a lone query.
        ``exact`` keeps float32, which ``search(explain=True)`` uses so that its parts add up to
        the float32 score. Pooled from ``query_token_vectors`` (as ``Encoder.encode`` pools), so
        the match grids of the results reuse this very pass. Every search runs its own pass (a
        search costs what the engine costs); only explanations read the kept ones."""
        _, Q = self.query_token_vectors(query, exact, fresh=True, store=store, prefix=prefix)
        from qkv.model.pooling import pool

        cfg = self.encoder.config
        v = pool(Q[None], np.ones((1, len(Q)), dtype=bool), cfg.pooling)[0].astype(np.float32)
        if cfg.normalize:
            v /= max(float(np.linalg.norm(v)), 1e-12)
        return v

    def query_token_vectors(self, query: str, exact: bool = False, fresh: bool = False,
                            store: VectorStore | None = None, prefix: str | None = None) -> tuple:
        """(Tokens, last-layer token vectors) of the query's pass (``encode_query``): the query
        with the prefix ``store``'s manifest records (``query_prefix``; none for MiniLM), kept in a
        small LRU keyed by model, precision and text: a search and the explanations of its results
        (``explain_titles``), in this request or the next, run the model on the query once.
        ``fresh`` runs the pass even when one is kept; ``prefix`` (a plan's) stands for the
        manifest's. Cut to the model's window as
        ``Encoder.encode(truncate=True)`` cuts."""
        enc = self.encoder
        precision = "float32" if exact else query_precision()
        if prefix is None:
            prefix = (self.store if store is None else store).manifest.extra.get("query_prefix", "")
        text = prefix + query
        key = (enc.name, precision, text)
        hit = None if fresh else self._query_vectors.get(key)
        if hit is not None:
            return hit
        from qkv.model.threads import blas_threads

        tok = enc.tokenizer
        content = tok.content([text])[0]
        width = enc.config.window_tokens - tok.n_special
        if len(content.ids) > width:
            import warnings

            warnings.warn(f"query cut from {len(content.ids) + tok.n_special} to {width + tok.n_special} tokens",
                          stacklevel=3)
        t = tok.wrap(text, content, 0, min(width, len(content.ids)))
        with blas_threads(enc.threads):
            hidden = enc.forward(np.asarray([t.ids], dtype=np.int64), np.ones((1, len(t)), dtype=bool),
                                 precision=precision)
        out = (t, np.ascontiguousarray(hidden[0], dtype=np.float32))
        self._query_vectors.put(key, out)
        return out

    def query_vectors(self, queries: list[str], exact: bool = False, store: VectorStore | None = None,
                      batch_size: int = 64) -> np.ndarray:
        """The queries' vectors as the index's titles were embedded: with the query prefix its
        manifest records (E5: "query: ", titles "passage: "; none for MiniLM), by its model (the
        encoder is checked against the manifest's fingerprint when the index opens), in
        ``query_precision()`` (``exact``: float32, which explanations need so that their parts add
        up to the very score returned). Many queries at once (evaluation); a search's lone query
        goes through ``encode_query``, the same vector."""
        from qkv.search.build import prefixed

        st = self.store if store is None else store
        return self.encoder.encode(prefixed(st.manifest, queries, "query"), batch_size=batch_size, truncate=True,
                                   precision="float32" if exact else query_precision())

    def retrieve(self, query: str, k: int = 10, mode: str = "hybrid", where: str | Filter | None = None,
                 fusion_: str = "score", alpha: float = fusion.ALPHA, candidates: int = CANDIDATES,
                 vector: np.ndarray | None = None, exact: bool = False,
                 translate: bool = True, spell: bool = True) -> list[tuple[str, float, dict]]:
        """Ranked (id, score, details) without fetching rows; ``vector`` skips query encoding;
        ``exact``: see ``encode_query``; ``translate``, ``spell``: see ``plan``."""
        st = self.store
        query, flt = self._check(query, k, mode, fusion_), self._filter(where, st)
        return self._retrieve(st, self.plan(query, translate, st, spell), k, mode, flt, fusion_, alpha, candidates,
                              vector, exact, {})

    @staticmethod
    def _filter(where, st: VectorStore) -> Filter | None:
        flt = parse_filter(where) if isinstance(where, str) or where is None else where
        if flt is not None:
            flt = flt.check({"id": "text", "title": "text", **{f.name: f.kind for f in st.fields()}})
        return flt

    def _retrieve(self, st: VectorStore, plan: QueryPlan, k, mode, flt, fusion_, alpha, candidates, vector,
                  exact, t: dict[str, float]) -> list[tuple[str, float, dict]]:
        """Retrieval and fusion of a planned query; seconds per stage go into ``t``."""
        t.update({"encode": 0.0, "ann": 0.0, "keyword": 0.0, "fuse": 0.0, "fetch": 0.0})
        # An English query's groups over a bilingual catalog (crosslingual.english_groups) change the
        # hybrid ranking only (fused with the plain query's cosines, no feedback): keyword and dense
        # modes search it as typed, as they rank by one side's own score.
        english = plan.translation is None
        if english and plan.groups and mode != "hybrid":
            plan = QueryPlan(plan.query, plan.dense[0], plan.dense, plan.query_prefix, corrected=plan.corrected)
        if plan.translated and (not english or mode == "hybrid"):  # structured keyword query (crosslingual)
            from qkv.search import crosslingual

            t0 = time.perf_counter()
            if vector is None and mode != "keyword":
                vector = self.dense_vector(plan, exact, st)
            t1 = time.perf_counter()
            out, _ = crosslingual.retrieve(st, list(plan.groups), vector, k, mode, flt, fusion_,
                                           alpha, k if mode == "dense" else max(k, candidates),
                                           feedback_docs=0 if english else None, calibrate=english)
            t["encode"], t["translated search"] = t1 - t0, time.perf_counter() - t1
            return out
        return self._ranked(st, plan, k, mode, flt, fusion_, alpha, candidates, vector, exact, t)

    def _ranked(self, st, plan: QueryPlan, k, mode, flt, fusion_, alpha, candidates, vector, exact, t):
        depth = k if mode != "hybrid" else max(k, candidates)
        kw_query = plan.keyword
        if mode == "hybrid" and fusion_ == "score":
            cands = self._slot_candidates(st, plan, depth, flt, vector, t, exact)
            t0 = time.perf_counter()
            out = self._fuse_slots(st, kw_query, cands, k, alpha)
            t["fuse"] = time.perf_counter() - t0
            return out
        dense: list = []
        kw: list = []
        if mode in ("dense", "hybrid"):
            t0 = time.perf_counter()
            vector = self.dense_vector(plan, exact, st) if vector is None else vector
            t1 = time.perf_counter()
            dense = st.dense_search(vector, depth, flt)
            t["encode"], t["ann"] = t1 - t0, time.perf_counter() - t1
        if mode in ("keyword", "hybrid"):
            t0 = time.perf_counter()
            kw = st.keyword_search(kw_query, depth, flt)
            t["keyword"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = self.fuse(mode, dense, kw, k, vector, fusion_, alpha, query=kw_query, store=st)
        t["fuse"] = time.perf_counter() - t0
        return out

    def _slot_candidates(self, st: VectorStore, plan: QueryPlan, depth: int, flt, vector, t: dict[str, float],
                         exact: bool = False) -> tuple:
        """Each side's candidates in the store's slot space (``dense_slots``/``keyword_slots``):
        (query vector, dense slots, their cosines, keyword slots, their BM25). Slots are whatever
        handles the store uses (row numbers, or the ids themselves)."""
        t0 = time.perf_counter()
        vector = self.dense_vector(plan, exact, st) if vector is None else vector
        vector = np.asarray(vector, np.float32)
        t1 = time.perf_counter()
        d_slots, d_cos = st.dense_slots(vector, depth, flt)
        t2 = time.perf_counter()
        k_slots, k_bm25 = st.keyword_slots(plan.keyword, depth, flt)
        t["encode"], t["ann"], t["keyword"] = t1 - t0, t2 - t1, time.perf_counter() - t2
        return vector, d_slots, d_cos, k_slots, k_bm25

    @staticmethod
    def _fuse_slots(st: VectorStore, kw_query: str, cands: tuple, k: int, alpha: float) -> list[tuple[str, float, dict]]:
        """Hybrid score fusion of the two slot candidate lists: the same ranking as ``fuse`` (a test
        compares them), but only the ``k`` products returned are looked up by id, and the fusion
        is array arithmetic instead of dicts of 400 candidates."""
        vector, d_slots, d_cos, k_slots, k_bm25 = cands
        d_pos = {s: r for r, s in enumerate(d_slots.tolist())}
        k_list = k_slots.tolist()
        extra = np.array([s for s in k_list if s not in d_pos], dtype=k_slots.dtype)
        slots = np.concatenate([d_slots, extra])
        handles = slots.tolist()
        cos = np.concatenate([d_cos.astype(np.float64),
                              (st.slot_vectors(extra) @ vector).astype(np.float64) if len(extra) else np.zeros(0)])
        kw = np.zeros(len(slots))
        if len(k_slots):
            matched = st.matched_counts(kw_query, k_slots)  # BM25 × matched terms^p, as fusion.coverage_weighted
            weighted = k_bm25 * np.maximum(1, matched).astype(np.float64) ** fusion.COVERAGE_POWER
            pos = {s: i for i, s in enumerate(handles)}
            kw[[pos[s] for s in k_list]] = weighted
        fused = fusion.score_fusion_arrays(cos, kw, alpha)
        if len(fused) > k:  # the top k, plus any tied with the k-th (ties go by id, as in ``fuse``)
            cut = np.partition(fused, len(fused) - k)[len(fused) - k]
            pick = np.flatnonzero(fused >= cut)
        else:
            pick = np.arange(len(fused))
        ids = st.ids_of(slots[pick])
        k_pos = {s: r for r, s in enumerate(k_list, 1)}
        top = sorted(((ids[handles[i]], float(fused[i]), int(i)) for i in pick.tolist() if handles[i] in ids),
                     key=lambda x: (-x[1], x[0]))[:k]
        out = []
        for pid, score, i in top:
            s = handles[i]
            dr = d_pos[s] + 1 if s in d_pos else None
            kr = k_pos.get(s)
            out.append((pid, score, {"dense_rank": dr, "dense_score": float(cos[i]), "keyword_rank": kr,
                                     "keyword_score": float(k_bm25[kr - 1]) if kr else None}))
        return out

    def fuse(self, mode: str, dense: list, kw: list, k: int, vector: np.ndarray | None = None,
             fusion_: str = "score", alpha: float = fusion.ALPHA, query: str | None = None,
             coverage: bool = True, store: VectorStore | None = None) -> list[tuple[str, float, dict]]:
        """Rank the store's dense and keyword hits by ``mode`` (hybrid: fused, see ``fusion``);
        ``query`` enables the matched-terms weighting of BM25 (``coverage``)."""
        st = self.store if store is None else store
        d_rank = {h.id: (r, h.score) for r, h in enumerate(dense, 1)}
        k_rank = {h.id: (r, h.score) for r, h in enumerate(kw, 1)}
        if mode == "dense":
            ranked = [(h.id, h.score) for h in dense]
        elif mode == "keyword":
            ranked = [(h.id, h.score) for h in kw]
        elif fusion_ == "rrf":
            ranked = fusion.ranked(fusion.rrf([[h.id for h in dense], [h.id for h in kw]]), k)
        else:
            cos = {h.id: h.score for h in dense}
            extra = [h.id for h in kw if h.id not in cos]
            if extra:  # exact cosine for keyword-only candidates
                for pid, v in zip(extra, st.get_vectors(extra) @ np.asarray(vector, np.float32)):
                    cos[pid] = float(v)
                    d_rank[pid] = (None, float(v))
            kscores = {h.id: h.score for h in kw}
            if query is not None and kw and coverage:
                parts = st.keyword_terms(query, list(kscores))
                if parts:
                    kscores = fusion.coverage_weighted(kscores, {i: len(p) for i, p in parts.items()})
            ranked = fusion.ranked(fusion.score_fusion(cos, kscores, alpha), k)
        out = []
        for pid, s in ranked[:k]:
            dr, ds = d_rank.get(pid, (None, None))
            kr, ks = k_rank.get(pid, (None, None))
            out.append((pid, float(s), {"dense_rank": dr, "dense_score": ds, "keyword_rank": kr, "keyword_score": ks}))
        return out

    def explain_titles(self, query: str, titles: list[str], keyword_terms=None,
                       store: VectorStore | None = None, exact: bool = False) -> list[MatchExplanation]:
        """The token grids of ``query`` against ``titles`` (``qkv.search.explain``), embedded as the
        index embeds them (its manifest's query/passage prefixes), so each grid sums to the cosine
        searched. For a translated query this is the original's grid (the dense score mixes in
        the translation's cosine: ``mix_vectors``). The query's token vectors come from its search
        pass (``query_token_vectors``, same ``exact``), the titles' from a bounded cache (float32;
        emptied when a new generation is served), so explaining the results of a search costs
        little more than the search; each grid sums to the cosine of that query pass and the
        title's float32 vector."""
        m = (self.store if store is None else store).manifest
        q = query.strip()
        qt, Q = self.query_token_vectors(q, exact, store=store)
        ad = self.adapter(store, q)  # W Q_i: their mean is W q̄, so the grid sums to the adapted cosine
        return explain_titles(self.encoder, q, list(titles), keyword_terms,
                              query_prefix=m.extra.get("query_prefix", ""),
                              passage_prefix=m.extra.get("passage_prefix", ""),
                              query_vectors=(qt, Q if ad is None else ad.tokens(Q)),
                              title_cache=self._title_vectors)

    def _exact_dense(self, res: SearchResult, e: MatchExplanation, mode: str) -> dict:
        """For an index whose titles were embedded in bfloat16 (its vectors within ~5e-4 in cosine
        of float32 ones), an explained result reports the float32 cosine its grid sums to."""
        if self.store.manifest.extra.get("precision", "float32") == "float32" or not e.exact:
            return {}
        fix = {"dense_score": e.cosine} if res.dense_score is not None else {}
        if mode == "dense":
            fix["score"] = e.cosine
        return fix

    def search(self, query: str, k: int = 10, mode: str = "hybrid", where: str | Filter | None = None,
               explain: bool = False, fusion: str = "score", translate: bool = True,
               spell: bool = True) -> SearchResponse:
        """The top ``k`` products for ``query`` (a ``SearchResponse``: its results, see
        ``SearchResult``, its plan and timings); ``where`` filters on fields; ``explain`` adds the
        token grid and BM25 terms of each result; a Chinese query is also searched in English
        (``translate``; the response's and each result's ``searched_as`` say as what); an English
        word no title holds is searched as its correction (``spell``; the response's ``corrected``
        says as what)."""
        st = self.store  # one generation for the whole search, even if ``refresh`` swaps it meanwhile
        query, flt = self._check(query, k, mode, fusion), self._filter(where, st)
        t: dict[str, float] = {}
        t0 = time.perf_counter()
        plan = self.plan(query, translate, st, spell)
        translate_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        vector = None if mode == "keyword" else self.dense_vector(plan, explain, st)  # as _retrieve would
        encode_s = time.perf_counter() - t0
        ranked = self._retrieve(st, plan, k, mode, flt, fusion, self.fusion_alpha(st, plan), CANDIDATES, vector, explain,
                                t)
        t["encode"] = encode_s
        if plan.translation is not None:
            t["translate"] = translate_s
        t0 = time.perf_counter()
        rows = st.get_rows([pid for pid, _, _ in ranked])
        t["fetch"] = time.perf_counter() - t0
        out = []
        for r, ((pid, s, d), row) in enumerate(zip(ranked, rows), 1):
            row = dict(row or {"id": pid, "title": ""})
            title = row.pop("title")
            row.pop("id", None)
            out.append(SearchResult(r, pid, title, s, row, **d, searched_as=plan.searched_as))
        if explain and out:
            t0 = time.perf_counter()
            terms = st.keyword_terms(plan.keyword, [x.id for x in out])  # as the keyword side searched it
            # the grid of the text the dense side searched (a corrected query's correction)
            exps = self.explain_titles(plan.dense[0], [x.title for x in out], [terms.get(x.id, []) for x in out], st,
                                       exact=True)
            out = [SearchResult(**{**x.__dict__, "explanation": e, **self._exact_dense(x, e, mode)})
                   for x, e in zip(out, exps)]
            t["explain"] = time.perf_counter() - t0
        return SearchResponse(tuple(out), plan, t, vector)
