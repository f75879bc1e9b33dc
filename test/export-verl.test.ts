import { execFile, execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parquetMetadata, parquetReadObjects } from "hyparquet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { DATA_SOURCE, SYSTEM_PROMPT, USER_INSTRUCTIONS, VERL_VERSION, exportVerl, toolConfig, verlRows, type VerlExportResult } from "../src/export/verl.ts";
import { presetWeights } from "../src/reward/presets.ts";
import { listen, type RunningServer } from "../src/serve/http.ts";
import { createRewardApp } from "../src/serve/reward.ts";
import { applyOverrides, resolveConfig } from "../src/train/config.ts";
import { setup } from "../src/train/experiment.ts";

const config = resolveConfig(applyOverrides({}, { "env.world.numCountries": "12" }));
const s = setup(config);
const hasPython = spawnSync("python3", ["--version"]).status === 0;
let out: string;
let result: VerlExportResult;
let reward: RunningServer;

/** Reads a parquet file into plain objects (bigint → number). */
async function readParquet(file: string): Promise<Record<string, unknown>[]> {
  const buf = readFileSync(file);
  const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
  const rows = await parquetReadObjects({ file: ab });
  return JSON.parse(JSON.stringify(rows, (_k, v) => (typeof v === "bigint" ? Number(v) : v)));
}

beforeAll(async () => {
  out = join(mkdtempSync(join(tmpdir(), "arl-verl-")), "verl");
  result = await exportVerl({ outDir: out, config, rewardUrl: "http://127.0.0.1:8100/", retrievalUrl: "http://127.0.0.1:8000/retrieve" });
  reward = await listen(createRewardApp({ reward: { weights: presetWeights("default") }, passages: s.world.passages }), { host: "127.0.0.1", port: 0 });
});
afterAll(async () => reward?.close());

describe("arl export verl", () => {
  it("writes the five files and one row per task of each split", () => {
    expect(result.files).toEqual({
      toolConfig: join(out, "tool_config.yaml"),
      rewardFn: join(out, "reward_fn.py"),
      train: join(out, "train.parquet"),
      test: join(out, "test.parquet"),
      runScript: join(out, "run.sh"),
    });
    expect(result.rows).toEqual({ train: s.world.train.length, test: s.world.test.length });
    expect(statSync(result.files.runScript).mode & 0o111).not.toBe(0);
  });

  it("tool_config.yaml: veRL's SearchTool pointed at our /retrieve, with the env's topk", () => {
    const doc = parseYaml(readFileSync(result.files.toolConfig, "utf8"));
    expect(doc).toEqual(toolConfig("http://127.0.0.1:8000/retrieve", 3));
    const t = doc.tools[0];
    expect(t.class_name).toBe("verl.tools.search_tool.SearchTool");
    expect(t.config).toEqual({ retrieval_service_url: "http://127.0.0.1:8000/retrieve", topk: 3, num_workers: 120, rate_limit: 120, timeout: 30, type: "native" });
    expect(t.tool_schema.function.name).toBe("search");
    expect(t.tool_schema.function.parameters).toMatchObject({ type: "object", required: ["query_list"], properties: { query_list: { type: "array", items: { type: "string" } } } });
  });

  it("train/test.parquet: veRL's Search-R1 columns with native nested types, prompt = env reset prompt", async () => {
    const meta = parquetMetadata(readFileSync(result.files.train).buffer.slice(0) as ArrayBuffer);
    expect(meta.schema[0].num_children).toBe(5);
    expect(meta.num_rows).toBe(BigInt(s.world.train.length));
    const names = meta.schema.map((e) => e.name);
    // prompt is LIST<STRUCT<role, content>> (not a JSON string), target a LIST<UTF8>.
    expect(names.slice(1, 7)).toEqual(["data_source", "prompt", "list", "element", "role", "content"]);
    expect(meta.schema[2]).toMatchObject({ name: "prompt", converted_type: "LIST", num_children: 1 });
    expect(meta.schema[3]).toMatchObject({ name: "list", repetition_type: "REPEATED" });
    expect(meta.schema[5]).toMatchObject({ name: "role", type: "BYTE_ARRAY", converted_type: "UTF8" });
    expect(meta.schema.some((e) => e.converted_type === "JSON")).toBe(false);

    for (const [split, tasks] of [["train", s.world.train], ["test", s.world.test]] as const) {
      const rows = await readParquet(split === "train" ? result.files.train : result.files.test);
      const expected = await verlRows(tasks, split, (t) => s.makeEnv().reset(t));
      expect(rows).toEqual(JSON.parse(JSON.stringify(expected)));
      const t = tasks[0];
      expect(rows[0]).toEqual({
        data_source: DATA_SOURCE,
        prompt: [
          { role: "system", content: SYSTEM_PROMPT },
          { role: "user", content: `${USER_INSTRUCTIONS}\nquestion : ${t.question}\n` },
        ],
        ability: "fact-reasoning",
        reward_model: { style: "rule", ground_truth: { target: t.answers } },
        extra_info: {
          index: 0,
          split,
          question: t.question,
          task_id: t.id,
          kind: t.kind,
          known: t.known,
          evidence_ids: t.evidenceIds,
          need_tools_kwargs: true,
          tools_kwargs: { search: { create_kwargs: { ground_truth: { target: t.answers }, question: t.question, data_source: DATA_SOURCE } } },
        },
      });
    }
  });

  it("run.sh: valid bash that runs veRL's main_ppo with the multi-turn tool and our reward", () => {
    expect(spawnSync("bash", ["-n", result.files.runScript]).status).toBe(0);
    const sh = readFileSync(result.files.runScript, "utf8");
    expect(sh).toContain(`veRL ${VERL_VERSION}`);
    for (const opt of [
      "python3 -m verl.trainer.main_ppo",
      "algorithm.adv_estimator=grpo",
      'data.train_files="$HERE/train.parquet"',
      'data.val_files="$HERE/test.parquet"',
      "data.return_raw_chat=True",
      "actor_rollout_ref.rollout.name=sglang",
      "actor_rollout_ref.rollout.multi_turn.enable=True",
      `actor_rollout_ref.rollout.multi_turn.max_assistant_turns=${config.env.maxTurns}`,
      'actor_rollout_ref.rollout.multi_turn.tool_config_path="$HERE/tool_config.yaml"',
      'custom_reward_function.path="$HERE/reward_fn.py"',
      "custom_reward_function.name=compute_score",
      "npx arl serve retrieval --port 8000",
      "npx arl serve reward --port 8100",
      'export ARL_REWARD_URL="${ARL_REWARD_URL:-http://127.0.0.1:8100}"',
    ]) {
      expect(sh, opt).toContain(opt);
    }
  });

  it("refuses to replace files unless overwrite", async () => {
    await expect(exportVerl({ outDir: out, config })).rejects.toThrow(/tool_config\.yaml.*already exist.*--overwrite/);
    await expect(exportVerl({ outDir: out, config, overwrite: true })).resolves.toMatchObject({ rows: result.rows });
    await expect(exportVerl({ outDir: join(out, "x"), config, rewardUrl: "localhost:8100" })).rejects.toThrow(/rewardUrl must be an http\(s\) URL/);
  });

  it.skipIf(!hasPython)("reward_fn.py compiles and its compute_score gets the live reward server's answer", async () => {
    execFileSync("python3", ["-m", "py_compile", result.files.rewardFn]);
    const rows = await readParquet(result.files.train);
    const row = rows[0] as { data_source: string; reward_model: { ground_truth: unknown }; extra_info: Record<string, unknown> };
    const answer = s.world.train[0].answers[0];
    const solution = `<think>known</think><answer> ${answer} </answer>`;
    const script = `
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("reward_fn", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
args = json.loads(sys.argv[2])
class Arr:  # stands in for the numpy arrays pandas gives for parquet lists
    def __init__(self, xs): self.xs = xs
    def tolist(self): return list(self.xs)
gt = {"target": Arr(args["ground_truth"]["target"])}
single = m.compute_score(args["data_source"], args["solution_str"], gt, args["extra_info"])
batch = m.compute_score_batch([args["data_source"]] * 2, [args["solution_str"], "no answer"], [args["ground_truth"]] * 2, [args["extra_info"]] * 2)
try:
    m.compute_score("d", "x", {"target": []})
    err = None
except ValueError as e:
    err = str(e)
print(json.dumps({"single": single, "batch": batch, "err": err}))
`;
    const payload = { data_source: row.data_source, solution_str: solution, ground_truth: row.reward_model.ground_truth, extra_info: row.extra_info };
    const stdout = await new Promise<string>((resolve, reject) => {
      execFile("python3", ["-c", script, result.files.rewardFn, JSON.stringify(payload)], { env: { ...process.env, ARL_REWARD_URL: reward.url } }, (err, so, se) =>
        err ? reject(new Error(`${err.message}\n${se}`)) : resolve(so),
      );
    });
    const py = JSON.parse(stdout);
    const http = (await (await fetch(`${reward.url}/reward`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(payload) })).json()) as {
      score: number;
      terms: Record<string, number>;
      searches: number;
    };
    const flat = { score: http.score, ...Object.fromEntries(Object.entries(http.terms).map(([k, v]) => [`term_${k}`, v])), searches: http.searches };
    expect(py.single).toEqual(flat);
    expect(py.single).toEqual({ score: 1.1, term_em: 1, term_format: 1, term_search_cost: 0, term_invalid: 0, searches: 0 });
    expect(py.batch[0]).toEqual(flat);
    expect(py.batch[1]).toMatchObject({ term_em: 0, term_invalid: -1 });
    expect(py.err).toMatch(/^reward server rejected the request \(400\): .*ground_truth: expected/);
  });

  it("CLI: arl export verl --out … (dotted config flags apply)", () => {
    const dir = join(mkdtempSync(join(tmpdir(), "arl-verl-cli-")), "o");
    const r = spawnSync(process.execPath, ["bin/arl.mjs", "export", "verl", "--out", dir, "--env.world.numCountries", "12", "--env.topK", "5"], { encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`veRL ${VERL_VERSION} export: ${s.world.train.length} train / ${s.world.test.length} test rows`);
    for (const f of ["tool_config.yaml", "reward_fn.py", "train.parquet", "test.parquet", "run.sh"]) expect(existsSync(join(dir, f)), f).toBe(true);
    expect(parseYaml(readFileSync(join(dir, "tool_config.yaml"), "utf8")).tools[0].config.topk).toBe(5);
    const again = spawnSync(process.execPath, ["bin/arl.mjs", "export", "verl", "--out", dir], { encoding: "utf8" });
    expect(again.status).toBe(1);
    expect(again.stderr).toMatch(/already exist/);
  }, 20_000);
});
