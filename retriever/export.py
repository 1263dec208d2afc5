"""Write the question encoder (`retriever.encoder`) of an index: the loaded FlagEmbedding network, exported to ONNX.

`ensure_encoder` runs at the end of every `vault2okf index`: when ``BUNDLE/.vault2okf/encoder`` is missing, damaged
or stale (another embedder, other weights, an older format) it exports the embedder that index already loaded,
into a temporary folder that is renamed into place, so a search sees the old encoder, none, or the new one.

The export traces the model that embedded the documents, so its weights are never loaded twice: the tracer writes
them from the model's own tensors. Constant folding is off, because it would add a transposed copy of every linear
layer's weights (half the model) while exporting; onnxruntime folds those transposes when a search opens the
encoder. A model over 2 GB (BGE-M3: 2.2 GB in fp32) is written with its tensors in external files, one at a time;
a smaller one (MiniLM: 90 MB) is serialised in memory once. The attention is traced in its eager form: traced
through SDPA, the vectors did not match (cosine about 0.95). At 150M parameters or more (BGE-M3) the fp32 export
is then fused, in a child process (`fuse_in_child`).
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from retriever.embed import M3_CLASSES, SMALL_MODEL, Embedder, embedder_fingerprint, verbose
from retriever.encoder import (
    INT8_MODEL_FILE,
    MODEL_FILE,
    SETTINGS_FILE,
    TOKENIZER_FILE,
    EncoderSettings,
    Pooling,
    Precision,
    encoder_dir,
    load_encoder,
)
from retriever.errors import RetrieverError

OPSET = 17
EXPORT_HINT = "the ONNX export needs `pip install onnx` (index time only)"


class ExportError(RetrieverError):
    """The embedder cannot be exported (not a FlagEmbedding model, no fast tokenizer, onnx missing)."""


def ensure_encoder(
    bundle_dir: Path | str,
    embedder: str,
    spec: str,
    load: Callable[[], Embedder],
    precision: Precision = Precision.FP32,
) -> str | None:
    """Export the question encoder unless a current one (at ``precision``) is there; a notice when it could not be
    written. ``load`` gives the index's embedder (already loaded when anything was embedded)."""
    if load_encoder(bundle_dir, embedder, spec, precision=precision)[0] is not None:  # current, loads and embeds
        return None
    try:
        export_encoder(bundle_dir, load(), embedder_fingerprint(spec) or "", precision)
    except ExportError as error:
        return f"no question encoder written ({error}): search and ask will load FlagEmbedding"
    return None


def export_encoder(
    bundle_dir: Path | str,
    embedder: Embedder,
    fingerprint: str,
    precision: Precision = Precision.FP32,
    *,
    fusion: bool | None = None,
) -> Path:
    """Export ``embedder`` (a `FlagEmbedder`) to ``BUNDLE/.vault2okf/encoder``, replacing what is there: at fp32
    the graph as traced, then fused (`fuse`, in a child process: `fuse_in_child`) when ``fusion`` (by default: for
    a model of SMALL_MODEL parameters or more, where it measured 1.88x the traced graph's chunks/s; within noise on
    MiniLM), at int8 only the quantised network (`quantize`)."""
    flag: Any = getattr(embedder, "model", None)
    network, pooling = _network(flag)
    tokenizer = getattr(flag, "tokenizer", None)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ExportError(f"the {embedder.name} embedder has no fast tokenizer (tokenizer.json) to export")
    final = encoder_dir(bundle_dir)
    for stale in final.parent.glob(f"{final.name}.*-*"):  # what a killed export left
        shutil.rmtree(stale, ignore_errors=True)
    part = final.with_name(f"{final.name}.part-{os.getpid()}")
    part.mkdir(parents=True)
    parameters = sum(p.numel() for p in network.parameters())
    try:
        _write_onnx(network, tokenizer, part / MODEL_FILE)
        fused = False
        if precision is Precision.INT8:
            _only_int8(part)
        elif fusion or (fusion is None and parameters >= SMALL_MODEL):
            config = network.config
            fused = fuse_in_child(part, config.num_attention_heads, config.hidden_size, pooling, _probe(tokenizer))
        backend.save(str(part / TOKENIZER_FILE))
        settings = EncoderSettings(
            embedder.name, embedder.spec, fingerprint, pooling, True, int(getattr(embedder, "max_length", 512)),
            embedder.dim, parameters, precision, fused=fused,
        )  # fmt: skip
        (part / SETTINGS_FILE).write_text(settings.to_json(), encoding="utf-8")
        _swap(part, final)
    finally:
        shutil.rmtree(part, ignore_errors=True)
    return final


FUSED_COSINE = 0.9999  # the fused network's vectors against the traced one's, per probe text, or it is not kept
Probe = dict[str, Any]  # a padded batch of token ids and its attention mask, as numpy int64 arrays


def fuse(folder: Path, heads: int, hidden: int, pooling: Pooling, probe: Probe) -> bool:
    """Replace the traced export in ``folder`` (``MODEL_FILE`` and, for a model over 2 GB, its tensor files) by
    onnxruntime's transformer fusion of it (`onnxruntime.transformers.optimizer`, BERT's recipe: XLM-RoBERTa and
    MiniLM are BERT-shaped): each layer's attention one ``Attention`` operator over one packed QKV product with the
    padding mask, the bias and GELU one ``BiasGelu`` (exact erf), each residual and LayerNorm one
    ``SkipLayerNormalization``. The same vectors (cosine >= 0.9999). Measured beside the traced graph on thellade's
    chunks (reports/bench-embedder-cost.txt, one run at load 5-6): 1.88x its chunks/s at BGE-M3's size, within
    noise on MiniLM (0.68x and 1.07x in two runs at load 8-10). In this process (the bench's way to measure it);
    `export_encoder` runs it through `fuse_in_child`, with the optimiser's shape inference on a weightless copy
    (`_optimised`): run here beside torch's model with the stock optimiser it took 18.9 GiB peak RSS on the
    BGE-M3-size stand-in.

    Kept only when every layer's attention fused and the fused network's pooled vectors on ``probe`` (a padded
    batch) have cosine >= FUSED_COSINE to the traced network's; otherwise (or when the optimiser fails) the traced
    export stays and this returns False. A full or read-only disk stays an OSError."""
    staged = folder / FUSED_DIR
    staged.mkdir()
    try:
        if not fuse_staged(folder, heads, hidden, pooling, probe):
            return False
        _adopt(folder)
        return True
    finally:
        shutil.rmtree(staged, ignore_errors=True)


FUSED_DIR = "fused"  # inside the export's part folder: the fused graph, until it has passed and is moved in
FUSED_EXIT = 0  # the child's exit status when the fused graph in FUSED_DIR passed; NOT_FUSED_EXIT when it did not
NOT_FUSED_EXIT = 3


def fuse_in_child(folder: Path, heads: int, hidden: int, pooling: Pooling, probe: Probe) -> bool:
    """`fuse`, with the optimiser and both checking sessions in a child process (``python -m retriever.export``),
    so their memory goes back to the system when it exits instead of stacking on the exporting process's (torch's
    model, the tracer's garbage). The child only writes into ``folder/FUSED_DIR``; this process moves the fused
    files in once the child says they passed, so a child that fails or is killed (out of memory) leaves the traced
    export in ``folder`` as it was, and this returns False."""
    import numpy as np

    staged = folder / FUSED_DIR
    staged.mkdir()
    try:
        np.savez(staged / "probe.npz", **probe)
        gc.collect()  # the tracer's leftovers, before a second process needs memory
        arguments = [str(folder), str(heads), str(hidden), pooling.value, str(staged / "probe.npz"), repr(FUSED_COSINE)]
        command = _fuse_command(arguments)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
            ).rstrip(os.pathsep),
        }
        quiet = None if verbose() else subprocess.DEVNULL
        done = subprocess.run(command, env=env, stdout=quiet, stderr=quiet, check=False)  # noqa: S603
        (staged / "probe.npz").unlink(missing_ok=True)
        if done.returncode != FUSED_EXIT or not (staged / MODEL_FILE).is_file():
            return False
        _adopt(folder)
        return True
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def _fuse_command(arguments: list[str]) -> list[str]:
    return [sys.executable, "-m", "retriever.export", "fuse", *arguments]


def fuse_staged(
    folder: Path, heads: int, hidden: int, pooling: Pooling, probe: Probe, cosine: float | None = None
) -> bool:
    """Write the fusion of ``folder``'s traced export into ``folder/FUSED_DIR`` and check it against the traced
    graph on ``probe``; True when it passed (`fuse`'s conditions). Nothing outside FUSED_DIR is touched."""
    model_path = folder / MODEL_FILE
    staged = folder / FUSED_DIR
    if not _write_fused(model_path, staged / MODEL_FILE, heads, hidden):
        return False
    gc.collect()  # the optimiser's copy of the graph, before two sessions open
    reference = _pooled(model_path, probe, pooling)
    fused = _pooled(staged / MODEL_FILE, probe, pooling)
    return reference is not None and _same(reference, fused, FUSED_COSINE if cosine is None else cosine)


def _adopt(folder: Path) -> None:
    """Replace the traced graph and its tensor files in ``folder`` by the fused ones in ``folder/FUSED_DIR``."""
    for path in list(folder.iterdir()):
        if path.is_file():
            path.unlink()
    for path in (folder / FUSED_DIR).iterdir():
        os.replace(path, folder / path.name)


def _child(arguments: list[str]) -> int:
    """``python -m retriever.export fuse FOLDER HEADS HIDDEN POOLING PROBE.npz COSINE``: `fuse_staged`, for
    `fuse_in_child`."""
    import numpy as np

    folder, heads, hidden, pooling, probe_file, cosine = arguments
    with np.load(probe_file) as arrays:
        probe = {name: arrays[name] for name in arrays.files}
    passed = fuse_staged(Path(folder), int(heads), int(hidden), Pooling(pooling), probe, float(cosine))
    return FUSED_EXIT if passed else NOT_FUSED_EXIT


def _write_fused(traced: Path, fused: Path, heads: int, hidden: int) -> bool:
    """The fusion of ``traced`` written to ``fused``; False when the optimiser fails or some attention did not fuse."""
    from onnx import external_data_helper

    try:
        with _quiet(), _quiet_logs():
            model = _optimised(traced, heads, hidden)
    except OSError:
        raise
    except Exception:  # an optimiser that does not know this graph: the traced export stays
        return False
    layers = sum(1 for node in model.model.graph.node if node.op_type == "Attention")
    traced_layers = sum(1 for node in model.model.graph.node if node.op_type == "Softmax")
    if layers == 0 or traced_layers:  # an attention left unfused: a graph this recipe does not know
        return False
    size = sum(
        init.ByteSize() for init in model.model.graph.initializer if not external_data_helper.uses_external_data(init)
    )
    big = size > 1_800_000_000
    model.save_model_to_file(str(fused), use_external_data_format=big)
    return True


def _optimised(traced: Path, heads: int, hidden: int) -> Any:
    """`onnxruntime.transformers.optimizer.optimize_model(traced, "bert", opt_level=0)`, with its symbolic shape
    inference run on a copy of the graph whose large tensors are shapes without data (`_weightless`): the stock
    optimiser copied the whole model for it (at 12 layers x 768 with BGE-M3's vocabulary, a 0.96 GB graph: peak RSS
    7.7 GB, 3.1 GB with this, the same fused operators and vectors)."""
    import onnx
    from onnxruntime import __version__ as version
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.onnx_model_bert import BertOnnxModel
    from onnxruntime.transformers.shape_infer_helper import SymbolicShapeInferenceHelper

    class Lean(BertOnnxModel):  # type: ignore[misc]
        def infer_runtime_shape(self, dynamic_axis_mapping: Any = None, update: bool = False) -> Any:
            if self.enable_shape_infer and (getattr(self, "shape_infer_helper", None) is None or update):
                self.shape_infer_helper = SymbolicShapeInferenceHelper(_weightless(self.model))
            return super().infer_runtime_shape(dynamic_axis_mapping or {}, update=False)

    model = Lean(onnx.load(str(traced)), heads, hidden)
    model.optimize(FusionOptions("bert"))
    model.topological_sort()
    model.model.producer_name, model.model.producer_version = "onnxruntime.transformers", version
    return model


def _weightless(model: Any) -> Any:
    """``model`` with every tensor over 64 KiB replaced by its name, type and shape (marked external, no data): what
    shape inference reads of the weights. The small ones (shapes, constants) are kept, their values used."""
    from onnx import TensorProto, helper

    tensors = []
    for tensor in model.graph.initializer:
        if tensor.ByteSize() > 1 << 16:
            stub = TensorProto(
                name=tensor.name, data_type=tensor.data_type, dims=tensor.dims, data_location=TensorProto.EXTERNAL
            )
            stub.external_data.add(key="location", value="absent")
            tensor = stub
        tensors.append(tensor)
    graph = model.graph
    light = helper.make_graph(
        list(graph.node), graph.name, list(graph.input), list(graph.output), tensors, value_info=list(graph.value_info)
    )
    return helper.make_model(light, opset_imports=list(model.opset_import), ir_version=model.ir_version)


def _probe(tokenizer: Any) -> Probe:
    texts = ["a question", "a longer question, checked with padding in its batch of two"]
    batch = tokenizer(texts, padding=True, return_tensors="np")
    return {"input_ids": batch["input_ids"].astype("int64"), "attention_mask": batch["attention_mask"].astype("int64")}


def _pooled(model: Path, probe: Probe, pooling: Pooling) -> Any:
    """The normalised vectors ``model`` gives the probe (as `OnnxEncoder` pools them); None when it does not run."""
    import numpy as np
    import onnxruntime

    from retriever.embed import physical_cores

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = physical_cores()
    options.log_severity_level = 3
    try:
        session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        hidden = session.run(None, probe)[0]
    except Exception:  # onnxruntime's errors have no common base
        return None
    mask = probe["attention_mask"]
    if pooling is Pooling.CLS:
        vectors = hidden[:, 0]
    else:
        vectors = (hidden * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def _same(reference: Any, fused: Any, cosine: float) -> bool:
    return (
        fused is not None and fused.shape == reference.shape and bool(((reference * fused).sum(axis=1) >= cosine).all())
    )


@contextlib.contextmanager
def _quiet_logs() -> Iterator[None]:
    """The optimiser's log lines (fusion counts, at INFO and WARNING) stay off unless ``vault2okf --verbose``."""
    import logging

    logger = logging.getLogger("onnxruntime.transformers")
    before = logger.level
    if not verbose():
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(before)


def _only_int8(folder: Path) -> None:
    """Quantise the fp32 export in ``folder`` to ``INT8_MODEL_FILE``, then remove the fp32 files."""
    scratch = folder / "fp32"
    scratch.mkdir()
    for path in list(folder.iterdir()):
        if path.is_file():
            os.replace(path, scratch / path.name)
    try:
        quantize(scratch / MODEL_FILE, folder / INT8_MODEL_FILE)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def quantize(fp32: Path, int8: Path) -> None:
    """onnxruntime's dynamic quantisation of an fp32 export: every MatMul's weights to uint8, per output channel,
    activations quantised per batch at run time; the embedding tables stay fp32. Of the recipes tried on MiniLM
    (signed or unsigned weights, per tensor or per channel, reduced range, embeddings quantised or not) this one
    came closest to fp32 (lowest cosine 0.987 on 128 thellade chunks; signed weights with reduced range 0.58: this
    AVX2 CPU has no VNNI). The export keeps each linear layer's weights behind a Transpose (constant folding is
    off, `_write_onnx`), which the quantiser does not look through: those transposes are folded first."""
    import onnx
    from onnx import numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(str(fp32))  # with its external tensors, for a model over 2 GB
    weights = {init.name: init for init in model.graph.initializer}
    folded = []
    for node in model.graph.node:
        if node.op_type == "Transpose" and len(node.input) == 1 and node.input[0] in weights:
            perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), None)
            array = numpy_helper.to_array(weights[node.input[0]])
            model.graph.initializer.append(numpy_helper.from_array(array.transpose(perm), node.output[0]))
            folded.append(node)
    for node in folded:
        model.graph.node.remove(node)
    used = {name for node in model.graph.node for name in node.input}
    keep = [init for init in model.graph.initializer if init.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(keep)
    staged = int8.with_name(f"{int8.stem}.folded.onnx")
    big = sum(init.ByteSize() for init in keep) > 1_800_000_000
    try:
        onnx.save(model, str(staged), save_as_external_data=big, location=f"{staged.name}.data" if big else None)
        del model, weights, keep, folded
        with _quiet(), _export_errors():
            quantize_dynamic(
                staged, int8, weight_type=QuantType.QUInt8, per_channel=True, op_types_to_quantize=["MatMul"],
                use_external_data_format=False,
            )  # fmt: skip
    finally:
        staged.unlink(missing_ok=True)
        staged.with_name(f"{staged.name}.data").unlink(missing_ok=True)


def _network(flag: Any) -> tuple[Any, Pooling]:
    """The transformers encoder inside a FlagEmbedding model, and the pooling of its dense vector."""
    if type(flag).__name__ in M3_CLASSES:
        return flag.model.model, Pooling(flag.model.sentence_pooling_method)
    if flag is not None and hasattr(flag, "pooling_method") and hasattr(flag, "model"):
        return flag.model, Pooling(flag.pooling_method)
    raise ExportError("only FlagEmbedding models can be exported")


def _write_onnx(network: Any, tokenizer: Any, path: Path) -> None:
    """The network from token ids and attention mask to its last hidden state, batch and length dynamic."""
    try:
        import onnx  # noqa: F401  (the TorchScript exporter needs it; say so before tracing)
    except ImportError as error:
        raise ExportError(EXPORT_HINT) from error
    import torch

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.network = network

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.network(input_ids=input_ids, attention_mask=attention_mask, return_dict=True).last_hidden_state

    device = next(network.parameters()).device
    # A padded batch of two, so the trace keeps the attention mask's part in the graph.
    example = tokenizer(["a question", "a longer question, traced with padding"], padding=True, return_tensors="pt")
    inputs = (example["input_ids"].to(device), example["attention_mask"].to(device))
    axes = {"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"}}
    with _eager_attention(network), _quiet(), torch.no_grad(), _export_errors():
        torch.onnx.export(
            Hidden().eval(), inputs, str(path), dynamo=False, do_constant_folding=False, opset_version=OPSET,
            input_names=["input_ids", "attention_mask"], output_names=["hidden"],
            dynamic_axes={**axes, "hidden": {0: "batch", 1: "tokens"}},
        )  # fmt: skip


@contextlib.contextmanager
def _export_errors() -> Iterator[None]:
    """The tracer's and exporter's failures (an operator ONNX lacks, a model that does not trace) as ExportError:
    the index itself is done, and search falls back to FlagEmbedding. A full or read-only disk stays an OSError."""
    try:
        yield
    except OSError:
        raise
    except Exception as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        raise ExportError(f"torch.onnx.export failed: {first}") from error


@contextlib.contextmanager
def _eager_attention(network: Any) -> Iterator[None]:
    before = network.config._attn_implementation
    network.set_attn_implementation("eager")
    try:
        yield
    finally:
        network.set_attn_implementation(before)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The tracer's warnings (Python conditions it fixes at trace time, all checked by the parity tests) stay off
    unless ``vault2okf --verbose``."""
    with warnings.catch_warnings():
        if not verbose():
            warnings.simplefilter("ignore")
        yield


def _swap(part: Path, final: Path) -> None:
    """Put the finished folder in place: a reader sees the old encoder, briefly none, or the new one."""
    old = final.with_name(f"{final.name}.old-{os.getpid()}")
    if final.exists():
        os.replace(final, old)
    os.replace(part, final)
    shutil.rmtree(old, ignore_errors=True)


def default_precision(spec: str) -> Precision:
    """fp32 for every embedder: int8 missed the fidelity bar on MiniLM's real weights (lowest cosine to fp32 0.987
    on thellade chunks, under the 0.99 asked for: reports/bench-embedder-cost.txt), and it is unmeasured on
    BGE-M3's real weights. ``index --precision int8`` opts in."""
    return Precision.FP32


def index_embedder(
    bundle_dir: Path | str, spec: str, device: str = "cpu", precision: Precision | None = None
) -> tuple[Embedder, str | None]:
    """What `index` embeds documents with, and a notice when it is not the ONNX export.

    On a CPU: the bundle's export (written first when missing, stale or at another precision: the only time torch
    loads) run by onnxruntime, a thread per physical core, in length-sorted batches; its vectors are
    FlagEmbedding's at fp32 (reports/bench-embedder-cost.txt has the speed and the cosine). On an accelerator, or
    when the export cannot be written or loaded: FlagEmbedding (`get_embedder`)."""
    from retriever.embed import embedder_name, get_embedder, physical_cores
    from retriever.encoder import SMALL_MODEL, OnnxEmbedder

    if device != "cpu":
        return get_embedder(spec, device=device), None
    precision = precision or default_precision(spec)
    name = embedder_name(spec)
    notice = ensure_encoder(bundle_dir, name, spec, lambda: get_embedder(spec, device=device), precision)
    encoder, why = (
        (None, notice)
        if notice
        else load_encoder(bundle_dir, name, spec, precision=precision, threads=physical_cores())
    )
    if encoder is None:
        return get_embedder(spec, device=device), why
    batch = 16 if encoder.settings.parameters < SMALL_MODEL else 32  # FlagEmbedder's: minilm 16, bge-m3 32
    return OnnxEmbedder(name, spec, encoder, batch_size=batch), None


if __name__ == "__main__" and sys.argv[1:2] == ["fuse"]:
    sys.exit(_child(sys.argv[2:]))
