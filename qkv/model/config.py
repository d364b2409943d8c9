"""A Hugging Face ``config.json`` (plus the sentence-transformers files) as a frozen dataclass."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from qkv.errors import ModelError

# model_type -> family. RoBERTa-like models number positions after the padding index.
SUPPORTED = {
    "bert": "bert",
    "roberta": "roberta",
    "xlm-roberta": "roberta",
    "camembert": "roberta",
}
SUPPORTED_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")


@dataclass(frozen=True)
class ModelConfig:
    model_type: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"
    pad_token_id: int = 0
    # Sentence-transformers settings (defaults when the files are absent: mean pooling, no norm).
    pooling: str = "mean"  # mean | cls | max
    normalize: bool = False
    max_seq_length: int | None = None
    # What the model was trained to see before a query / a document (E5: "query: ", "passage: ");
    # empty for models without them. Encoder.encode(role=...) applies them on request.
    query_prefix: str = ""
    passage_prefix: str = ""

    @property
    def family(self) -> str:
        return SUPPORTED[self.model_type]

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def position_offset(self) -> int:
        """RoBERTa positions start at padding_idx + 1; BERT's at 0."""
        return self.pad_token_id + 1 if self.family == "roberta" else 0

    @property
    def max_tokens(self) -> int:
        """Longest token sequence (special tokens included) the position table allows."""
        return self.max_position_embeddings - self.position_offset

    @property
    def window_tokens(self) -> int:
        """Length the model was trained to embed at (sentence-transformers' max_seq_length)."""
        return min(self.max_seq_length or self.max_tokens, self.max_tokens)

    @classmethod
    def from_dir(cls, path: str | Path) -> "ModelConfig":
        path = Path(path)
        cfg_file = path / "config.json"
        if not cfg_file.is_file():
            raise ModelError(f"{path} has no config.json; a model directory needs config.json, "
                             "model.safetensors and tokenizer.json")
        try:
            raw = json.loads(cfg_file.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ModelError(f"{cfg_file} is not valid JSON: {e}") from None
        return cls.from_dict(raw, path)

    @classmethod
    def from_dict(cls, raw: dict, path: Path | None = None) -> "ModelConfig":
        mtype = raw.get("model_type")
        if mtype not in SUPPORTED:
            raise ModelError(
                f"unsupported architecture model_type={mtype!r} ({raw.get('architectures')}); "
                f"qkv runs BERT-family encoders: {', '.join(sorted(SUPPORTED))} "
                "(BERT, MiniLM, BGE, E5, RoBERTa, XLM-R ...)")
        if raw.get("position_embedding_type", "absolute") != "absolute":
            raise ModelError(f"position_embedding_type={raw['position_embedding_type']!r} is not supported; "
                             "only absolute position embeddings are")
        act = raw.get("hidden_act", "gelu")
        if act not in SUPPORTED_ACTIVATIONS:
            raise ModelError(f"hidden_act={act!r} is not supported; supported: {', '.join(SUPPORTED_ACTIVATIONS)}")
        try:
            hidden, heads = int(raw["hidden_size"]), int(raw["num_attention_heads"])
            fields = dict(
                model_type=mtype,
                vocab_size=int(raw["vocab_size"]),
                hidden_size=hidden,
                num_layers=int(raw["num_hidden_layers"]),
                num_heads=heads,
                intermediate_size=int(raw["intermediate_size"]),
                max_position_embeddings=int(raw["max_position_embeddings"]),
                type_vocab_size=int(raw.get("type_vocab_size", 2)),
                layer_norm_eps=float(raw.get("layer_norm_eps", 1e-12)),
                hidden_act=act,
                pad_token_id=int(raw.get("pad_token_id", 0) or 0),
            )
        except KeyError as e:
            raise ModelError(f"config.json lacks the field {e.args[0]!r}") from None
        if hidden % heads:
            raise ModelError(f"hidden_size {hidden} is not divisible by num_attention_heads {heads}")
        if path is not None:
            fields.update(_sentence_transformers_settings(path))
        return cls(**fields)


def _sentence_transformers_settings(path: Path) -> dict:
    """Pooling, normalisation and max length from modules.json / 1_Pooling / sentence_bert_config."""
    out: dict = {}
    modules_file = path / "modules.json"
    if not modules_file.is_file():
        return out
    modules = json.loads(modules_file.read_text(encoding="utf-8"))
    for m in modules:
        kind = m.get("type", "")
        if kind.endswith(".Normalize"):
            out["normalize"] = True
        elif kind.endswith(".Pooling"):
            pcfg = path / m.get("path", "1_Pooling") / "config.json"
            if pcfg.is_file():
                p = json.loads(pcfg.read_text(encoding="utf-8"))
                if p.get("pooling_mode_cls_token"):
                    out["pooling"] = "cls"
                elif p.get("pooling_mode_max_tokens"):
                    out["pooling"] = "max"
                else:
                    out["pooling"] = "mean"
    sb = path / "sentence_bert_config.json"
    if sb.is_file():
        msl = json.loads(sb.read_text(encoding="utf-8")).get("max_seq_length")
        if msl:
            out["max_seq_length"] = int(msl)
    return out
