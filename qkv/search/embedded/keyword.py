"""The keyword engine of a generation: top-k OR-BM25 with bounded cost however large the catalog
(query plans over the postings arrays, or over FTS5 for terms FTS5 splits), each returned row's
per-term BM25 shares (explanations, coverage weighting in fusion), and the shares' memo."""

from __future__ import annotations

import threading
from typing import Sequence

import numpy as np

from qkv.errors import InputError
from qkv.search import termweights
from qkv.search.embedded import bm25
from qkv.search.embedded.generations import Generation
from qkv.search.embedded.postings import Postings
from qkv.search.embedded.rows import Rows
from qkv.search.embedded.vocabulary import Vocabulary, quote

KEYWORD_BUDGET = 20_000  # postings one FTS5-planned keyword query reads (0.1 µs each; see _sql_plan)
SCORE_BUDGET = 2_000  # rows one FTS5 bm25() query may score (~3 µs each; see _scored)
MAXSCORE_POOL = 5_000  # rows the postings plan completes with the common terms' shares, at most
POSTINGS_BUDGET = 100_000  # postings the in-memory plan scores exactly per query (~10 ns each; _postings_plan)


def rare_terms(terms: list[str], dfs: dict[str, int], budget: int | None = None) -> list[str]:
    """The rarest terms (``terms`` sorted rarest first) whose postings fit ``budget`` (default
    ``KEYWORD_BUDGET``) together; always at least one."""
    budget = KEYWORD_BUDGET if budget is None else budget
    rare, used = [], 0
    for t in terms:
        if rare and used + dfs[t] > budget:
            break
        rare.append(t)
        used += dfs[t]
    return rare


class Keywords:
    """Keyword search on one generation."""

    def __init__(self, gen: Generation, rows: Rows):
        self.gen = gen
        self.db = gen.db
        self.rows = rows
        self.vocab = Vocabulary(gen)
        self.postings = Postings(gen)
        # how the postings are scored: FTS5's BM25, or the learned weights' own (the manifest's term_weights)
        self.scoring = termweights.scoring_of(gen.manifest.extra)
        self._shares: tuple[tuple, dict] = ((), {})  # the last query's BM25 shares per slot
        self._inst = False  # temp.fts_inst (fts5vocab 'instance': term → rows, one per occurrence) made
        self._acc = threading.local()  # a per-thread score accumulator over all slots

    def score_with(self, scoring: bm25.Scoring) -> None:
        """Score with another BM25 from now on (a sweep over k1/b on one open index; the shares
        memo is dropped so no share of the old formula is reused)."""
        self.scoring = scoring
        self._shares = ((), {})

    def query_terms(self, query: str) -> list[str]:
        """The keyword terms searched for ``query`` (``Vocabulary.query_dfs``)."""
        return list(self.vocab.query_dfs(query))

    def postings_cover(self, terms: Sequence[str]) -> bool:
        """Whether every term is one indexed token, so the postings arrays can score it (a term FTS5
        splits into several tokens, a phrase, is matched by FTS5 itself)."""
        return all(self.vocab.stem(t) is not None for t in terms)

    # ------------------------------------------------------------------ search
    def search(self, query, k, filter=None) -> tuple[np.ndarray, np.ndarray]:
        """(slots, BM25) of the top ``k`` by BM25 of the OR of the query's terms, best first (ties
        by slot), planned so that one query scores at most a few times the budgets' rows."""
        if k <= 0:
            raise InputError(f"k must be at least 1, got {k}")
        dfs = self.vocab.query_dfs(query)
        if not dfs or not self.gen.count:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        where, params = self.rows.where(filter)
        terms = sorted(dfs, key=lambda t: (dfs[t], t))  # rarest first
        if self.postings_cover(terms):
            allowed = self.rows.allowed_mask(filter) if where else None  # as unfiltered, then masked
            scores = self._postings_plan(terms, dfs, k, allowed)
        elif where:
            scores = self._sql_plan_filtered(dfs, k, where, params)
        else:
            scores = self._sql_plan(terms, dfs, k)
        top = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
        return np.array([s for s, _ in top], dtype=np.int64), np.array([v for _, v in top], dtype=np.float64)

    def _accumulator(self) -> np.ndarray:
        acc = getattr(self._acc, "a", None)
        if acc is None or len(acc) != self.gen.slots:
            acc = self._acc.a = np.zeros(self.gen.slots)
        return acc

    def _term_postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        return self.postings.of(self.vocab.stem(term))

    def _part(self, term: str, rows: np.ndarray, tf: np.ndarray) -> np.ndarray:
        n, avgdl = self.postings.stats()
        dl = self.postings.doc_lengths()
        return bm25.weight(bm25.idf(n, self.vocab.df(term)), tf.astype(np.float64), dl[rows], avgdl, self.scoring)

    def _postings_plan(self, terms: list[str], dfs: dict[str, int], k: int,
                       allowed: np.ndarray | None = None) -> dict[int, float]:
        """Top-k OR-BM25 from the generation's postings arrays, MaxScore-style (Turtle & Flood
        1995): the rarest terms whose postings fit ``POSTINGS_BUDGET`` (all terms in most queries)
        are scored exactly for every row containing them (numpy, ~10 ns a posting); the best 4·k of
        those rows get the common terms' shares by binary search in those terms' postings; if a row
        left out could still reach the top k (its rare-term score plus the common terms' largest
        possible share, ``bm25.max_weight`` each, is not below the k-th full score), one wider pool
        takes every such row (at most ``MAXSCORE_POOL``). Exact for every row containing a rare term
        unless that cap binds; rows matching only common terms can be missed when the k-th score is
        below the common terms' largest possible sum. Shares of the returned rows go to the memo
        (fusion, explain). ``allowed`` (a boolean mask over slots, from a filter) drops the other
        rows after the rare terms are scored; the bound below then only has fewer rows to beat."""
        rare = rare_terms(terms, dfs, POSTINGS_BUDGET)
        common = terms[len(rare):]
        n, _ = self.postings.stats()
        acc = self._accumulator()
        post = {}
        try:
            for t in rare:  # a term's rows are distinct, so one fancy-indexed add per term is exact
                rows, tf = self._term_postings(t)
                rows = np.asarray(rows, dtype=np.int64)
                part = self._part(t, rows, np.asarray(tf))
                post[t] = (rows, part)
                acc[rows] += part
            touched = np.concatenate([r for r, _ in post.values()]) if post else np.zeros(0, np.int64)
            if allowed is not None:
                touched = touched[allowed[touched]]
            score = acc[touched]
        finally:
            for rows, _ in post.values():  # leave the accumulator zeroed for the next query
                acc[rows] = 0.0
        if not len(touched):
            return {}
        bound = sum(bm25.max_weight(bm25.idf(n, dfs[t]), self.scoring) for t in common)

        def complete(top):  # the distinct rows of ``touched[top]``: rare-term score, full score
            cand, first = np.unique(touched[top], return_index=True)
            base = score[top][first]
            full = base.copy()
            for t in common:
                rows, tf = self._term_postings(t)
                if not len(rows):
                    continue
                pos = np.minimum(np.searchsorted(rows, cand), len(rows) - 1)
                hit = np.asarray(rows[pos] == cand)
                if hit.any():
                    part = self._part(t, cand[hit], np.asarray(tf[pos[hit]]))
                    full[hit] += part
                    post[t] = (cand[hit], part)
            return cand, base, full

        m = min(len(touched), (4 * k if common else k) * len(rare))  # a row appears once per rare term it has
        cand, base, full = complete(np.argpartition(-score, m - 1)[:m] if m < len(touched) else slice(None))
        if common and m < len(touched):
            kth = np.partition(full, len(full) - k)[len(full) - k] if len(full) >= k else -np.inf
            if base.min() + bound >= kth:  # rows left out could still reach the top k: one wider pool,
                wide = np.flatnonzero(score + bound >= kth)  # every row that can, at most MAXSCORE_POOL
                cap = MAXSCORE_POOL * len(rare)
                if len(wide) > cap:
                    wide = wide[np.argpartition(-score[wide], cap - 1)[:cap]]
                cand, base, full = complete(wide)
        keep = np.argsort(-full, kind="stable")[:max(k, 1)] if len(cand) > k else np.arange(len(cand))
        memo = self._memo(terms)
        out: dict[int, float] = {}
        shares: dict[int, dict[str, float]] = {int(s): {} for s in cand[keep]}
        for t in terms:  # each returned row's per-term shares, from the postings scored above
            if t not in post:
                continue
            rows, part = post[t]
            sel = cand[keep]
            pos = np.minimum(np.searchsorted(rows, sel), len(rows) - 1)
            hit = rows[pos] == sel
            for s, v in zip(sel[hit].tolist(), part[pos[hit]].tolist()):
                shares[s][t] = v
        for i in keep.tolist():
            s = int(cand[i])
            memo[s] = shares[s]
            out[s] = float(full[i])
        return out

    # ------------------------------------------------------------------ plans over FTS5 (phrases)
    def _scored(self, terms: list[str], op: str, limit: int, where: str, params: list) -> dict[int, float]:
        """slot → BM25 (FTS5's, over ``terms``) of the best ``limit`` rows matching ``terms`` joined
        by ``op``, scoring at most ``SCORE_BUDGET`` rows: FTS5 computes bm25() for every matching
        row before sorting (~3 µs a row), so when more rows match, only the first
        ``SCORE_BUDGET`` in slot order are ranked (a bounded sample, like a search engine's
        ``terminate_after``; the dense side ranks within such large sets in hybrid search)."""
        expr = f" {op} ".join(map(quote, terms))
        join = " JOIN products p ON p.slot = fts.rowid" if where else ""
        base = f"FROM fts{join} WHERE fts MATCH ?{where}"
        cut = self.db.execute(f"SELECT fts.rowid {base} LIMIT 1 OFFSET ?", [expr, *params, SCORE_BUDGET]).fetchone()
        bound = " AND fts.rowid < ?" if cut else ""
        args = [expr, *params] + ([cut[0]] if cut else []) + [limit]
        found = dict(self.db.execute(f"SELECT fts.rowid, -bm25(fts) {base}{bound} ORDER BY bm25(fts) LIMIT ?", args))
        if found and not self.scoring.is_fts5:
            # a term-weighted index scores with its own k1/b over the weights: FTS5 chose the rows (by
            # its BM25 over the repeat counts), the index's formula scores them, from their stored
            # documents, like every other plan (a term FTS5 splits into several tokens has no share)
            shares = self.term_scores(list(found), terms, use_memo=False)
            found = {s: float(sum(shares.get(s, {}).values())) for s in found}
        return found

    def _sql_plan(self, terms: list[str], dfs: dict[str, int], k: int) -> dict[int, float]:
        """slot → OR-BM25 for up to ``k`` candidates through FTS5, for queries with a term the
        postings arrays cannot score (``postings_cover``), at bounded cost.

        FTS5 has no top-k pruning: ``MATCH 'a OR b' ORDER BY bm25 LIMIT k`` computes bm25() (~3 µs,
        it looks up each row's length) for every product containing any query word: 110 ms for a
        5-word query over 1M generated titles. Instead, in the spirit of MaxScore (Turtle & Flood
        1995: the rare terms decide the top, common ones add little):
          1. when the terms' postings (Σ df) exceed ``KEYWORD_BUDGET``: the AND of all terms first
             (FTS5 walks the rarest term's postings and seeks the others; its bm25() equals the OR's
             score on every row it returns); enough rows → done;
          2. the OR of the rarest terms whose postings fit ``KEYWORD_BUDGET`` (all of them in small
             catalogs), scored in numpy from the postings (fts5vocab's per-occurrence rows through
             ``group_concat``, ~0.3 µs a posting) and the stored row lengths: exact BM25 over these terms;
          3. when step 2 left terms out, its best ``1.5·k + 2·len(step 1)`` rows get the left-out terms'
             BM25 shares (``term_scores``); otherwise step 2's top ``k`` are exact as they are.
        Exact when the rare terms are all the terms; otherwise products matching only the common
        words, or whose common words would have lifted them past step 2's cut, can be missed
        (docs/search.md measures the effect)."""
        found: dict[int, float] = {}
        if len(terms) > 1 and sum(dfs.values()) > KEYWORD_BUDGET:
            found = self._scored(terms, "AND", k, "", [])
            if len(found) >= k:
                return found
        rare = rare_terms(terms, dfs)
        n, avgdl = self.postings.stats()
        dl = self.postings.doc_lengths()
        slots, parts, used_terms = [], [], []
        if not self._inst:
            self.db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_inst USING fts5vocab(main, fts, 'instance')")
            self._inst = True
        for t in rare:
            stem = self.vocab.stem(t)
            if stem is not None:  # one row per occurrence, so a row's repeats are its tf
                sql = "SELECT group_concat(doc, ' ') FROM (SELECT doc FROM temp.fts_inst WHERE term = ? LIMIT ?)"
                args = (stem, 2 * KEYWORD_BUDGET)
            else:
                sql = "SELECT group_concat(rowid, ' ') FROM (SELECT rowid FROM fts WHERE fts MATCH ? LIMIT ?)"
                args = (quote(t), KEYWORD_BUDGET)
            s = self.db.execute(sql, args).fetchone()[0]
            if not s:
                continue
            occ = np.fromstring(s, dtype=np.int64, sep=" ")
            if len(occ) == args[1]:  # cut off: the last row's occurrences may be incomplete
                occ = occ[occ != occ[-1]]
            if not len(occ):
                continue
            rows, tf = np.unique(occ, return_counts=True)
            slots.append(rows)
            used_terms.append(t)
            parts.append(bm25.weight(bm25.idf(n, dfs[t]), tf, dl[rows], avgdl, self.scoring))
        if slots:
            allr = np.concatenate(slots)
            uniq, inv = np.unique(allr, return_inverse=True)
            score = np.bincount(inv, weights=np.concatenate(parts), minlength=len(uniq))
            if found:
                keep = ~np.isin(uniq, np.fromiter(found, dtype=np.int64))
                uniq, score = uniq[keep], score[keep]
            missing = [t for t in terms if t not in rare]
            m = min(len(uniq), k + (k // 2 + 2 * len(found) if missing else 0))  # margin: common terms may lift rows
            top = np.sort(uniq[np.argpartition(-score, m - 1)[:m]] if m < len(uniq) else uniq)
            memo = self._memo(terms)
            shares: dict[int, dict[str, float]] = {int(s): {} for s in top}
            for t, rows, contrib in zip(used_terms, slots, parts):  # each term's share, from its postings
                pos = np.minimum(np.searchsorted(rows, top), len(rows) - 1)
                hit = rows[pos] == top
                for s, v in zip(top[hit].tolist(), contrib[pos[hit]].tolist()):
                    shares[s][t] = v
            if missing:
                for s, extra in self.term_scores(top.tolist(), missing, use_memo=False).items():
                    shares[s].update(extra)
            for s, sh in shares.items():
                memo[s] = sh
                found[s] = sum(sh.values())
        return found

    def _sql_plan_filtered(self, dfs: dict[str, int], k: int, where: str, params: list) -> dict[int, float]:
        """``_sql_plan`` for a filtered search: the same steps with FTS5 scoring the filtered rows."""
        terms = sorted(dfs, key=lambda t: (dfs[t], t))
        if len(terms) == 1 or sum(dfs.values()) <= KEYWORD_BUDGET:
            return self._scored(terms, "OR", k, where, params)
        found = self._scored(terms, "AND", k, where, params)
        if len(found) >= k:
            return found
        rare = rare_terms(terms, dfs)
        part = {s: v for s, v in self._scored(rare, "OR", k + len(found), where, params).items() if s not in found}
        missing = [t for t in terms if t not in rare]
        if part and missing:
            for s, shares in self.term_scores(list(part), missing, use_memo=False).items():
                part[s] += sum(shares.values())
        found.update(part)
        return found

    # ------------------------------------------------------------------ per-term shares
    def _memo(self, terms: Sequence[str]) -> dict[int, dict[str, float]]:
        """The BM25 shares already computed for this query's rows (search, then fusion, then
        explain ask for the same rows)."""
        key = tuple(sorted(terms))
        if self._shares[0] != key:
            self._shares = (key, {})
        return self._shares[1]

    def term_scores(self, slots: Sequence[int], terms: Sequence[str],
                    use_memo: bool = True) -> dict[int, dict[str, float]]:
        """slot → {term: BM25 share} for the terms each row contains, computed here instead of by
        FTS5: a ``MATCH 't' AND rowid IN (…)`` query recomputes t's idf by walking all its postings
        once per listed row (0.4 ms a row for a term in 3% of 1M titles). A row's tokens are its
        stored normalised text split on spaces, stemmed like FTS5 stems (cached per word); the
        tests check the shares against FTS5's own bm25()."""
        n, avgdl = self.postings.stats()
        want: dict[str, list[tuple[str, float]]] = {}  # stem → query terms with that stem ("cat", "cats")
        for t in terms:
            st = self.vocab.stem(t)
            if st is not None:
                want.setdefault(st, []).append((t, bm25.idf(n, self.vocab.df(t))))
        memo = self._memo(terms) if use_memo else {}
        out = {s: memo[s] for s in map(int, slots) if s in memo}
        rows = [(slot, ktext.split()) for slot, ktext in self.rows.ktexts([s for s in map(int, slots) if s not in memo])]
        stems = self.vocab.stems(w for _, words in rows for w in words)
        for slot, words in rows:
            tf: dict[str, int] = {}
            for w in words:
                st = stems[w]
                if st in want:
                    tf[st] = tf.get(st, 0) + 1
            dl = len(words)
            out[slot] = memo[slot] = {t: bm25.weight(idf, f, dl, avgdl, self.scoring)
                                      for st, f in tf.items() for t, idf in want[st]}
        return out

    def matched_counts(self, query: str, slots: np.ndarray) -> np.ndarray:
        """How many of ``query``'s keyword terms each slot's title matches (the shares come from the
        keyword search's memo when it just scored them)."""
        shares = self.term_scores([int(s) for s in slots], self.query_terms(query))
        return np.array([len(shares.get(s, ())) for s in slots.tolist()], dtype=np.int64)  # keys ⊆ terms

    def terms_of(self, query: str, ids: Sequence[str]) -> dict[str, list[tuple[str, float]]]:
        """``keyword_terms``: BM25 is a sum over the query's terms with corpus-wide statistics, so
        each term's one-term score on a row is exactly its share of the OR query's score there."""
        terms = self.query_terms(query)
        slots = {s: pid for pid, s in zip(ids, self.rows.slots_of(ids)) if s is not None}
        out: dict[str, list[tuple[str, float]]] = {pid: [] for pid in slots.values()}
        for s, shares in self.term_scores(list(slots), terms).items():
            out[slots[s]] = [(t, shares[t]) for t in terms if t in shares]
        return out
