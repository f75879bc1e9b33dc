/**
 * `train.parquet` / `test.parquet` of `arl export verl`: the rows with nested parquet types (LIST of STRUCT for
 * `prompt`, STRUCTs for `reward_model` / `extra_info`), the layout pandas/pyarrow write and `datasets` reads back as
 * lists of dicts.
 */
import { parquetWriteBuffer } from "hyparquet-writer";
import type { VerlRow } from "./verlRows.ts";
import { DEFAULT_VERL_TARGET, VERL_RELEASES, type VerlTarget } from "./verlTarget.ts";

/** A parquet schema element, as hyparquet-writer takes it. */
type SchemaElement = NonNullable<Parameters<typeof parquetWriteBuffer>[0]["schema"]>[number];

/** A column's logical type: a leaf, a LIST of one element type, or a STRUCT of named fields. */
type Field =
  | { name: string; leaf: "string" | "int64" | "boolean" }
  | { name: string; list: Field }
  | { name: string; struct: Field[] };

const str = (name: string): Field => ({ name, leaf: "string" });
const strList = (name: string): Field => ({ name, list: str("element") });

/**
 * The row schema: every field nullable (OPTIONAL), lists in the standard 3-level layout (`<name>.list.element`);
 * `agent_name` last (column order does not matter to veRL's `RLHFDataset`, which keeps every column of a row).
 */
const ROW_FIELDS: Field[] = [
  str("data_source"),
  { name: "prompt", list: { name: "element", struct: [str("role"), str("content")] } },
  str("ability"),
  { name: "reward_model", struct: [str("style"), { name: "ground_truth", struct: [strList("target")] }] },
  {
    name: "extra_info",
    struct: [
      { name: "index", leaf: "int64" },
      str("split"),
      str("question"),
      str("task_id"),
      str("kind"),
      { name: "known", leaf: "boolean" },
      strList("evidence_ids"),
      { name: "need_tools_kwargs", leaf: "boolean" },
      {
        name: "tools_kwargs",
        struct: [
          {
            name: "search",
            struct: [{ name: "create_kwargs", struct: [{ name: "ground_truth", struct: [strList("target")] }, str("question"), str("data_source")] }],
          },
        ],
      },
    ],
  },
  str("agent_name"),
];

/** Flattens a field into parquet schema elements (depth-first, as the parquet footer lists them). */
function schemaOf(f: Field): SchemaElement[] {
  if ("leaf" in f) {
    if (f.leaf === "string") return [{ name: f.name, type: "BYTE_ARRAY", converted_type: "UTF8", repetition_type: "OPTIONAL" }];
    if (f.leaf === "int64") return [{ name: f.name, type: "INT64", repetition_type: "OPTIONAL" }];
    return [{ name: f.name, type: "BOOLEAN", repetition_type: "OPTIONAL" }];
  }
  if ("list" in f) {
    return [
      { name: f.name, repetition_type: "OPTIONAL", converted_type: "LIST", num_children: 1 },
      { name: "list", repetition_type: "REPEATED", num_children: 1 },
      ...schemaOf(f.list),
    ];
  }
  return [{ name: f.name, repetition_type: "OPTIONAL", num_children: f.struct.length }, ...f.struct.flatMap(schemaOf)];
}

/** A value converted for the writer: int64 leaves become bigint (the writer's INT64 representation). */
function toColumnValue(f: Field, v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if ("leaf" in f) return f.leaf === "int64" ? BigInt(v as number) : v;
  if ("list" in f) return (v as unknown[]).map((x) => toColumnValue(f.list, x));
  const obj = v as Record<string, unknown>;
  return Object.fromEntries(f.struct.map((c) => [c.name, toColumnValue(c, obj[c.name])]));
}

/**
 * Encodes rows as a parquet file (hyparquet-writer, SNAPPY) with native nested types: `prompt` is
 * LIST<STRUCT<role, content>>, `reward_model` and `extra_info` are STRUCTs, string lists are LIST<UTF8> — never JSON
 * strings, since veRL's `RLHFDataset` needs `prompt` as a list of messages. `target` only names the release in the
 * footer's `created_by`.
 * @throws Error from the writer when a row does not fit the schema
 */
export function verlParquet(rows: readonly VerlRow[], target: VerlTarget = DEFAULT_VERL_TARGET): ArrayBuffer {
  const schema: SchemaElement[] = [{ name: "root", num_children: ROW_FIELDS.length }, ...ROW_FIELDS.flatMap(schemaOf)];
  const columnData = ROW_FIELDS.map((f) => ({
    name: f.name,
    data: rows.map((r) => toColumnValue(f, (r as unknown as Record<string, unknown>)[f.name])),
  }));
  return parquetWriteBuffer({ columnData, schema, createdBy: `agentic-rl arl export verl (veRL ${VERL_RELEASES[target].tag})` });
}
