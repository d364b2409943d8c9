"""The attribute model: train on labelled titles, extract (attribute, value, span, confidence).

    >>> model = AttributeModel.train(read_jsonl("train.jsonl"), qkv.load())
    >>> model.save("lures.qkvattr")
    >>> AttributeModel.load("lures.qkvattr").extract(["SEAPESCA Metal VIB 55mm 11g Lure"])
    [[Attribute(attr='Brand Name', value='SEAPESCA', start=0, end=8, confidence=0.97), ...]]

A model file is a safetensors file: the CRF weights as tensors, and in its metadata the format
version, the encoder's name and weight fingerprint, the layers used, the labels, the sparse
feature vocabulary and the gazetteer. A file made with another encoder is refused.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from qkv.attributes.align import AlignStats, attr_frequency, bio_labels_for, label_spans
from qkv.attributes.crf import CRF, Batch
from qkv.attributes.data import Example
from qkv.attributes.features import (Gazetteer, TitleTokens, cached_token_vectors, dense_features,
                                     sparse_features, tokenize_titles)
from qkv.errors import InputError, ModelError
from qkv.progress import Count

FORMAT = "qkv-attributes"
VERSION = 1
# Outputs of layers 4 and 5 (0-based 3, 4): the encoder stops after 5 of MiniLM's 6 layers. On the
# dev splits this is within 0.5 micro-F1 of layers 4 and 6 (docs/attributes.md), for 1/6 less
# encoder work; layer 4 alone (4 of 6 layers) is faster still and costs AE-110K about 0.6.
DEFAULT_LAYERS = (3, 4)
# Per encoder, where another choice measured better (docs/attributes.md, "Chinese").
LAYERS_FOR = {"intfloat/multilingual-e5-small": (7,)}


def default_layers(encoder) -> tuple[int, ...]:
    """The layers a new model uses with ``encoder`` when none are asked for."""
    return LAYERS_FOR.get(getattr(encoder, "name", ""), DEFAULT_LAYERS)


@dataclass(frozen=True)
class Attribute:
    """One extracted value: ``title[start:end] == value``."""

    attr: str
    value: str
    start: int
    end: int
    confidence: float
    normalized: str | None = None

    def as_dict(self) -> dict:
        d = {"attr": self.attr, "value": self.value, "start": self.start, "end": self.end,
             "confidence": round(self.confidence, 4)}
        if self.normalized is not None:
            d["normalized"] = self.normalized
        return d


@dataclass
class TrainReport:
    titles: int
    tokens: int
    attributes: int
    features: int
    seconds: float
    optimiser: dict
    alignment: AlignStats
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["alignment"] = self.alignment.as_dict()
        return d


class AttributeModel:
    def __init__(self, crf: CRF, attrs: list[str], vocab: dict[str, int], gazetteer: Gazetteer,
                 settings: dict, encoder_name: str, encoder_fingerprint: str,
                 mean: np.ndarray, scale: np.ndarray, category_attrs: dict[str, list[str]],
                 info: dict | None = None, trims: dict | None = None, aliases: dict | None = None,
                 proj: np.ndarray | None = None):
        self.crf = crf
        self.attrs = attrs
        self.vocab = vocab
        self.gazetteer = gazetteer
        self.settings = settings
        self.encoder_name = encoder_name
        self.encoder_fingerprint = encoder_fingerprint
        self.mean, self.scale, self.proj = mean, scale, proj  # dense: ((x - mean) @ proj) * scale
        self.category_attrs = category_attrs
        self.info = info or {}
        self.trims: dict[tuple[str, str], tuple[int, int]] = trims or {}  # (attr, text lower) -> (ds, de)
        self.aliases: dict[str, dict[str, list[str]]] = aliases or {}  # category or "*" -> attr -> also-attrs
        self._encoder = None

    # ------------------------------------------------------------------ encoder
    def bind(self, encoder) -> "AttributeModel":
        """Use ``encoder``; refused unless it is the one the model was trained with."""
        fp = encoder.fingerprint()
        if fp != self.encoder_fingerprint:
            raise ModelError(
                f"this attribute model was trained with encoder {self.encoder_name!r} (weights "
                f"{self.encoder_fingerprint}); the encoder given is {encoder.name!r} (weights {fp}). "
                "Load the model's own encoder, or retrain the attribute model with this one")
        self._encoder = encoder
        return self

    @property
    def encoder(self):
        if self._encoder is None:  # the one it was trained with, shared in the process (checked by bind)
            from qkv.model import shared_encoder

            self.bind(shared_encoder(self.encoder_name))
        return self._encoder

    # ------------------------------------------------------------------ features
    @staticmethod
    def _featurize(enc, titles, categories, gaz, layers, cache_dir, excludes=None, progress=None,
                   use_dense=True, han_words=False, chars=False):
        tts = tokenize_titles(enc, titles, han_words=han_words)
        nonempty = [i for i, t in enumerate(tts) if len(t)]
        if use_dense:
            vecs = cached_token_vectors(enc, [titles[i] for i in nonempty], tuple(layers), cache_dir,
                                        progress=progress)
            dense = {i: dense_features(tts[i], v) for i, v in zip(nonempty, vecs)}
        else:
            dense = {i: np.zeros((len(tts[i]), 0), np.float32) for i in nonempty}
        sparse = {i: sparse_features(tts[i], categories[i] if categories else None, gaz,
                                     excludes[i] if excludes else frozenset(), chars=chars) for i in nonempty}
        return tts, nonempty, dense, sparse

    def _batch(self, nonempty, tts, dense, sparse, labels=None) -> Batch:
        return _make_batch(nonempty, tts, dense, sparse, self.vocab, self.mean, self.scale, self.proj, labels)

    # Extraction computes the CRF's emission scores straight from the encoder vectors: the dense
    # features are linear in them — [v, word mean of v], centred, projected, scaled, times Wd —
    # so the whole chain folds into one [hidden·layers, 2K] matrix applied to v, the word mean
    # taken after it (a mean commutes with a linear map). That is K columns per half instead of
    # 2·hidden·layers → 256 → K, and no [tokens, 2·hidden·layers] feature array is built.
    def _dense_head(self) -> tuple[np.ndarray, np.ndarray]:
        key = (id(self.crf.Wd), id(self.proj), id(self.mean), id(self.scale))
        if getattr(self, "_head_key", None) != key:
            Wd = self.crf.Wd.astype(np.float64)
            P = self.proj.astype(np.float64) if self.proj is not None else np.eye(len(self.mean))
            W = (P * self.scale.astype(np.float64)) @ Wd  # [2·hidden·layers, K]
            c = -(self.mean.astype(np.float64) @ W)
            h = W.shape[0] // 2
            self._head = (np.ascontiguousarray(np.concatenate([W[:h], W[h:]], axis=1), dtype=np.float32), c)
            self._head_key = key
        return self._head

    def _dense_emissions(self, vecs: list[np.ndarray], word_of: list[np.ndarray]) -> np.ndarray:
        """Packed [N, K] dense emission scores from each title's token vectors."""
        W, c = self._dense_head()
        K = self.crf.K
        G = np.concatenate(vecs) @ W  # [N, 2K]: token half, word half
        nw = [int(w.max()) + 1 for w in word_of]
        gw = np.concatenate(word_of) + np.repeat(np.cumsum(nw) - nw, [len(w) for w in word_of])
        avg = sp.csr_matrix((np.ones(len(gw), np.float32), (gw, np.arange(len(gw)))), shape=(sum(nw), len(gw)))
        counts = np.asarray(avg.sum(1)).ravel()
        word_mean = (avg @ G[:, K:]) / np.maximum(counts, 1)[:, None]
        E = G[:, :K].astype(np.float64)
        E += word_mean[gw]
        E += c
        return E

    def _sparse_emissions(self, ids: list[list[list[int]]]) -> np.ndarray:
        """Packed [N, K] sparse emission scores (float64) from each title's feature ids
        (``sparse_features(..., vocab=self.vocab)``: each token's ids, each once)."""
        rows = [r for title in ids for r in title]
        if not self.crf.F:
            return np.zeros((len(rows), self.crf.K))
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum([len(r) for r in rows], out=indptr[1:])
        cols = np.fromiter((k for r in rows for k in r), dtype=np.int64, count=int(indptr[-1]))
        Xs = sp.csr_matrix((np.ones(len(cols)), cols, indptr), shape=(len(rows), self.crf.F))
        return Xs @ self.crf.Ws

    # ------------------------------------------------------------------ training
    @classmethod
    def train(cls, examples: list[Example], encoder, **options) -> tuple["AttributeModel", TrainReport]:
        """Learn a tagger from labelled titles (options: see ``_train``), under the encoder's BLAS
        thread count: the optimiser's many small products are slower with a second thread here."""
        from qkv.model.threads import blas_threads

        with blas_threads(encoder.threads):
            return cls._train(examples, encoder, **options)

    @classmethod
    def _train(cls, examples: list[Example], encoder, *, layers=None, mode: str = "crf",
              use_dense: bool = True, use_sparse: bool = True, use_gazetteer: bool = True,
              l2: float = 1.0, l2_sparse: float = 0.1, max_iter: int = 100, min_count: int = 1,
              dense_dim: int | None = 256, han_words: bool = True, char_features: bool = False,
              cache_dir: str | Path | None = None, progress=None) -> tuple["AttributeModel", TrainReport]:
        """Learn a tagger from labelled titles. ``progress(stage, done, total)`` (``qkv.progress``)
        is called as the work goes on: stage "encode" counts title windows, "fit" optimiser iterations."""
        t0 = time.perf_counter()
        layers = tuple(default_layers(encoder) if layers is None else layers)
        examples = list(examples)
        if not examples:
            raise InputError("no training examples")
        freq = attr_frequency(examples)
        attrs = sorted(freq, key=lambda a: (-freq[a], a))
        if not attrs:
            raise InputError("the training data has no attribute values at all; nothing to learn")
        attr_index = {a: k for k, a in enumerate(attrs)}
        order = {a: k for k, a in enumerate(attrs)}
        titles = [ex.title for ex in examples]
        cats = [ex.category for ex in examples]
        has_cat = any(c for c in cats)
        gaz = Gazetteer.build(examples) if use_gazetteer else None
        excludes = [frozenset((v.lower(), a) for a, vs in ex.values.items() for v in vs) for ex in examples]
        tts, nonempty, dense, sparse = cls._featurize(encoder, titles, cats if has_cat else None, gaz, layers,
                                                      cache_dir, excludes, progress, use_dense, han_words,
                                                      char_features)
        stats = AlignStats()
        labels = {i: bio_labels_for(examples[i], tts[i], attr_index, stats, order) for i in range(len(examples))}
        if not nonempty:
            raise InputError("every training title is empty; nothing to learn")
        # sparse vocabulary from the training tokens
        counts = Counter(f for i in nonempty for fs in sparse[i] for f in fs) if use_sparse else Counter()
        vocab = {f: k for k, f in enumerate(sorted(f for f, c in counts.items() if c >= min_count))}
        D = next(iter(dense.values())).shape[1]
        proj = None
        if D:
            # Centre, optionally project on the top principal directions (fewer weights, faster
            # L-BFGS iterations, little lost: the directions are fitted on the training tokens),
            # then scale each feature to unit variance so one L2 weight suits them all.
            allv = np.concatenate([dense[i] for i in nonempty])
            mean = allv.mean(0)
            allv -= mean
            if dense_dim and dense_dim < D:
                rows = allv[np.random.default_rng(0).permutation(len(allv))[:20000]]
                _, _, vt = np.linalg.svd(rows, full_matrices=False)
                proj = np.ascontiguousarray(vt[:dense_dim].T.astype(np.float32))
                allv = allv @ proj
            scale = 1.0 / np.maximum(allv.std(0), 1e-6)
            D = allv.shape[1]
            del allv
        else:
            mean = np.zeros(0, np.float32)
            scale = np.zeros(0, np.float32)
        cat_attrs: dict[str, set] = {}
        for ex in examples:
            if ex.category:
                cat_attrs.setdefault(ex.category, set()).update(a for a, vs in ex.values.items() if vs)
        model = cls(CRF(1 + 2 * len(attrs), D, len(vocab), mode), attrs, vocab, gaz,
                    {"layers": list(layers), "mode": mode, "use_dense": use_dense, "use_sparse": use_sparse,
                     "use_gazetteer": use_gazetteer, "use_category": has_cat, "l2": l2,
                     "l2_sparse": l2_sparse, "max_iter": max_iter, "min_count": min_count},
                    encoder.name, encoder.fingerprint(), mean.astype(np.float32), scale.astype(np.float32),
                    {c: sorted(s) for c, s in cat_attrs.items()}, proj=proj)
        model.settings["dense_dim"] = dense_dim
        model.settings["han_words"] = han_words  # absent in older files: those keep whole runs as words
        model.settings["char_features"] = char_features
        model.trims, model.aliases = _learn_snaps(stats)
        batch = model._batch(nonempty, tts, dense, sparse, labels)
        opt = model.crf.fit(batch, l2=l2, l2_sparse=l2_sparse, max_iter=max_iter, progress=progress)
        model._encoder = encoder
        report = TrainReport(len(examples), int(batch.lengths.sum()), len(attrs), len(vocab),
                             round(time.perf_counter() - t0, 2), opt, stats)
        model.info = {"trained": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                      "train": {k: v for k, v in report.as_dict().items() if k != "extra"}}
        return model, report

    # ------------------------------------------------------------------ extraction
    def extract(self, titles, categories=None, **options) -> list[list[Attribute]]:
        """Attributes found in each title (options: see ``_extract``), under the encoder's BLAS
        thread count."""
        from qkv.model.threads import blas_threads

        with blas_threads(self.encoder.threads):
            return self._extract(titles, categories, **options)

    def _extract(self, titles, categories=None, *, all_spans: bool = False, normalize: bool = False,
                min_confidence: float = 0.0, batch_size: int = 512, progress=None,
                cache_dir=None) -> list[list[Attribute]]:
        """Attributes found in each title (absent attributes are simply not listed).

        One value per attribute (the most confident span) unless ``all_spans``. ``categories``
        (one per title, or None) adds the category feature and keeps to attributes seen with that
        category in training. ``normalize`` fills ``Attribute.normalized`` (see
        ``qkv.attributes.normalize``)."""
        if isinstance(titles, str):
            raise InputError("extract takes a list of titles; wrap a single title in a list")
        titles = list(titles)
        for i, t in enumerate(titles):
            if not isinstance(t, str):
                raise InputError(f"title {i} is {type(t).__name__}, not a string")
        if categories is not None:
            categories = list(categories)
            if len(categories) != len(titles):
                raise InputError(f"{len(categories)} categories for {len(titles)} titles; give one per title or none")
        enc = self.encoder
        out: list = [None] * len(titles)
        # Tokenised once (the words and the encoder both use it); similar token counts together,
        # so the encoder's batches and the CRF's recursions pad little.
        contents = enc.tokenizer.content(titles) if titles else []
        order = sorted(range(len(titles)), key=lambda i: len(contents[i].ids))
        use_cat = categories is not None and self.settings.get("use_category")
        count = Count(progress, "extract", len(titles))
        for b0 in range(0, len(titles), batch_size):
            idx = order[b0:b0 + batch_size]
            chunk = [titles[i] for i in idx]
            cats = [categories[i] for i in idx] if use_cat else None
            for i, r in zip(idx, self._extract_chunk(enc, chunk, cats, all_spans, normalize, min_confidence, cache_dir,
                                                     [contents[i] for i in idx])):
                out[i] = r
            count.add(len(chunk))
        return out

    def _extract_chunk(self, enc, titles, cats, all_spans, normalize, min_confidence, cache_dir, contents):
        tts = tokenize_titles(enc, titles, contents, han_words=self.settings.get("han_words", False))
        nonempty = [i for i, t in enumerate(tts) if len(t)]
        results: list[list[Attribute]] = [[] for _ in titles]
        if not nonempty:
            return results
        lengths = np.asarray([len(tts[i]) for i in nonempty], dtype=np.int64)
        chars = self.settings.get("char_features", False)
        E = self._sparse_emissions([sparse_features(tts[i], cats[i] if cats else None, self.gazetteer,
                                                    vocab=self.vocab, chars=chars) for i in nonempty])
        if self.settings.get("use_dense", True):
            vecs = cached_token_vectors(enc, [titles[i] for i in nonempty], tuple(self.settings["layers"]),
                                        cache_dir, contents=[contents[i] for i in nonempty])
            if any(len(v) != n for v, n in zip(vecs, lengths)):
                raise ModelError("the encoder's token vectors do not line up with the title's tokens "
                                 "(a tokenizer change?); this is a bug in qkv, please report it")
            E += self._dense_emissions(vecs, [tts[i].word_of for i in nonempty])
        E += self.crf.b
        labels, conf = self.crf.decode(Batch(None, None, lengths), E)
        if normalize:
            from qkv.attributes.normalize import normalize_value
        for i, lab, cf in zip(nonempty, labels, conf):
            allowed = None
            if cats is not None and cats[i] in self.category_attrs:
                allowed = set(self.category_attrs[cats[i]])
            t = titles[i]
            spans = []
            for attr, s, e, c in label_spans(tts[i], lab, cf, self.attrs):
                d = self.trims.get((attr, t[s:e].lower()))
                if d is not None and 0 <= s + d[0] < e + d[1] <= len(t):
                    s, e = s + d[0], e + d[1]
                spans.append((attr, s, e, c))
            alias = self.aliases.get(cats[i] if cats is not None and cats[i] in self.aliases else "*", {})
            have = {sp[0] for sp in spans}
            for attr, s, e, c in list(spans):
                for other in alias.get(attr, ()):
                    if other not in have:
                        spans.append((other, s, e, c))
                        have.add(other)
            best: dict[str, tuple] = {}
            keep = []
            for attr, s, e, c in spans:
                if c < min_confidence or (allowed is not None and attr not in allowed):
                    continue
                if all_spans:
                    keep.append((attr, s, e, c))
                elif attr not in best or c > best[attr][3]:
                    best[attr] = (attr, s, e, c)
            if not all_spans:
                keep = sorted(best.values(), key=lambda x: x[1])
            results[i] = [Attribute(a, t[s:e], s, e, c, normalize_value(a, t[s:e]) if normalize else None)
                          for a, s, e, c in keep]
        return results

    # ------------------------------------------------------------------ files
    def save(self, path: str | Path) -> Path:
        from safetensors.numpy import save_file

        path = Path(path)
        meta = {"format": FORMAT, "version": VERSION, "encoder": self.encoder_name,
                "encoder_fingerprint": self.encoder_fingerprint, "attrs": self.attrs,
                "settings": self.settings, "mode": self.crf.mode,
                "vocab": sorted(self.vocab, key=self.vocab.get),
                "gazetteer": self.gazetteer.counts if self.gazetteer is not None else None,
                "category_attrs": self.category_attrs, "info": self.info,
                "trims": [[a, t, ds, de] for (a, t), (ds, de) in self.trims.items()], "aliases": self.aliases}
        tensors = {"Wd": self.crf.Wd, "Ws": self.crf.Ws.astype(np.float16), "b": self.crf.b,
                   "T": self.crf.T, "start": self.crf.start, "end": self.crf.end,
                   "mean": self.mean, "scale": self.scale}
        if self.proj is not None:
            tensors["proj"] = self.proj
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(tmp),
                  metadata={"qkv_attributes": json.dumps(meta, ensure_ascii=False)})
        tmp.replace(path)  # never leave a half-written model behind
        return path

    @classmethod
    def load(cls, path: str | Path, encoder=None) -> "AttributeModel":
        """Read a model file. With ``encoder``, check now that it is the model's encoder;
        otherwise the model's own encoder is loaded (and checked) on first use."""
        from safetensors import safe_open

        path = Path(path)
        if not path.is_file():
            raise InputError(f"no attribute model at {path}; train one with `qkv attrs train --data FILE --out {path}`")
        try:
            with safe_open(str(path), framework="numpy") as f:
                raw = (f.metadata() or {}).get("qkv_attributes")
                tensors = {k: f.get_tensor(k) for k in f.keys()}
        except Exception as e:  # safetensors raises its own error types for foreign files
            raise ModelError(f"{path} is not a qkv attribute model ({type(e).__name__}: {e})") from None
        if raw is None:
            raise ModelError(f"{path} is a safetensors file but not a qkv attribute model (no qkv_attributes metadata)")
        meta = json.loads(raw)
        if meta.get("format") != FORMAT:
            raise ModelError(f"{path} is not a qkv attribute model (format {meta.get('format')!r})")
        if meta.get("version") != VERSION:
            raise ModelError(f"{path} is attribute-model version {meta.get('version')}; this qkv reads version "
                             f"{VERSION}. Retrain it with `qkv attrs train`")
        attrs = meta["attrs"]
        vocab = {f: k for k, f in enumerate(meta["vocab"])}
        K = 1 + 2 * len(attrs)
        D = tensors["Wd"].shape[0]
        crf = CRF(K, D, len(vocab), meta["mode"])
        crf.Wd, crf.Ws = tensors["Wd"], tensors["Ws"].astype(np.float32)
        crf.b, crf.T, crf.start, crf.end = tensors["b"], tensors["T"], tensors["start"], tensors["end"]
        gaz = Gazetteer(meta["gazetteer"]) if meta.get("gazetteer") is not None else None
        model = cls(crf, attrs, vocab, gaz, meta["settings"], meta["encoder"], meta["encoder_fingerprint"],
                    tensors["mean"], tensors["scale"], meta.get("category_attrs", {}), meta.get("info", {}),
                    {(a, t): (ds, de) for a, t, ds, de in meta.get("trims", [])}, meta.get("aliases", {}),
                    tensors.get("proj"))
        if encoder is not None:
            model.bind(encoder)
        return model

    def __repr__(self) -> str:
        return (f"AttributeModel({len(self.attrs)} attributes, encoder={self.encoder_name!r}, "
                f"mode={self.crf.mode}, features={len(self.vocab)} sparse + {self.crf.D} dense)")


def _learn_snaps(stats: AlignStats, min_count: int = 2, min_ratio: float = 0.5):
    """Span cuts and co-labels seen often enough in training to repeat at extraction."""
    by_text: dict[tuple[str, str], Counter] = {}
    for (a, t, ds, de), n in stats.snaps.items():
        by_text.setdefault((a, t), Counter())[(ds, de)] += n
    trims = {}
    for key, c in by_text.items():
        (ds, de), n = c.most_common(1)[0]
        if (ds, de) != (0, 0) and n > c.get((0, 0), 0):
            trims[key] = (ds, de)
    aliases: dict[str, dict[str, list[str]]] = {}
    pooled: Counter = Counter()
    pooled_labels: Counter = Counter()
    for (cat, a), n in stats.labels_by_cat.items():
        pooled_labels[a] += n
    for (cat, a, b), n in stats.colabels.items():
        pooled[(a, b)] += n
        if n >= min_count and n >= min_ratio * stats.labels_by_cat.get((cat, a), 0):
            aliases.setdefault(cat or "*", {}).setdefault(a, []).append(b)
    for (a, b), n in pooled.items():
        if n >= min_count and n >= min_ratio * pooled_labels.get(a, 0):
            aliases.setdefault("*", {}).setdefault(a, []).append(b)
    return trims, aliases


def _make_batch(nonempty, tts: list[TitleTokens], dense, sparse, vocab, mean, scale, proj, labels=None) -> Batch:
    lengths = np.asarray([len(tts[i]) for i in nonempty], dtype=np.int64)
    if len(mean):
        Xd = np.concatenate([dense[i] for i in nonempty]).astype(np.float32)
        Xd -= mean
        if proj is not None:
            Xd = Xd @ proj
        Xd *= scale
    else:
        Xd = np.zeros((int(lengths.sum()), 0), np.float32)
    Xs = _sparse_matrix([fs for i in nonempty for fs in sparse[i]], vocab)
    y = np.concatenate([labels[i] for i in nonempty]) if labels is not None else None
    return Batch(Xd, Xs, lengths, y)


def _sparse_matrix(rows: list[list[str]], vocab: dict[str, int]) -> sp.csr_matrix:
    """Binary CSR [len(rows), len(vocab)]: 1 where a row has a feature in the vocabulary."""
    get = vocab.get
    indptr = [0]
    cols: list[int] = []
    for fs in rows:
        ids = {get(f) for f in fs}
        ids.discard(None)
        cols.extend(sorted(ids))
        indptr.append(len(cols))
    return sp.csr_matrix((np.ones(len(cols), np.float64), np.asarray(cols, dtype=np.int64),
                          np.asarray(indptr, dtype=np.int64)), shape=(len(rows), len(vocab)))
