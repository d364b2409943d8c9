"""Could a lighter tokenizer replace `tokenizers` for multilingual-e5-small? Measured, not used.

    .venv/bin/pip install sentencepiece && .venv/bin/python bench/_tokenizer_light.py

Builds a SentencePiece Unigram model from what tokenizer.json carries (the 250,002 pieces and
scores, the precompiled nmt_nfkc character map, the special ids) and compares it with `tokenizers`
on the parity inputs of tests/model/test_e5_parity.py plus a few normalisation cases: resident
memory each takes, and whether pieces and character offsets are the same. qkv keeps the lighter
one only if it is exact (issue 14); sentencepiece is not a dependency of qkv. Not run by
`make bench` (the file starts with "_").
"""

import base64
import gc
import importlib.util
import json
from pathlib import Path


def rss_mib() -> float:
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20


def main() -> int:
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    from qkv.model.hub import e5_tokenizer

    path = e5_tokenizer()
    d = json.loads(path.read_text(encoding="utf-8"))
    m = pb.ModelProto()
    m.trainer_spec.model_type = pb.TrainerSpec.UNIGRAM
    m.trainer_spec.unk_id, m.trainer_spec.bos_id, m.trainer_spec.eos_id, m.trainer_spec.pad_id = 3, 0, 2, 1
    ns = m.normalizer_spec
    ns.name = "nmt_nfkc"
    ns.precompiled_charsmap = base64.b64decode(d["normalizer"]["normalizers"][0]["precompiled_charsmap"])
    ns.add_dummy_prefix = ns.remove_extra_whitespaces = ns.escape_whitespaces = True
    kind = pb.ModelProto.SentencePiece
    for p, s in d["model"]["vocab"]:
        sp = m.pieces.add()
        sp.piece, sp.score = p, s
        sp.type = (kind.CONTROL if p in ("<s>", "</s>", "<pad>") else kind.UNKNOWN if p == "<unk>"
                   else kind.USER_DEFINED if p == "<mask>" else kind.NORMAL)
    blob = m.SerializeToString()
    del d, m
    gc.collect()
    r = rss_mib()
    light = spm.SentencePieceProcessor(model_proto=blob)
    del blob
    gc.collect()
    light_mib = rss_mib() - r
    from tokenizers import Tokenizer

    r = rss_mib()
    hf = Tokenizer.from_file(str(path))
    hf_mib = rss_mib() - r
    spec = importlib.util.spec_from_file_location(
        "parity", Path(__file__).resolve().parents[1] / "tests" / "model" / "test_e5_parity.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    texts = mod.INPUTS + ["  double  spaces  ", "Ⅻ ﬁ ｆｕｌｌｗｉｄｔｈ　ｓｐａｃｅ", "e\u0301 combining", "tab\there",
                          "<mask> x", "ǅ ﬀ ℌ ① ㍿"]
    ids_differ = offsets_differ = 0
    for t in texts:
        e = hf.encode(t, add_special_tokens=False)
        pieces = light.encode(t, return_type="proto").pieces
        char_at = [i for i, ch in enumerate(t) for _ in ch.encode("utf-8")] + [len(t)]
        if [p.id for p in pieces] != e.ids:
            ids_differ += 1
            print("pieces differ:", repr(t[:40]), e.tokens[:6], [p.piece for p in pieces][:6])
        elif [(char_at[p.begin], char_at[p.end]) for p in pieces] != [tuple(o) for o in e.offsets]:
            offsets_differ += 1
    print(f"resident memory: sentencepiece {light_mib:.0f} MiB, tokenizers {hf_mib:.0f} MiB")
    print(f"{len(texts)} texts: pieces differ on {ids_differ}, only offsets on {offsets_differ}: "
          + ("exact" if ids_differ + offsets_differ == 0 else "NOT exact: qkv keeps tokenizers"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
