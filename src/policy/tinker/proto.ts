/**
 * The Tinker API's binary wire (protobuf, `Content-Type: application/x-protobuf`), as the Tinker Python SDK 0.25
 * speaks it: `forward_backward` requests are always protobuf, and `retrieve_future` asks for
 * `ForwardBackwardOutput` and `SampleResponse` results as protobuf (`Accept: application/x-protobuf`) and refuses
 * them as JSON. Every other endpoint stays JSON.
 *
 * Source (facts, not code): thinking-machines-lab/tinker @ d595dc2ba62a1494aa0f452fe1d0dbb7b321b870 —
 * `src/tinker/proto/tinker_public_pb2.py` (the serialized `tinker_public.proto` descriptor: message and field
 * numbers below), `src/tinker/proto/request_conv.py` (tokens as int32 bytes, tensors as dense bytes in their
 * dtype, `seq_id` always set, `loss_fn_config` values as doubles), `src/tinker/proto/response_conv.py`
 * (`BatchedTensor.offsets` = int64 *byte* offsets, `num_datums + 1` of them; bfloat16 and int32 widen to float32 /
 * int64; `StopReason` 0 = stop, 1 = length), `src/tinker/resources/training.py` (`forward_only` replaces the old
 * `/forward` endpoint). The schema is restated here as text and parsed with protobufjs; byte order is
 * little-endian (numpy's `tobytes()` on the x86/ARM machines the SDK runs on).
 */
import protobuf from "protobufjs";
import type { TensorData, WireForwardBackwardOutput, WireSampleResponse, WireDatum } from "./wire.ts";

/** `Content-Type` / `Accept` value of the binary wire. */
export const PROTO_CONTENT_TYPE = "application/x-protobuf";

/** `tinker_public.proto`, restated from the SDK's descriptor (field numbers are the contract). */
export const TINKER_PUBLIC_PROTO = `
syntax = "proto3";
package tinker_public;
enum StopReason { STOP_REASON_STOP = 0; STOP_REASON_LENGTH = 1; }
enum DType { DTYPE_UNSPECIFIED = 0; DTYPE_FLOAT32 = 1; DTYPE_INT64 = 2; DTYPE_INT32 = 3; DTYPE_BFLOAT16 = 4; }
message SampleResponse {
  repeated SampledSequence sequences = 1;
  optional bytes prompt_logprobs = 2;
  optional TopkPromptLogprobs topk_prompt_logprobs = 3;
  int32 prompt_cache_hit_tokens = 4;
}
message SampledSequence { StopReason stop_reason = 1; bytes tokens = 2; optional bytes logprobs = 3; }
message TopkPromptLogprobs { bytes token_ids = 1; bytes logprobs = 2; uint32 k = 3; uint32 prompt_length = 4; }
message SparseCsr { bytes values = 1; bytes crow_indices = 2; bytes col_indices = 3; }
message Tensor {
  oneof encoding { bytes dense = 1; SparseCsr sparse_csr = 2; }
  DType dtype = 3;
  repeated int64 shape = 4;
}
message BatchedTensor { bytes data = 1; bytes offsets = 2; DType dtype = 3; repeated int64 trailing_shape = 4; }
message ArrayRecord { string type_tag = 1; map<string, BatchedTensor> fields = 2; int64 num_datums = 3; }
message ForwardBackwardOutput {
  string loss_fn_output_type = 1;
  repeated ArrayRecord loss_fn_outputs = 2;
  map<string, double> metrics = 3;
}
message ForwardBackwardRequest {
  string model_id = 1;
  int32 seq_id = 2;
  repeated Datum data = 3;
  string loss_fn = 4;
  map<string, double> loss_fn_config = 5;
  bool forward_only = 6;
}
message Datum { repeated Chunk model_input = 1; map<string, Tensor> loss_fn_inputs = 2; }
message Chunk { oneof chunk { EncodedTextChunk encoded_text = 1; ImageChunk image = 2; DmelChunk dmel = 3; } }
message EncodedTextChunk { bytes tokens = 1; }
message ImageChunk { bytes data = 1; string format = 2; optional int32 expected_tokens = 3; }
message DmelChunk { bytes dmel = 1; }
`;

const root = protobuf.parse(TINKER_PUBLIC_PROTO, { keepCase: true }).root;
const FwdBwdRequestType = root.lookupType("tinker_public.ForwardBackwardRequest");
const FwdBwdOutputType = root.lookupType("tinker_public.ForwardBackwardOutput");
const SampleResponseType = root.lookupType("tinker_public.SampleResponse");

const DTYPE = { float32: 1, int64: 2, int32: 3, bfloat16: 4 } as const;

/** A `forward_backward` request in its JSON shape (what `/api/v1/forward_backward` takes as JSON). */
export interface ForwardBackwardRequestBody {
  model_id: string;
  /** ≥ 1 from the SDK; 0 means "not set" on the binary wire. */
  seq_id?: number | null;
  forward_backward_input: { data: WireDatum[]; loss_fn: string; loss_fn_config?: Record<string, number | string> | null };
  /** Forward pass only (no gradient): SDK 0.25's `forward`. */
  forward_only?: boolean;
}

/** The error a malformed binary body raises (a server answers it with 400). */
export class ProtoDecodeError extends Error {}

/** `type.decode(bytes)`, a failure named as the message it should have been. @throws ProtoDecodeError */
function decodeAs(type: protobuf.Type, bytes: Uint8Array): protobuf.Message {
  try {
    return type.decode(bytes);
  } catch (e) {
    throw new ProtoDecodeError(`not a ${type.fullName.replace(/^\./, "")}: ${(e as Error).message}`);
  }
}

// ---- little-endian packing (copies: decoded bytes can be unaligned views) ----
function pack(values: readonly number[], dtype: "int32" | "int64" | "float32"): Uint8Array {
  const n = values.length;
  const buf = new ArrayBuffer(n * (dtype === "int64" ? 8 : 4));
  const view = new DataView(buf);
  for (let i = 0; i < n; i++) {
    if (dtype === "float32") view.setFloat32(i * 4, values[i], true);
    else if (dtype === "int32") view.setInt32(i * 4, values[i], true);
    else view.setBigInt64(i * 8, BigInt(Math.trunc(values[i])), true);
  }
  return new Uint8Array(buf);
}

function unpack(bytes: Uint8Array, dtype: number, what: string): number[] {
  const size = dtype === DTYPE.int64 ? 8 : dtype === DTYPE.bfloat16 ? 2 : 4;
  if (bytes.length % size !== 0) throw new ProtoDecodeError(`${what}: ${bytes.length} bytes is not a multiple of ${size}`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Array<number>(bytes.length / size);
  for (let i = 0; i < out.length; i++) {
    if (dtype === DTYPE.float32) out[i] = view.getFloat32(i * 4, true);
    else if (dtype === DTYPE.int32) out[i] = view.getInt32(i * 4, true);
    else if (dtype === DTYPE.int64) out[i] = Number(view.getBigInt64(i * 8, true));
    else if (dtype === DTYPE.bfloat16) {
      // bfloat16 = the upper 16 bits of a float32 (response_conv.py widens it the same way).
      const w = new DataView(new ArrayBuffer(4));
      w.setUint16(2, view.getUint16(i * 2, true), true);
      out[i] = w.getFloat32(0, true);
    } else throw new ProtoDecodeError(`${what}: unsupported dtype ${dtype}`);
  }
  return out;
}

const publicDtype = (dtype: number, what: string): "float32" | "int64" => {
  if (dtype === DTYPE.float32 || dtype === DTYPE.bfloat16) return "float32";
  if (dtype === DTYPE.int64 || dtype === DTYPE.int32) return "int64";
  throw new ProtoDecodeError(`${what}: unsupported dtype ${dtype}`);
};

interface ProtoTensor {
  dense?: Uint8Array;
  sparse_csr?: unknown;
  dtype?: number;
  shape?: number[];
}

/**
 * A `forward_backward` request → protobuf bytes, as the SDK encodes it (`request_conv.py`).
 * @throws Error when a datum has a non-token chunk or a tensor dtype other than `int64`/`float32`
 */
export function encodeForwardBackwardRequest(req: ForwardBackwardRequestBody): Uint8Array {
  const input = req.forward_backward_input;
  const lossFnConfig: Record<string, number> = {};
  for (const [k, v] of Object.entries(input.loss_fn_config ?? {})) lossFnConfig[k] = Number(v);
  const msg = FwdBwdRequestType.fromObject({
    model_id: req.model_id,
    seq_id: req.seq_id ?? 0,
    loss_fn: input.loss_fn,
    loss_fn_config: lossFnConfig,
    forward_only: req.forward_only ?? false,
    data: input.data.map((d) => ({
      model_input: d.model_input.chunks.map((c) => ({ encoded_text: { tokens: pack(c.tokens, "int32") } })),
      loss_fn_inputs: Object.fromEntries(
        Object.entries(d.loss_fn_inputs).map(([name, t]) => {
          const dtype = t.dtype ?? (name === "target_tokens" ? "int64" : "float32");
          return [name, { dense: pack(t.data, dtype), dtype: DTYPE[dtype], shape: t.shape ?? [t.data.length] }];
        }),
      ),
    })),
  });
  return FwdBwdRequestType.encode(msg).finish();
}

/**
 * Protobuf bytes → the JSON shape of a `forward_backward` request (what a server validates).
 * @throws ProtoDecodeError on malformed bytes, image/audio chunks, sparse tensors or unknown dtypes
 */
export function decodeForwardBackwardRequest(bytes: Uint8Array): ForwardBackwardRequestBody {
  const msg = decodeAs(FwdBwdRequestType, bytes);
  const o = FwdBwdRequestType.toObject(msg, { longs: Number, defaults: true }) as {
    model_id: string;
    seq_id: number;
    loss_fn: string;
    loss_fn_config: Record<string, number>;
    forward_only: boolean;
    data: Array<{ model_input: Array<{ encoded_text?: { tokens: Uint8Array }; image?: unknown; dmel?: unknown }>; loss_fn_inputs: Record<string, ProtoTensor> }>;
  };
  return {
    model_id: o.model_id,
    seq_id: o.seq_id === 0 ? null : o.seq_id,
    forward_only: o.forward_only,
    forward_backward_input: {
      loss_fn: o.loss_fn,
      loss_fn_config: Object.keys(o.loss_fn_config).length > 0 ? o.loss_fn_config : null,
      data: o.data.map((d, i) => ({
        model_input: {
          chunks: d.model_input.map((c, j) => {
            if (!c.encoded_text) throw new ProtoDecodeError(`data.${i}.model_input.${j}: only encoded_text chunks are supported (no image/dmel)`);
            return { type: "encoded_text" as const, tokens: unpack(c.encoded_text.tokens, DTYPE.int32, `data.${i}.model_input.${j}.tokens`) };
          }),
        },
        loss_fn_inputs: Object.fromEntries(
          Object.entries(d.loss_fn_inputs).map(([name, t]): [string, TensorData] => {
            const what = `data.${i}.loss_fn_inputs.${name}`;
            if (t.sparse_csr) throw new ProtoDecodeError(`${what}: sparse tensors are not supported (send dense)`);
            const dtype = t.dtype ?? 0;
            return [name, { data: unpack(t.dense ?? new Uint8Array(), dtype, what), dtype: publicDtype(dtype, what), shape: t.shape && t.shape.length > 0 ? t.shape : null }];
          }),
        ),
      })),
    },
  };
}

/**
 * A `ForwardBackwardOutput` → protobuf bytes: one `ArrayRecord` whose fields are `BatchedTensor`s with int64 byte
 * offsets (`[num_datums + 1]`), every output float32.
 */
export function encodeForwardBackwardOutput(out: WireForwardBackwardOutput): Uint8Array {
  const n = out.loss_fn_outputs.length;
  const names = n > 0 ? Object.keys(out.loss_fn_outputs[0]) : [];
  const fields: Record<string, { data: Uint8Array; offsets: Uint8Array; dtype: number; trailing_shape: number[] }> = {};
  for (const name of names) {
    const offsets: number[] = [0];
    const all: number[] = [];
    for (const o of out.loss_fn_outputs) {
      const t = o[name];
      if (!t) throw new Error(`encodeForwardBackwardOutput: field ${name} missing in one datum's output`);
      for (const x of t.data) all.push(x);
      offsets.push(all.length * 4);
    }
    fields[name] = { data: pack(all, "float32"), offsets: pack(offsets, "int64"), dtype: DTYPE.float32, trailing_shape: [] };
  }
  const msg = FwdBwdOutputType.fromObject({
    loss_fn_output_type: out.loss_fn_output_type,
    loss_fn_outputs: n > 0 ? [{ type_tag: out.loss_fn_output_type, fields, num_datums: n }] : [],
    metrics: out.metrics,
  });
  return FwdBwdOutputType.encode(msg).finish();
}

/**
 * Protobuf bytes → `ForwardBackwardOutput`, by the SDK's rules (`response_conv.py`): records concatenated, byte
 * offsets sliced per datum, `num_datums` authoritative, bfloat16/int32 widened.
 * @throws ProtoDecodeError on malformed bytes or inconsistent offsets
 */
export function decodeForwardBackwardOutput(bytes: Uint8Array): WireForwardBackwardOutput {
  const msg = decodeAs(FwdBwdOutputType, bytes);
  const o = FwdBwdOutputType.toObject(msg, { longs: Number, defaults: true }) as {
    loss_fn_output_type: string;
    metrics: Record<string, number>;
    loss_fn_outputs: Array<{ num_datums: number; fields: Record<string, { data: Uint8Array; offsets: Uint8Array; dtype: number; trailing_shape: number[] }> }>;
  };
  const perField = new Map<string, TensorData[]>();
  let numDatums = 0;
  for (const record of o.loss_fn_outputs) {
    numDatums += record.num_datums;
    for (const [name, bt] of Object.entries(record.fields)) {
      const size = bt.dtype === DTYPE.int64 ? 8 : bt.dtype === DTYPE.bfloat16 ? 2 : 4;
      const offsets = unpack(bt.offsets, DTYPE.int64, `${name}.offsets`);
      const values = unpack(bt.data, bt.dtype, name);
      const dtype = publicDtype(bt.dtype, name);
      const trailing = bt.trailing_shape.reduce((a, b) => a * b, 1);
      const list = perField.get(name) ?? [];
      for (let i = 0; i + 1 < offsets.length; i++) {
        const [a, b] = [offsets[i] / size, offsets[i + 1] / size];
        if (!(Number.isInteger(a) && Number.isInteger(b) && a <= b && b <= values.length)) {
          throw new ProtoDecodeError(`${name}: offsets ${offsets[i]}..${offsets[i + 1]} do not fit ${values.length} values`);
        }
        const data = values.slice(a, b);
        list.push({ data, dtype, shape: [trailing ? data.length / trailing : 0, ...bt.trailing_shape] });
      }
      perField.set(name, list);
    }
  }
  if (numDatums === 0 && perField.size > 0) numDatums = perField.values().next().value!.length;
  const outputs: Array<Record<string, TensorData>> = [];
  for (let i = 0; i < numDatums; i++) {
    const datum: Record<string, TensorData> = {};
    for (const [name, list] of perField) if (list[i]) datum[name] = list[i];
    outputs.push(datum);
  }
  return { loss_fn_output_type: o.loss_fn_output_type.split(":").pop() || "ArrayRecord", loss_fn_outputs: outputs, metrics: o.metrics };
}

/** A `SampleResponse` → protobuf bytes (tokens int32, logprobs float32). */
export function encodeSampleResponse(r: WireSampleResponse): Uint8Array {
  const msg = SampleResponseType.fromObject({
    sequences: r.sequences.map((s) => ({
      stop_reason: s.stop_reason === "length" ? 1 : 0,
      tokens: pack(s.tokens, "int32"),
      ...(s.logprobs ? { logprobs: pack(s.logprobs, "float32") } : {}),
    })),
  });
  return SampleResponseType.encode(msg).finish();
}

/**
 * Protobuf bytes → `SampleResponse` (the SDK's `deserialize_sample_response`).
 * @throws ProtoDecodeError on malformed bytes or an unknown stop reason
 */
export function decodeSampleResponse(bytes: Uint8Array): WireSampleResponse {
  const msg = decodeAs(SampleResponseType, bytes);
  const o = SampleResponseType.toObject(msg, { longs: Number, defaults: false }) as {
    sequences?: Array<{ stop_reason?: number; tokens?: Uint8Array; logprobs?: Uint8Array }>;
  };
  return {
    type: "sample",
    prompt_logprobs: null,
    sequences: (o.sequences ?? []).map((s, i) => {
      const reason = s.stop_reason ?? 0;
      if (reason !== 0 && reason !== 1) throw new ProtoDecodeError(`sequences.${i}.stop_reason: unknown value ${reason}`);
      return {
        stop_reason: reason === 1 ? ("length" as const) : ("stop" as const),
        tokens: unpack(s.tokens ?? new Uint8Array(), DTYPE.int32, `sequences.${i}.tokens`),
        logprobs: s.logprobs && s.logprobs.length > 0 ? unpack(s.logprobs, DTYPE.float32, `sequences.${i}.logprobs`) : null,
      };
    }),
  };
}
