import { availableParallelism } from "node:os";
import { relative } from "node:path";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * Test files that assert a wall-clock bound (a request answered within N ms, linear-time parsing measured by the
 * clock, the event loop turning while a tool busy-waits). They run after the others, one file at a time, on an
 * otherwise idle machine: beside another test file's training run their timings would measure the neighbour.
 */
const WALL_CLOCK_FILES = [
  "test/env-tool.test.ts",
  "test/faults.test.ts",
  "test/gateway-limits.test.ts",
  "test/loop-turns.test.ts",
  "test/reward-linear.test.ts",
  "test/serve-hardening.test.ts",
  "test/serve-reward-adversarial.test.ts",
];

/**
 * Seconds each of the slowest test files took in a full run on a 2-core machine, one file at a time (834c7c4;
 * cli-agent after its cut, issue 30).
 * They start first, longest first, so that no long file is left running alone at the end of the run; the other
 * files follow in vitest's own order. A stale figure only changes the order, never a result.
 */
const SLOW_FILE_SECONDS: Record<string, number> = {
  "test/cli-agent.test.ts": 55,
  "test/cli.test.ts": 59,
  "test/lab-envs-quick.test.ts": 47,
  "test/library-pack.test.ts": 47,
  "test/cli-envs.test.ts": 43,
  "test/example-own-env.test.ts": 30,
  "test/lab-env.test.ts": 26,
  "test/resume.test.ts": 23,
  "test/algo-rl.test.ts": 19,
  "test/tinker.test.ts": 18,
  "test/agent-experiment.test.ts": 17,
  "test/tinker-restart.test.ts": 16,
  "test/view-browser.test.ts": 14,
  "test/env-research.test.ts": 13,
  "test/export-verl.test.ts": 13,
  "test/env-complaints.test.ts": 13,
  "test/eval-openai-cli.test.ts": 12,
  "test/lab-algorithms.test.ts": 12,
  "test/view-data.test.ts": 10,
  "test/algo-gae.test.ts": 10,
  "test/tinker-contract.test.ts": 9,
  "test/agent-tinker.test.ts": 9,
};

/** vitest's order (groups, then its cached durations or file sizes), with the known slow files moved to the front. */
class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const seconds = (spec: TestSpecification) => SLOW_FILE_SECONDS[relative(spec.project.config.root, spec.moduleId).replaceAll("\\", "/")] ?? 0;
    const group = (spec: TestSpecification) => spec.project.config.sequence.groupOrder ?? 0;
    return sorted
      .map((spec, index) => ({ spec, index }))
      .sort((a, b) => group(a.spec) - group(b.spec) || seconds(b.spec) - seconds(a.spec) || a.index - b.index)
      .map(({ spec }) => spec);
  }
}

/** What every test file runs with. */
const COMMON = {
  testTimeout: 120_000,
  hookTimeout: 120_000,
  // jax-js holds one wasm heap per process; forks keep test files isolated.
  pool: "forks",
} as const;

export default defineConfig({
  test: {
    // vitest's default is one worker per core less one: a single worker on 2 cores. In such a full run the 2 cores
    // were busy 1.4 on average (1 110 s of CPU over 775 s: files wait on child processes, servers, the file
    // system), so two files at once use the second core. (`--maxWorkers N` on the command line still wins: the
    // projects below leave it to this root value.)
    maxWorkers: Math.max(2, availableParallelism() - 1),
    sequence: { sequencer: SlowFirstSequencer },
    projects: [
      { test: { ...COMMON, name: "main", include: ["test/**/*.test.ts"], exclude: WALL_CLOCK_FILES } },
      { test: { ...COMMON, name: "wall-clock", include: WALL_CLOCK_FILES, maxWorkers: 1, sequence: { groupOrder: 1 } } },
    ],
  },
});
