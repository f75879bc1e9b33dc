import { execFile, execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parquetMetadata, parquetReadObjects } from "hyparquet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { exportVerl, VERL_FILES, type VerlExportResult, verlFiles } from "../src/export/verl.ts";
import { AGENT_NAME, DATA_SOURCE, SYSTEM_PROMPT, USER_INSTRUCTIONS, verlRows } from "../src/export/verlRows.ts";
import { verlSchedule } from "../src/export/verlSchedule.ts";
import { SEARCH_TOOL_SCHEMA, toolConfig } from "../src/export/verlSearchTool.ts";
import { parseVerlTarget, VERL_RELEASES, VERL_VERSION } from "../src/export/verlTarget.ts";
import { presetWeights } from "../src/reward/presets.ts";
import { listen, type RunningServer } from "../src/http/server.ts";
import { createRewardApp } from "../src/serve/reward.ts";
import { resolveConfig } from "../src/train/config.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { searchRecipe } from "../src/envs/index.ts";
import { setupExperiment } from "../src/train/setup.ts";

const config = resolveConfig(applyOverrides({}, { "env.options.numCountries": "12" }));
const s = setupExperiment(config, searchRecipe);
const hasPython = spawnSync("python3", ["--version"]).status === 0;
let out: string;
let result: VerlExportResult;
/** The same world exported for veRL v0.5.0. */
let out05: string;
let result05: VerlExportResult;
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
  out05 = join(mkdtempSync(join(tmpdir(), "arl-verl05-")), "verl");
  result05 = await exportVerl({ outDir: out05, config, verlVersion: "0.5" });
  reward = await listen(createRewardApp({ reward: { weights: presetWeights("default") }, passages: s.instance.corpus!() }), { host: "127.0.0.1", port: 0 });
});
afterAll(async () => reward?.close());

describe("arl export verl", () => {
  it("writes the five files and one row per task of each split; the default target is the current release (v0.9.0)", () => {
    expect(VERL_VERSION).toBe("v0.9.0");
    expect(VERL_RELEASES.current).toEqual({ tag: "v0.9.0", commit: "483b8a009ba3a97563edee3a19887e4862b8094a", pip: "0.9.0" });
    expect(VERL_RELEASES["0.5"]).toEqual({ tag: "v0.5.0", commit: "8fdc4d3f202f41461f4de9f42a637228e342668b", pip: "0.5.0" });
    expect(result).toMatchObject({ target: "current", release: "v0.9.0" });
    expect(VERL_FILES).toEqual(["search_tool.py", "reward_fn.py", "train.parquet", "test.parquet", "run.sh"]);
    expect(result.files).toEqual({
      tool: join(out, "search_tool.py"),
      rewardFn: join(out, "reward_fn.py"),
      train: join(out, "train.parquet"),
      test: join(out, "test.parquet"),
      runScript: join(out, "run.sh"),
    });
    expect(existsSync(join(out, "tool_config.yaml"))).toBe(false); // veRL ≥ 0.8 has no SearchTool to configure
    expect(result.rows).toEqual({ train: s.instance.train.length, test: s.instance.test.length });
    expect(statSync(result.files.runScript).mode & 0o111).not.toBe(0);
    // The 0.5 target writes tool_config.yaml instead of search_tool.py, with the same rows.
    expect(verlFiles("0.5")).toEqual(["tool_config.yaml", "reward_fn.py", "train.parquet", "test.parquet", "run.sh"]);
    expect(result05).toMatchObject({ target: "0.5", release: "v0.5.0", rows: result.rows, files: { tool: join(out05, "tool_config.yaml") } });
    expect(existsSync(join(out05, "search_tool.py"))).toBe(false);
    expect(result05.schedule).toEqual(result.schedule);
  });

  it("--verl-version values: current / latest / 0.9 / v0.9.0 and 0.5 / 0.5.0 / v0.5.0; others are refused", () => {
    for (const v of ["current", "latest", "0.9", "0.9.0", "v0.9.0", " Current "]) expect(parseVerlTarget(v), v).toBe("current");
    for (const v of ["0.5", "0.5.0", "v0.5.0"]) expect(parseVerlTarget(v), v).toBe("0.5");
    for (const v of ["0.6", "0.7.1", "", "1"]) expect(() => parseVerlTarget(v), v).toThrow(/must be current \(= v0\.9\.0\) or 0\.5 \(= v0\.5\.0\)/);
  });

  it("tool_config.yaml (0.5): veRL's SearchTool pointed at our /retrieve, with the env's topk", () => {
    const doc = parseYaml(readFileSync(result05.files.tool, "utf8"));
    expect(doc).toEqual(toolConfig("http://127.0.0.1:8000/retrieve", 3));
    expect(doc.tools[0].tool_schema).toEqual(SEARCH_TOOL_SCHEMA);
    const t = doc.tools[0];
    expect(t.class_name).toBe("verl.tools.search_tool.SearchTool");
    expect(t.config).toEqual({ retrieval_service_url: "http://127.0.0.1:8000/retrieve", topk: 3, num_workers: 120, rate_limit: 120, timeout: 30, type: "native" });
    expect(t.tool_schema.function.name).toBe("search");
    expect(t.tool_schema.function.parameters).toMatchObject({ type: "object", required: ["query_list"], properties: { query_list: { type: "array", items: { type: "string" } } } });
  });

  it("train/test.parquet: veRL's Search-R1 columns with native nested types, prompt = env reset prompt", async () => {
    const meta = parquetMetadata(readFileSync(result.files.train).buffer.slice(0) as ArrayBuffer);
    expect(meta.schema[0].num_children).toBe(6);
    expect(meta.num_rows).toBe(BigInt(s.instance.train.length));
    const names = meta.schema.map((e) => e.name);
    // prompt is LIST<STRUCT<role, content>> (not a JSON string), target a LIST<UTF8>.
    expect(names.slice(1, 7)).toEqual(["data_source", "prompt", "list", "element", "role", "content"]);
    expect(meta.schema[2]).toMatchObject({ name: "prompt", converted_type: "LIST", num_children: 1 });
    expect(meta.schema[3]).toMatchObject({ name: "list", repetition_type: "REPEATED" });
    expect(meta.schema[5]).toMatchObject({ name: "role", type: "BYTE_ARRAY", converted_type: "UTF8" });
    expect(meta.schema.some((e) => e.converted_type === "JSON")).toBe(false);
    // agent_name: a top-level UTF8 column, the last one (veRL's RLHFDataset keeps every column of a row).
    expect(meta.schema.at(-1)).toMatchObject({ name: "agent_name", type: "BYTE_ARRAY", converted_type: "UTF8", repetition_type: "OPTIONAL" });
    expect(meta.schema.filter((e) => e.name === "agent_name")).toHaveLength(1);

    for (const [split, tasks] of [["train", s.instance.train], ["test", s.instance.test]] as const) {
      const rows = await readParquet(split === "train" ? result.files.train : result.files.test);
      const expected = await verlRows(tasks, split, (t) => s.instance.makeEnv(0)().reset(t));
      expect(rows).toEqual(JSON.parse(JSON.stringify(expected)));
      // The 0.5 export's rows are the same (agent_name included: it is what mode=async would need there too).
      expect(await readParquet(split === "train" ? result05.files.train : result05.files.test)).toEqual(rows);
      expect(new Set(rows.map((r) => r.agent_name))).toEqual(new Set([AGENT_NAME]));
      expect(AGENT_NAME).toBe("tool_agent");
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
        agent_name: "tool_agent",
      });
    }
  });

  it("run.sh: valid bash that runs veRL's main_ppo with the multi-turn tool and our reward (both targets)", () => {
    const common = [
      "python3 -m verl.trainer.main_ppo",
      "    algorithm.adv_estimator=grpo \\\n",
      '    data.train_files="$HERE/train.parquet" \\\n',
      '    data.val_files="$HERE/test.parquet" \\\n',
      "    data.return_raw_chat=True \\\n",
      "    actor_rollout_ref.rollout.name=sglang \\\n",
      "    actor_rollout_ref.rollout.multi_turn.enable=True \\\n",
      `    actor_rollout_ref.rollout.multi_turn.max_assistant_turns=${config.env.maxTurns} \\\n`,
      "    actor_rollout_ref.rollout.multi_turn.max_tool_response_length=1024 \\\n",
      "npx arl serve retrieval --port 8000",
      "npx arl serve reward --port 8100",
      'export ARL_REWARD_URL="${ARL_REWARD_URL:-http://127.0.0.1:8100}"',
      // sized from the 40 train rows: 8 prompts × 5 steps × 10 epochs
      "\nTRAIN_ROWS=40\nTRAIN_BATCH_SIZE=8\nPPO_MINI_BATCH_SIZE=8\nROLLOUT_N=5\nTOTAL_EPOCHS=10\nTOTAL_TRAINING_STEPS=50\n",
      "    data.train_batch_size=$TRAIN_BATCH_SIZE \\\n",
      "    trainer.total_epochs=$TOTAL_EPOCHS \\\n",
      "    trainer.total_training_steps=$TOTAL_TRAINING_STEPS \\\n",
      '    "$@"\n',
    ];
    const byTarget = {
      current: {
        sh: result.files.runScript,
        has: [
          "# veRL v0.9.0 GRPO run",
          'pip install "verl[sglang]==0.9.0"',
          "    actor_rollout_ref.rollout.mode=async \\\n",
          '    actor_rollout_ref.rollout.multi_turn.function_tool_path="$HERE/search_tool.py" \\\n',
          "    actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent \\\n",
          "    reward.reward_manager.name=naive \\\n",
          '    reward.custom_reward_function.path="$HERE/reward_fn.py" \\\n',
          "    reward.custom_reward_function.name=compute_score \\\n",
          'export ARL_RETRIEVAL_URL="${ARL_RETRIEVAL_URL:-http://127.0.0.1:8000/retrieve}"',
        ],
        not: ["tool_config_path", "mode=sync", "    custom_reward_function.", "reward_model.reward_manager"],
      },
      "0.5": {
        sh: result05.files.runScript,
        has: [
          "# veRL v0.5.0 GRPO run",
          'pip install "verl[sglang]==0.5.0"',
          "    actor_rollout_ref.rollout.mode=sync \\\n",
          '    actor_rollout_ref.rollout.multi_turn.tool_config_path="$HERE/tool_config.yaml" \\\n',
          "    reward_model.reward_manager=naive \\\n",
          '    custom_reward_function.path="$HERE/reward_fn.py" \\\n',
          "    custom_reward_function.name=compute_score \\\n",
        ],
        not: ["function_tool_path", "default_agent_loop", "mode=async", "reward.reward_manager", "reward.custom_reward_function", "ARL_RETRIEVAL_URL"],
      },
    } as const;
    for (const [target, want] of Object.entries(byTarget)) {
      expect(spawnSync("bash", ["-n", want.sh]).status, target).toBe(0);
      const sh = readFileSync(want.sh, "utf8");
      for (const opt of [...common, ...want.has]) expect(sh, `${target}: ${opt}`).toContain(opt);
      for (const opt of want.not) expect(sh, `${target}: not ${opt}`).not.toContain(opt);
    }
    expect(result.schedule).toEqual(verlSchedule(s.instance.train.length));
  });

  it("refuses to replace files unless overwrite", async () => {
    await expect(exportVerl({ outDir: out, config })).rejects.toThrow(/search_tool\.py.*already exist.*--overwrite/);
    await expect(exportVerl({ outDir: out05, config, verlVersion: "0.5" })).rejects.toThrow(/tool_config\.yaml.*already exist.*--overwrite/);
    await expect(exportVerl({ outDir: out, config, overwrite: true })).resolves.toMatchObject({ rows: result.rows });
    await expect(exportVerl({ outDir: join(out, "x"), config, rewardUrl: "localhost:8100" })).rejects.toThrow(/rewardUrl must be an http\(s\) URL/);
  });

  it.skipIf(!hasPython)("reward_fn.py compiles and its compute_score gets the live reward server's answer", async () => {
    execFileSync("python3", ["-m", "py_compile", result.files.rewardFn]);
    const rows = await readParquet(result.files.train);
    const row = rows[0] as { data_source: string; reward_model: { ground_truth: unknown }; extra_info: Record<string, unknown> };
    const answer = s.instance.train[0].answers[0];
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
    const r = spawnSync(process.execPath, ["bin/arl.mjs", "export", "verl", "--out", dir, "--env.options.numCountries", "12", "--env.options.topK", "5"], { encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`veRL ${VERL_VERSION} export: ${s.instance.train.length} train / ${s.instance.test.length} test rows`);
    expect(r.stdout).toContain("run.sh: batch 8 prompts × 5 steps/epoch × 10 epochs = 50 steps (50 optimizer updates, mini-batch 8)");
    for (const f of VERL_FILES) expect(existsSync(join(dir, f)), f).toBe(true);
    expect(readFileSync(join(dir, "search_tool.py"), "utf8")).toContain('TOPK = int(os.environ.get("ARL_RETRIEVAL_TOPK", "5"))');
    const again = spawnSync(process.execPath, ["bin/arl.mjs", "export", "verl", "--out", dir], { encoding: "utf8" });
    expect(again.status).toBe(1);
    expect(again.stderr).toMatch(/already exist/);
    // --verl-version 0.5 with --min-steps / --train-batch-size
    const dir05 = join(dir, "v05");
    const old = spawnSync(
      process.execPath,
      ["bin/arl.mjs", "export", "verl", "--out", dir05, "--verl-version", "0.5", "--min-steps", "12", "--train-batch-size", "16", "--env.options.numCountries", "12", "--env.options.topK", "5"],
      { encoding: "utf8" },
    );
    expect(old.status, old.stderr).toBe(0);
    expect(old.stdout).toContain("veRL v0.5.0 export: ");
    expect(old.stdout).toContain("run.sh: batch 16 prompts × 2 steps/epoch × 6 epochs = 12 steps (24 optimizer updates, mini-batch 8)");
    for (const f of verlFiles("0.5")) expect(existsSync(join(dir05, f)), f).toBe(true);
    expect(parseYaml(readFileSync(join(dir05, "tool_config.yaml"), "utf8")).tools[0].config.topk).toBe(5);
    const bad = spawnSync(process.execPath, ["bin/arl.mjs", "export", "verl", "--out", join(dir, "bad"), "--verl-version", "0.7"], { encoding: "utf8" });
    expect(bad.status).toBe(2); // a usage error (ConfigError)
    expect(bad.stderr).toMatch(/--verl-version: expected current \(= v0\.9\.0\) or 0\.5 \(= v0\.5\.0\), got "0\.7"/);
    const small = spawnSync(process.execPath, ["bin/arl.mjs", "export", "verl", "--out", join(dir, "small"), "--env.options.numCountries", "8"], { encoding: "utf8" });
    expect(small.status).toBe(1);
    expect(small.stderr).toMatch(/the train split has 26 rows; veRL needs at least 32/);
    expect(existsSync(join(dir, "small"))).toBe(false); // nothing written
    const zero = spawnSync(process.execPath, ["bin/arl.mjs", "export", "verl", "--out", join(dir, "z"), "--min-steps", "0"], { encoding: "utf8" });
    expect(zero.status).toBe(2);
    expect(zero.stderr).toMatch(/--min-steps: expected a positive integer, got "0"/);
  }, 60_000);
});
