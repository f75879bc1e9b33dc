/**
 * How a lab judges its designs, chosen by the recipe's `labReport`:
 * - `qa` (the search env): held-out EM, searches and guess rate by known vs unknown facts and the needless-search
 *   rate (`EvalSummary`), and the lab's claims about them (`computeClaims`) → `LabResult`, `renderReport`;
 * - `loopholes` (the default): the recipe's summary row (task success, grade, breakdown) and, per design, its expected
 *   detectors against what fired (`loopholeVerdicts`) → `EnvLabResult`, `renderEnvReport`.
 * The lab's loop (`./lab.ts`) is the same for both.
 */
import type { Trajectory } from "../core/types.ts";
import type { EnvRecipe } from "../env/recipe.ts";
import type { DetectorFiring } from "../reward/detectors.ts";
import { answeredWithoutSearch, needlessSearches } from "../reward/evidence.ts";
import { summarizeEval } from "../train/eval.ts";
import { mean, trajectoryEm } from "../train/metrics.ts";
import type { Setup } from "../train/setup.ts";
import type { SummaryRow } from "../train/summary.ts";
import { computeClaims, loopholeVerdicts } from "./claims.ts";
import { renderEnvReport, renderReport } from "./report.ts";
import type { LabAlgorithm } from "./reportTables.ts";
import type { AnyLabResult, DesignResult, EnvDesignResult, EnvLabResult, EvalSummary, LabResult } from "./types.ts";

/** A held-out evaluation: the summary row and its episodes. */
export interface EvaluatedRow {
  row: SummaryRow;
  trajectories: Trajectory[];
}

/** One design as the lab measured it, before the judge summarises its evaluation. */
export type MeasuredDesign = Omit<EnvDesignResult, "after"> & { after: EvaluatedRow };

/** What every lab result has, whatever its judge. */
export interface LabCommon {
  name: string;
  seed: number;
  quick: boolean;
  rlSteps: number;
  evalQuestions: number;
  warmStartFrom?: string;
  wallMs: number;
}

/** A lab's judge (see the file doc). */
export interface LabJudge {
  /** The `summary.json` of a design's run folder. */
  designSummary(design: string, after: EvaluatedRow, detectors: DetectorFiring[]): unknown;
  /** Records a design's results. */
  addDesign(design: MeasuredDesign): void;
  /** The whole lab's result (its fingerprint is set by the caller). */
  result(common: LabCommon): AnyLabResult;
  /** `report.html` of the result. */
  report(result: AnyLabResult, base?: LabAlgorithm): Promise<string>;
}

/** EM, searches and guess rate (all / known / unknown) and needless searches of evaluation trajectories. */
export function evalSummary(trajs: readonly Trajectory[], result: Omit<EvalSummary, "needlessSearches" | "needlessSearchRate">): EvalSummary {
  const needless = trajs.map(needlessSearches).filter((x): x is number => x !== undefined);
  const guessedUnknown = trajs.filter((t) => t.task.known === false && answeredWithoutSearch(t));
  const { all, known, unknown } = result;
  return {
    all,
    known,
    unknown,
    needlessSearches: mean(needless),
    needlessSearchRate: mean(needless.map((x) => (x > 0 ? 1 : 0))),
    guessEmUnknown: mean(guessedUnknown.map(trajectoryEm)),
  };
}

/** The QA slices (all / known / unknown) of trajectories, without the trajectories. */
function slices(trajs: Trajectory[]): Omit<ReturnType<typeof summarizeEval>, "trajectories"> {
  const { trajectories: _t, ...result } = summarizeEval(trajs);
  return result;
}

/** The QA judge (`labReport: "qa"`). */
function qaJudge(warm: EvaluatedRow): LabJudge {
  const designs: DesignResult[] = [];
  const warmStart = evalSummary(warm.trajectories, slices(warm.trajectories));
  return {
    designSummary: (design, after, detectors) => ({ design, result: slices(after.trajectories), detectors }),
    addDesign: ({ after, expectedDetectors: _e, ...d }) => designs.push({ ...d, after: evalSummary(after.trajectories, slices(after.trajectories)) }),
    result: ({ warmStartFrom, ...common }) => {
      const partial: Omit<LabResult, "claims"> = { ...common, warmStart, designs };
      return { ...partial, claims: computeClaims(partial), ...(warmStartFrom !== undefined ? { warmStartFrom } : {}) };
    },
    report: (result, base) => renderReport(result as LabResult, base),
  };
}

/** The loophole judge (`labReport: "loopholes"`, the default). */
function loopholeJudge(recipe: EnvRecipe, s: Setup, warm: EvaluatedRow): LabJudge {
  const designs: EnvDesignResult[] = [];
  return {
    designSummary: (design, after, detectors) => ({ design, env: recipe.name, row: after.row, detectors }),
    addDesign: (d) => designs.push({ ...d, after: d.after.row }),
    result: ({ warmStartFrom, wallMs, ...common }): EnvLabResult => ({
      name: common.name,
      env: recipe.name,
      protocol: s.protocol.name,
      seed: common.seed,
      quick: common.quick,
      rlSteps: common.rlSteps,
      evalQuestions: common.evalQuestions,
      breakdownLabels: s.instance.breakdownLabels,
      warmStart: warm.row,
      designs,
      loopholes: loopholeVerdicts(warm.row, designs),
      ...(warmStartFrom !== undefined ? { warmStartFrom } : {}),
      wallMs,
    }),
    report: (result, base) => renderEnvReport(result as EnvLabResult, base),
  };
}

/** The judge of a recipe's lab (see the file doc), given the warm start's held-out evaluation. */
export function labJudge(recipe: EnvRecipe, s: Setup, warm: EvaluatedRow): LabJudge {
  return recipe.labReport === "qa" ? qaJudge(warm) : loopholeJudge(recipe, s, warm);
}

/** True for a QA lab's result (it has claims), false for a loophole lab's. */
export function isQaLab(lab: AnyLabResult): lab is LabResult {
  return "claims" in lab;
}
