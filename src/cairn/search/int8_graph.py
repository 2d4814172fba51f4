"""Integer compute for the packaged int8 MiniLM: a graph rewrite done in memory, at load.

The packaged ONNX file stores every weight matrix as int8 with one float scale per output column,
dequantized in the graph (``Cast`` then ``Mul``) in front of a float ``MatMul``. onnxruntime folds that
dequantization into a float32 constant when it loads the file, so the model runs in float32 all the way.
:func:`token_int8` rewrites each such ``MatMul`` to multiply the *same* int8 weights by int8 activations:

* every row of the activation (one token's hidden vector) gets its own scale, ``max|x| / 127``, and is
  rounded to ``x / scale + 128`` as uint8 (zero point 128, so onnxruntime's u8×s8 kernels apply);
* ``MatMulInteger`` multiplies it by the int8 weights exactly, in int32;
* the result is scaled back by the row's scale and the column's weight scale.

Per-token scales (rather than onnxruntime's ``DynamicQuantizeLinear``, one scale for a whole batch) are
what keep a text's vector independent of the batch it is embedded in: every token row is quantized on its
own, so a lesson embedded in a batch of sixteen and a query embedded alone get the same vector. They also
keep closer to the float32 model than a per-batch scale does (bench/README.md gives the figures).

The rewrite reads and writes the protobuf wire format directly (the few ONNX message fields it touches are
listed below), so it needs no ``onnx`` package; its output depends only on its input bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

__all__ = ["GraphRewriteError", "token_int8"]


class GraphRewriteError(ValueError):
    """The model is not shaped the way the rewrite expects (another export of the model)."""


# ONNX protobuf field numbers (onnx/onnx.proto3); only these are read or written.
_MODEL_GRAPH = 7
_GRAPH_NODE, _GRAPH_INITIALIZER = 1, 5
_NODE_INPUT, _NODE_OUTPUT, _NODE_NAME, _NODE_OP_TYPE, _NODE_ATTRIBUTE = 1, 2, 3, 4, 5
_ATTR_NAME, _ATTR_I, _ATTR_INTS, _ATTR_TYPE = 1, 3, 8, 20
_ATTR_TYPE_INT, _ATTR_TYPE_INTS = 2, 7
_TENSOR_DATA_TYPE, _TENSOR_NAME, _TENSOR_RAW_DATA = 2, 8, 9
_FLOAT, _UINT8, _INT8 = 1, 2, 3  # TensorProto.DataType

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5

#: Prefix of every name the rewrite adds; the packaged graph uses none like it.
_PREFIX = "cairn_i8/"


# ------------------------------------------------------------------------------------------ wire format


def _varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise GraphRewriteError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _enc_varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 -> two's complement, ten bytes
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


@dataclass
class _Field:
    number: int
    wire: int
    value: int | memoryview  # varint value, or the payload of a length-delimited field
    raw: memoryview  # the whole field as encoded (tag included), re-emitted verbatim when unchanged


def _fields(data: bytes | memoryview) -> list[_Field]:
    """The fields of one message, in order; payloads are views into ``data`` (no copies of the weights)."""
    buf = memoryview(data)
    out = []
    pos = 0
    while pos < len(buf):
        start = pos
        tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        value: int | memoryview
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
        elif wire == _LEN:
            size, pos = _varint(buf, pos)
            value = buf[pos : pos + size]
            pos += size
        elif wire == _I64:
            value = buf[pos : pos + 8]
            pos += 8
        elif wire == _I32:
            value = buf[pos : pos + 4]
            pos += 4
        else:
            raise GraphRewriteError(f"unsupported wire type {wire}")
        if pos > len(buf):
            raise GraphRewriteError("truncated field")
        out.append(_Field(number, wire, value, buf[start:pos]))
    return out


def _len_field(number: int, payload: bytes | memoryview) -> bytes:
    return _enc_varint(number << 3 | _LEN) + _enc_varint(len(payload)) + payload


def _int_field(number: int, value: int) -> bytes:
    return _enc_varint(number << 3 | _VARINT) + _enc_varint(value)


def _text(f: _Field) -> str:
    assert isinstance(f.value, memoryview)
    return bytes(f.value).decode("utf-8")


# ------------------------------------------------------------------------------------------ messages


@dataclass
class _Node:
    op_type: str
    inputs: list[str]
    outputs: list[str]
    raw: bytes | memoryview = b""  # the NodeProto payload, when parsed from the model
    attrs: list[bytes] = field(default_factory=list)  # encoded AttributeProtos, for new nodes
    name: str = ""

    def encode(self) -> bytes:
        if self.raw:
            return bytes(self.raw)
        body = b"".join(_len_field(_NODE_INPUT, i.encode()) for i in self.inputs)
        body += b"".join(_len_field(_NODE_OUTPUT, o.encode()) for o in self.outputs)
        body += _len_field(_NODE_NAME, self.name.encode()) + _len_field(_NODE_OP_TYPE, self.op_type.encode())
        body += b"".join(_len_field(_NODE_ATTRIBUTE, a) for a in self.attrs)
        return body


def _parse_node(payload: memoryview) -> _Node:
    node = _Node("", [], [], raw=payload)
    for f in _fields(payload):
        if f.number == _NODE_INPUT:
            node.inputs.append(_text(f))
        elif f.number == _NODE_OUTPUT:
            node.outputs.append(_text(f))
        elif f.number == _NODE_OP_TYPE:
            node.op_type = _text(f)
        elif f.number == _NODE_NAME:
            node.name = _text(f)
    return node


def _attr_int(name: str, value: int) -> bytes:
    return _len_field(_ATTR_NAME, name.encode()) + _int_field(_ATTR_I, value) + _int_field(_ATTR_TYPE, _ATTR_TYPE_INT)


def _attr_ints(name: str, values: list[int]) -> bytes:
    body = _len_field(_ATTR_NAME, name.encode()) + b"".join(_int_field(_ATTR_INTS, v) for v in values)
    return body + _int_field(_ATTR_TYPE, _ATTR_TYPE_INTS)


def _scalar(name: str, data_type: int, raw: bytes) -> bytes:
    """A rank-0 TensorProto (no dims) holding ``raw``."""
    return (
        _int_field(_TENSOR_DATA_TYPE, data_type)
        + _len_field(_TENSOR_NAME, name.encode())
        + _len_field(_TENSOR_RAW_DATA, raw)
    )


def _tensor_header(payload: memoryview) -> tuple[str, int]:
    """(name, data_type) of a TensorProto, its (large) data skipped."""
    name, data_type = "", 0
    for f in _fields(payload):
        if f.number == _TENSOR_NAME:
            name = _text(f)
        elif f.number == _TENSOR_DATA_TYPE and isinstance(f.value, int):
            data_type = f.value
    return name, data_type


# ------------------------------------------------------------------------------------------ the rewrite

_EPS = _PREFIX + "eps"
_QMAX = _PREFIX + "127"
_SHIFT = _PREFIX + "128f"
_ZERO_POINT = _PREFIX + "zp128"
_CONSTANTS = [
    # A row of zeros (a padded position's hidden state is not zero, but keep the division defined).
    _scalar(_EPS, _FLOAT, struct.pack("<f", 1e-12)),
    _scalar(_QMAX, _FLOAT, struct.pack("<f", 127.0)),
    _scalar(_SHIFT, _FLOAT, struct.pack("<f", 128.0)),
    _scalar(_ZERO_POINT, _UINT8, bytes([128])),
]


def _quantized_matmul(x: str, weight_q: str, weight_scale: str, y: str, n: int) -> list[_Node]:
    """``y = x @ (weight_q * weight_scale)`` with x quantized per row (see the module docstring)."""
    p = f"{_PREFIX}{n}/"

    def node(op: str, inputs: list[str], out: str, *attrs: bytes) -> _Node:
        return _Node(op, inputs, [out], attrs=list(attrs), name=out)

    return [
        node("Abs", [x], p + "abs"),
        node("ReduceMax", [p + "abs"], p + "amax", _attr_ints("axes", [-1]), _attr_int("keepdims", 1)),
        node("Max", [p + "amax", _EPS], p + "amax_eps"),
        node("Div", [p + "amax_eps", _QMAX], p + "scale"),
        node("Div", [x, p + "scale"], p + "x_scaled"),
        node("Round", [p + "x_scaled"], p + "x_round"),  # half to even, in [-127, 127]
        node("Add", [p + "x_round", _SHIFT], p + "x_shift"),  # [1, 255]: exact in float, exact as uint8
        node("Cast", [p + "x_shift"], p + "x_q", _attr_int("to", _UINT8)),
        node("MatMulInteger", [p + "x_q", weight_q, _ZERO_POINT], p + "acc"),
        node("Cast", [p + "acc"], p + "acc_f", _attr_int("to", _FLOAT)),
        node("Mul", [p + "acc_f", p + "scale"], p + "row_scaled"),
        node("Mul", [p + "row_scaled", weight_scale], y),
    ]


def token_int8(model: bytes) -> bytes:
    """The packaged model with every int8-weight ``MatMul`` computed in integers (module docstring).

    The embedding tables (``Gather``, not ``MatMul``) stay as they are. Raises :class:`GraphRewriteError`
    when the model has no such ``MatMul`` or the rewrite finds a name it would add.
    """
    model_fields = _fields(model)
    graphs = [f for f in model_fields if f.number == _MODEL_GRAPH]
    if len(graphs) != 1 or not isinstance(graphs[0].value, memoryview):
        raise GraphRewriteError("the model has no graph")
    graph_fields = _fields(graphs[0].value)
    payloads = [(f.number, f.value) for f in graph_fields if isinstance(f.value, memoryview)]
    nodes = [_parse_node(v) for number, v in payloads if number == _GRAPH_NODE]
    initializers = dict(_tensor_header(v) for number, v in payloads if number == _GRAPH_INITIALIZER)
    if any(name.startswith(_PREFIX) for name in initializers) or any(
        o.startswith(_PREFIX) for nd in nodes for o in nd.outputs
    ):
        raise GraphRewriteError("the model already holds names this rewrite adds")

    producer = {o: i for i, nd in enumerate(nodes) for o in nd.outputs}
    uses: dict[str, int] = {}
    for nd in nodes:
        for name in nd.inputs:
            uses[name] = uses.get(name, 0) + 1

    replaced: dict[int, list[_Node]] = {}
    dropped: set[int] = set()
    for i, nd in enumerate(nodes):
        if nd.op_type != "MatMul" or len(nd.inputs) != 2 or len(nd.outputs) != 1:
            continue
        m = producer.get(nd.inputs[1])
        mul = nodes[m] if m is not None else None
        if mul is None or mul.op_type != "Mul" or len(mul.inputs) != 2 or mul.inputs[1] not in initializers:
            continue
        c = producer.get(mul.inputs[0])
        cast = nodes[c] if c is not None else None
        if cast is None or cast.op_type != "Cast" or initializers.get(cast.inputs[0]) != _INT8:
            continue
        if initializers[mul.inputs[1]] != _FLOAT:
            continue
        replaced[i] = _quantized_matmul(nd.inputs[0], cast.inputs[0], mul.inputs[1], nd.outputs[0], len(replaced))
        # The dequantized float weight is dead once its only reader is gone.
        if uses.get(mul.outputs[0]) == 1 and uses.get(cast.outputs[0]) == 1:
            assert m is not None and c is not None
            dropped.update((m, c))
    if not replaced:
        raise GraphRewriteError("no MatMul on int8 weights found")

    new_nodes: list[bytes] = []
    for i, nd in enumerate(nodes):
        if i in dropped:
            continue
        for out in replaced.get(i, [nd]):
            new_nodes.append(_len_field(_GRAPH_NODE, out.encode()))
    graph = b"".join(new_nodes)
    graph += b"".join(f.raw for f in graph_fields if f.number != _GRAPH_NODE)
    graph += b"".join(_len_field(_GRAPH_INITIALIZER, t) for t in _CONSTANTS)
    return b"".join(_len_field(_MODEL_GRAPH, graph) if f.number == _MODEL_GRAPH else f.raw for f in model_fields)
