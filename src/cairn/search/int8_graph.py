"""Integer compute for the packaged int8 MiniLM: a graph rewrite done in memory, at load.

The packaged ONNX file stores every weight matrix as int8 with one float scale per output column,
dequantized in the graph (``Cast`` then ``Mul``) in front of a float ``MatMul``. onnxruntime folds that
dequantization into a float32 constant when it loads the file, so the model runs in float32 all the way.
:func:`token_int8` rewrites each such ``MatMul`` to multiply the *same* int8 weights by int8 activations:

* every row of the activation (one token's hidden vector) gets its own scale, ``max|x| / 127``, and is
  rounded to ``x / scale + 128`` as uint8 (zero point 128, so onnxruntime's u8×s8 kernels apply), once
  per tensor: the query, key and value projections share their input's quantization;
* ``MatMulIntegerToFloat`` (onnxruntime's) multiplies it by the int8 weights exactly, in int32, and
  scales the result by the column's weight scale as it writes it; a ``Mul`` applies the row's scale.

Two more rewrites remove work onnxruntime does not: the export's GELU (``Div``, ``Erf``, ``Add``, two
``Mul``) becomes onnxruntime's ``Gelu`` (``com.microsoft``), and the NaN guard after each attention
``Softmax`` (``IsNaN`` + ``Where``), which cannot fire, is dropped.

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
_MODEL_GRAPH, _MODEL_OPSET_IMPORT = 7, 8
_OPSET_DOMAIN, _OPSET_VERSION = 1, 2
_GRAPH_NODE, _GRAPH_INITIALIZER = 1, 5
_NODE_INPUT, _NODE_OUTPUT, _NODE_NAME, _NODE_OP_TYPE, _NODE_ATTRIBUTE, _NODE_DOMAIN = 1, 2, 3, 4, 5, 7
_ATTR_NAME, _ATTR_I, _ATTR_INTS, _ATTR_TYPE = 1, 3, 8, 20
_ATTR_TYPE_INT, _ATTR_TYPE_INTS = 2, 7
_TENSOR_DIMS, _TENSOR_DATA_TYPE, _TENSOR_FLOAT_DATA, _TENSOR_NAME, _TENSOR_RAW_DATA = 1, 2, 4, 8, 9
_FLOAT, _UINT8, _INT8, _INT64 = 1, 2, 3, 7  # TensorProto.DataType

#: onnxruntime's own operators (``Gelu``), version 1.
_MS_DOMAIN = "com.microsoft"

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
    domain: str = ""

    def encode(self) -> bytes:
        if self.raw:
            return bytes(self.raw)
        body = b"".join(_len_field(_NODE_INPUT, i.encode()) for i in self.inputs)
        body += b"".join(_len_field(_NODE_OUTPUT, o.encode()) for o in self.outputs)
        body += _len_field(_NODE_NAME, self.name.encode()) + _len_field(_NODE_OP_TYPE, self.op_type.encode())
        body += b"".join(_len_field(_NODE_ATTRIBUTE, a) for a in self.attrs)
        if self.domain:
            body += _len_field(_NODE_DOMAIN, self.domain.encode())
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


def _scalar(name: str, data_type: int, raw: bytes, dims: tuple[int, ...] = ()) -> bytes:
    """A TensorProto holding ``raw``: rank 0 unless ``dims`` are given."""
    return (
        b"".join(_int_field(_TENSOR_DIMS, d) for d in dims)
        + _int_field(_TENSOR_DATA_TYPE, data_type)
        + _len_field(_TENSOR_NAME, name.encode())
        + _len_field(_TENSOR_RAW_DATA, raw)
    )


def _tensor_header(payload: memoryview) -> tuple[str, int, float | None]:
    """(name, data_type, value) of a TensorProto: value only for a tensor of one float, else None."""
    name, data_type, data = "", 0, b""
    for f in _fields(payload):
        if f.number == _TENSOR_NAME:
            name = _text(f)
        elif f.number == _TENSOR_DATA_TYPE and isinstance(f.value, int):
            data_type = f.value
        elif f.number in (_TENSOR_RAW_DATA, _TENSOR_FLOAT_DATA) and isinstance(f.value, memoryview):
            data = bytes(f.value) if len(f.value) == 4 else b""  # raw bytes, packed floats or one fixed32
    value = struct.unpack("<f", data)[0] if data_type == _FLOAT and len(data) == 4 else None
    return name, data_type, value


# ------------------------------------------------------------------------------------------ the rewrite

_EPS = _PREFIX + "eps"
_QMAX = _PREFIX + "127"
_ZERO_POINT = _PREFIX + "zp128"
_FLAT = _PREFIX + "flat"
_ONE = _PREFIX + "1f"
_CONSTANTS = [
    # A row of zeros (a padded position's hidden state is not zero, but keep the division defined).
    _scalar(_EPS, _FLOAT, struct.pack("<f", 1e-12)),
    _scalar(_QMAX, _FLOAT, struct.pack("<f", 127.0)),
    _scalar(_ONE, _FLOAT, struct.pack("<f", 1.0)),
    _scalar(_ZERO_POINT, _UINT8, bytes([128])),
    _scalar(_FLAT, _INT64, struct.pack("<q", -1), dims=(1,)),  # Reshape to one dimension
]


def _node(op: str, inputs: list[str], out: str, *attrs: bytes) -> _Node:
    return _Node(op, inputs, [out], attrs=list(attrs), name=out)


def _quantize_rows(x: str, n: int) -> tuple[list[_Node], str, str]:
    """Nodes quantizing ``x`` per row (see the module docstring), and the names of the uint8 rows and of
    their scales. Done once per tensor: the query, key and value projections read the same hidden state."""
    p = f"{_PREFIX}q{n}/"
    nodes = [
        _node("Abs", [x], p + "abs"),
        _node("ReduceMax", [p + "abs"], p + "amax", _attr_ints("axes", [-1]), _attr_int("keepdims", 1)),
        _node("Max", [p + "amax", _EPS], p + "amax_eps"),
        _node("Div", [p + "amax_eps", _QMAX], p + "scale"),
        # x / scale rounded half to even, + 128, as uint8 ([1, 255]), in one QuantizeLinear: per axis 0 of
        # the rows laid flat (one scale and one zero point per row), then back to x's shape.
        _node("Shape", [x], p + "x_shape"),
        _node("Flatten", [x], p + "rows", _attr_int("axis", -1)),
        _node("Reshape", [p + "scale", _FLAT], p + "row_scale"),
        _node("Shape", [p + "row_scale"], p + "n_rows"),
        _node("Expand", [_ZERO_POINT, p + "n_rows"], p + "row_zero_point"),
        _node(
            "QuantizeLinear", [p + "rows", p + "row_scale", p + "row_zero_point"], p + "rows_q", _attr_int("axis", 0)
        ),
        _node("Reshape", [p + "rows_q", p + "x_shape"], p + "x_q"),
    ]
    return nodes, p + "x_q", p + "scale"


def _integer_matmul(x_q: str, scale: str, weight_q: str, weight_scale: str, y: str, n: int) -> list[_Node]:
    """``y = x @ (weight_q * weight_scale)`` from the rows of x quantized by :func:`_quantize_rows`.

    onnxruntime's ``MatMulIntegerToFloat`` multiplies in int32 and applies the columns' weight scales as it
    writes the float result (its input scale is one number, so the rows' scales follow in a ``Mul``): one
    pass over the result instead of a ``Cast`` and two ``Mul``s."""
    p = f"{_PREFIX}{n}/"
    return [
        _node("Reshape", [weight_scale, _FLAT], p + "weight_scale"),  # one per column; folded at load
        _Node(
            "MatMulIntegerToFloat",
            [x_q, weight_q, _ONE, p + "weight_scale", _ZERO_POINT],
            [p + "col_scaled"],
            name=p + "col_scaled",
            domain=_MS_DOMAIN,
        ),
        _node("Mul", [p + "col_scaled", scale], y),
    ]


def _drop_nan_guards(
    nodes: list[_Node],
    producer: dict[str, int],
    uses: dict[str, int],
    replaced: dict[int, list[_Node]],
    dropped: set[int],
) -> None:
    """``Where(IsNaN(p), c, p)`` after each attention ``Softmax`` becomes ``Identity(p)`` (which onnxruntime
    removes). The export guards rows whose keys are all masked, but its mask adds the float minimum, not
    ``-inf``, so a softmax of finite scores is never NaN: the guard is two passes over every attention
    score that change nothing."""
    for i, nd in enumerate(nodes):
        if nd.op_type != "Where" or len(nd.inputs) != 3 or len(nd.outputs) != 1:
            continue
        n = producer.get(nd.inputs[0])
        isnan = nodes[n] if n is not None else None
        if isnan is None or isnan.op_type != "IsNaN" or isnan.inputs != [nd.inputs[2]] or uses.get(nd.inputs[0]) != 1:
            continue
        s = producer.get(nd.inputs[2])
        if s is None or nodes[s].op_type != "Softmax":
            continue
        assert n is not None
        replaced[i] = [_Node("Identity", [nd.inputs[2]], [nd.outputs[0]], name=_PREFIX + nd.outputs[0])]
        dropped.add(n)


def _fuse_gelu(
    nodes: list[_Node],
    producer: dict[str, int],
    uses: dict[str, int],
    values: dict[str, float | None],
    replaced: dict[int, list[_Node]],
    dropped: set[int],
) -> None:
    """``x * (0.5 * (1 + Erf(x / sqrt 2)))``, five nodes as exported, becomes onnxruntime's ``Gelu``
    (which its optimizer then joins with the bias ``Add`` in front): onnxruntime's own fusion does not
    recognise the export's order of the two ``Mul``s."""

    def const(name: str, expected: float) -> bool:
        value = values.get(name)
        return value is not None and abs(value - expected) <= 1e-6 * abs(expected)

    def single(name: str) -> _Node | None:
        k = producer.get(name)
        return nodes[k] if k is not None and uses.get(name) == 1 else None

    for i, last in enumerate(nodes):
        if last.op_type != "Mul" or len(last.inputs) != 2 or len(last.outputs) != 1:
            continue
        for x, half_out in (last.inputs, last.inputs[::-1]):
            half = single(half_out)
            if half is None or half.op_type != "Mul" or len(half.inputs) != 2:
                continue
            half_const, one_out = (half.inputs[0], half.inputs[1])
            if not const(half_const, 0.5):
                one_out, half_const = half_const, one_out
            plus_one = single(one_out)
            if not const(half_const, 0.5) or plus_one is None or plus_one.op_type != "Add":
                continue
            erf_out, one = plus_one.inputs if len(plus_one.inputs) == 2 else ("", "")
            if not const(one, 1.0):
                one, erf_out = erf_out, one
            erf = single(erf_out)
            if not const(one, 1.0) or erf is None or erf.op_type != "Erf":
                continue
            div = single(erf.inputs[0])
            if div is None or div.op_type != "Div" or div.inputs[0] != x or not const(div.inputs[1], 2**0.5):
                continue
            replaced[i] = [_Node("Gelu", [x], list(last.outputs), name=_PREFIX + last.outputs[0], domain=_MS_DOMAIN)]
            dropped.update(producer[n] for n in (half_out, one_out, erf_out, erf.inputs[0]))
            break


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
    headers = [_tensor_header(v) for number, v in payloads if number == _GRAPH_INITIALIZER]
    initializers = {name: data_type for name, data_type, _ in headers}
    values = {name: value for name, _, value in headers}
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
    quantized: dict[str, tuple[str, str]] = {}  # tensor -> its uint8 rows and their scales
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
        x = nd.inputs[0]
        new: list[_Node] = []
        if x not in quantized:  # the first reader quantizes it; the graph's order puts it before the others
            q_nodes, x_q, scale = _quantize_rows(x, len(quantized))
            new += q_nodes
            quantized[x] = (x_q, scale)
        x_q, scale = quantized[x]
        new += _integer_matmul(x_q, scale, cast.inputs[0], mul.inputs[1], nd.outputs[0], len(replaced))
        replaced[i] = new
        # The dequantized float weight is dead once its only reader is gone.
        if uses.get(mul.outputs[0]) == 1 and uses.get(cast.outputs[0]) == 1:
            assert m is not None and c is not None
            dropped.update((m, c))
    if not replaced:
        raise GraphRewriteError("no MatMul on int8 weights found")
    _drop_nan_guards(nodes, producer, uses, replaced, dropped)
    _fuse_gelu(nodes, producer, uses, values, replaced, dropped)

    new_nodes: list[bytes] = []
    for i, nd in enumerate(nodes):
        if i in dropped:
            continue
        for out in replaced.get(i, [nd]):
            new_nodes.append(_len_field(_GRAPH_NODE, out.encode()))
    graph = b"".join(new_nodes)
    graph += b"".join(f.raw for f in graph_fields if f.number != _GRAPH_NODE)
    graph += b"".join(_len_field(_GRAPH_INITIALIZER, t) for t in _CONSTANTS)
    out = b"".join(_len_field(_MODEL_GRAPH, graph) if f.number == _MODEL_GRAPH else f.raw for f in model_fields)
    opset = _len_field(_OPSET_DOMAIN, _MS_DOMAIN.encode()) + _int_field(_OPSET_VERSION, 1)
    return out + _len_field(_MODEL_OPSET_IMPORT, opset)
