"""Export a transformers encoder's last hidden state to ONNX, for the ONNX Runtime rows of the
engine benchmarks (bench/engine.py for MiniLM, bench/_multilingual.py for multilingual-e5-small)."""

from __future__ import annotations

from pathlib import Path


def export_last_hidden_state(model, out: Path, max_tokens: int) -> None:
    """Write ``model`` (a transformers BertModel in eval mode) to ``out`` with dynamic batch and
    length. The TorchScript exporter (dynamo=False) bakes the trace's mask handling into the graph
    and gives wrong results on other inputs with transformers 5; the torch.export-based one does
    not. Traced with padding so the mask path is kept; written atomically."""
    import torch

    class Hidden(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    ids = torch.randint(1000, 2000, (2, 16))
    mask = torch.ones((2, 16), dtype=torch.long)
    mask[1, 9:] = 0
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq", max=max_tokens)
    prog = torch.onnx.export(Hidden(model), (ids, mask), input_names=["input_ids", "attention_mask"],
                             output_names=["last_hidden_state"], dynamo=True,
                             dynamic_shapes={"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}})
    tmp = out.with_suffix(".tmp.onnx")
    prog.save(str(tmp))
    tmp.replace(out)


def quantized(path: Path, per_channel: bool) -> Path:
    """ONNX Runtime's dynamic int8 quantization of an exported model, cached beside it: weights
    int8 (QInt8) per tensor (``quantize_dynamic``'s default, the file bench/engine_gemm.py makes:
    "-int8.onnx") or per output channel (``per_channel=True``: "-int8pc.onnx"); activations are
    quantised on the fly, per tensor, as uint8. Written atomically."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    out = path.with_name(path.stem + ("-int8pc.onnx" if per_channel else "-int8.onnx"))
    if not out.is_file():
        tmp = out.with_suffix(".tmp.onnx")
        quantize_dynamic(str(path), str(tmp), weight_type=QuantType.QInt8, per_channel=per_channel)
        tmp.replace(out)
    return out
