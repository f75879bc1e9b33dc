/**
 * A minimal ONNX graph builder over `onnx-proto` (the protobufjs-generated ONNX classes): nodes, float/int64
 * initializers, typed inputs/outputs, and `encode()` to ModelProto bytes in memory (no files), ready for
 * `InferenceSession.create(bytes)`.
 *
 * Source of the format: https://github.com/onnx/onnx/blob/main/onnx/onnx.proto (onnx-proto 8.0.1 ships the v1.10
 * schema; the fields used here are unchanged since, so models declaring a newer IR version/opset encode the same).
 */
import onnxProto from "onnx-proto";

const { onnx } = onnxProto;

/** Element types this builder declares (ONNX `TensorProto.DataType`). */
export type ElemType = "float" | "int64";

/** A dimension of a declared input/output: a fixed size or a symbolic name (dynamic). */
export type Dim = number | string;

/** An attribute value: int → INT, non-integer number → FLOAT (use `{ f }` to force a float), number[] → INTS. */
export type AttrValue = number | { f: number } | number[] | string;

const ELEM: Record<ElemType, number> = { float: onnx.TensorProto.DataType.FLOAT, int64: onnx.TensorProto.DataType.INT64 };

function attribute(name: string, v: AttrValue): onnxProto.onnx.IAttributeProto {
  const T = onnx.AttributeProto.AttributeType;
  if (typeof v === "string") return { name, type: T.STRING, s: new TextEncoder().encode(v) };
  if (Array.isArray(v)) return { name, type: T.INTS, ints: v };
  if (typeof v === "object") return { name, type: T.FLOAT, f: v.f };
  return Number.isInteger(v) ? { name, type: T.INT, i: v } : { name, type: T.FLOAT, f: v };
}

function valueInfo(name: string, elem: ElemType, shape: Dim[]): onnxProto.onnx.IValueInfoProto {
  return {
    name,
    type: {
      tensorType: {
        elemType: ELEM[elem],
        shape: { dim: shape.map((d) => (typeof d === "number" ? { dimValue: d } : { dimParam: d })) },
      },
    },
  };
}

/** Builds one ONNX graph; value names are strings, fresh ones come from `tmp()`. */
export class GraphBuilder {
  private readonly nodes: onnxProto.onnx.INodeProto[] = [];
  private readonly inits: onnxProto.onnx.ITensorProto[] = [];
  private readonly inputs: onnxProto.onnx.IValueInfoProto[] = [];
  private readonly outputs: onnxProto.onnx.IValueInfoProto[] = [];
  private counter = 0;

  /** A fresh value name with a readable prefix. */
  tmp(prefix = "t"): string {
    return `${prefix}_${this.counter++}`;
  }

  /** Declares a graph input. */
  input(name: string, elem: ElemType, shape: Dim[]): string {
    this.inputs.push(valueInfo(name, elem, shape));
    return name;
  }

  /** Declares a graph output (the value must be produced by a node). */
  output(name: string, elem: ElemType, shape: Dim[]): void {
    this.outputs.push(valueInfo(name, elem, shape));
  }

  /**
   * A float32 initializer (a constant weight), stored as raw little-endian bytes (copied).
   * @throws Error when `data.length` is not the product of `dims`
   */
  float(name: string, dims: number[], data: Float32Array): string {
    const n = dims.reduce((a, b) => a * b, 1);
    if (data.length !== n) throw new Error(`initializer ${name}: ${data.length} values for shape [${dims}]`);
    const raw = new Uint8Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength));
    this.inits.push({ name, dims, dataType: ELEM.float, rawData: raw });
    return name;
  }

  /** An int64 initializer (shapes, axes, split sizes). */
  int64(name: string, dims: number[], data: number[]): string {
    const raw = new Uint8Array(new BigInt64Array(data.map((x) => BigInt(x))).buffer);
    this.inits.push({ name, dims, dataType: ELEM.int64, rawData: raw });
    return name;
  }

  /**
   * Appends a node `op(inputs) → outputs` (domain "" = the default ONNX domain; "com.microsoft" for ORT contrib ops).
   * @returns the first output's name (convenient for single-output ops)
   */
  node(op: string, inputs: string[], outputs: string[] | number = 1, attrs: Record<string, AttrValue> = {}, domain = ""): string {
    const outs = typeof outputs === "number" ? Array.from({ length: outputs }, () => this.tmp(op.toLowerCase())) : outputs;
    this.nodes.push({
      opType: op,
      domain,
      name: this.tmp(`n_${op}`),
      input: inputs,
      output: outs,
      attribute: Object.entries(attrs).map(([k, v]) => attribute(k, v)),
    });
    return outs[0];
  }

  /** Like `node`, returning all output names. */
  nodeN(op: string, inputs: string[], count: number, attrs: Record<string, AttrValue> = {}): string[] {
    const outs = Array.from({ length: count }, () => this.tmp(op.toLowerCase()));
    this.node(op, inputs, outs, attrs);
    return outs;
  }

  /**
   * Serialises the model.
   * @param opset the default-domain opset version the graph is written for
   * @param irVersion the ONNX IR version declared (opset 17 ↔ IR 8, opset 20 ↔ IR 9)
   * @param extraOpsets further `{domain: version}` imports (e.g. `{ "com.microsoft": 1 }`)
   * @returns ModelProto bytes
   */
  encode(opset: number, irVersion: number, extraOpsets: Record<string, number> = {}): Uint8Array {
    const model = onnx.ModelProto.create({
      irVersion,
      producerName: "agentic-rl",
      opsetImport: [{ domain: "", version: opset }, ...Object.entries(extraOpsets).map(([domain, version]) => ({ domain, version }))],
      graph: {
        name: "gpt",
        node: this.nodes,
        initializer: this.inits,
        input: this.inputs,
        output: this.outputs,
      },
    });
    return onnx.ModelProto.encode(model).finish();
  }
}
