/**
 * The data of a reward lab: what `runLab` produces and `renderReport` turns into `report.html`. Plain JSON (also
 * written to `lab.json`), so a report can be re-rendered without retraining.
 */
import type { Metrics } from "../core/types.ts";
import type { DetectorFiring } from "../reward/detectors.ts";
import type { SummaryRow } from "../train/summary.ts";

export type { DetectorFiring };
/** A held-out evaluation row of any env recipe (task success, grade, calls, invalid actions, the recipe's breakdown). */
export type { SummaryRow };

/** EM, searches per question and guess rate (answered without search) over one slice of held-out questions. */
export interface SliceResult {
  /** Questions in the slice. */
  n: number;
  /** Exact match, in [0, 1]. */
  em: number;
  /** Mean searches per question. */
  searches: number;
  /** Share answered without any search, in [0, 1]. */
  guessRate: number;
}

/** A policy's held-out evaluation: all questions and the known / unknown split, plus the needless-search rate. */
export interface EvalSummary {
  all: SliceResult;
  known: SliceResult;
  unknown: SliceResult;
  /** Mean searches above the task's need per question (need: 0 for known facts, the evidence hops otherwise). */
  needlessSearches: number;
  /** Share of questions with at least one needless search, in [0, 1]. */
  needlessSearchRate: number;
  /** EM among unknown-fact questions answered without any search (what a guess earns), in [0, 1]; 0 when none. */
  guessEmUnknown?: number;
}

/** One reward design's run in the lab. */
export interface DesignResult {
  /** Design name, e.g. `outcome-only`, `composite`. */
  name: string;
  /** What the design is and which loophole it opens or closes. */
  description: string;
  /** Reward term weights used. */
  weights: Record<string, number>;
  /** Training-option overrides of the design (dotted config paths → values), e.g. `{ "rl.maskObservations": "false" }`. */
  overrides: Record<string, string>;
  /** Per RL step metrics, index = step (reward/mean, em, searches, hack/*, train/*). */
  steps: Metrics[];
  /** Detectors firing at the end of training (empty = quiet). */
  detectors: DetectorFiring[];
  /** Every firing ever raised during training (a detector may fire and later stop). */
  firingsDuringTraining: DetectorFiring[];
  /** Held-out evaluation after RL. */
  after: EvalSummary;
  /** Five example trajectories on the same held-out questions, formatted as text: warm start and after RL. */
  examples: { before: string[]; after: string[] };
  /** Wall time of this design's RL and evaluation (ms); not deterministic, never in metrics. */
  wallMs: number;
  /** Wall time of this design's RL steps alone (ms; not deterministic); absent in labs written before it existed. */
  rlWallMs?: number;
}

/** A claim the lab measures, stated in words with its numbers (whatever they show). */
export interface Claim {
  /** `a`…`e` as in issue 3's acceptance list. */
  id: string;
  title: string;
  /** The measured statement, e.g. "outcome-only guessed on 41.0 % of unknown facts vs 12.5 % for composite …". */
  text: string;
  /** The numbers the text cites, by name. */
  numbers: Record<string, number>;
}

/**
 * A whole QA lab (`EnvRecipe.labReport: "qa"`, the search env): each design's EM, searches and guess rate by known vs
 * unknown facts, and the lab's claims about them.
 */
export interface LabResult {
  name: string;
  seed: number;
  quick: boolean;
  /** RL steps per design (the shared budget). */
  rlSteps: number;
  /** Held-out questions evaluated. */
  evalQuestions: number;
  /** The shared warm start (SFT) evaluated on the held-out questions. */
  warmStart: EvalSummary;
  designs: DesignResult[];
  claims: Claim[];
  /** The warm-start checkpoint the designs started from when it was given (`--warm-start`); absent when trained here. */
  warmStartFrom?: string;
  /** Total wall time (ms). */
  wallMs: number;
  /**
   * `labFingerprint` of this lab (16 hex characters): equal for a rerun with the same seed, config and code on the
   * same machine (wall times, name and paths left out). Absent in labs written before it existed.
   */
  fingerprint?: string;
}


/**
 * Which loophole a design opened, read from the detectors: what the design declares it should fire
 * (`RecipeLabDesign.expectedDetectors`) against what fired during training and at its end.
 * - `opened`: every expected detector fired during training; `partly opened`: some did;
 * - `not reproduced`: detectors were expected and none of them fired;
 * - `closed`: the design expects none (a fix) and none fired; `fired anyway`: it expects none and some fired;
 * - `none declared`: the design says nothing (an algorithm design or a user's), whatever fired is listed.
 */
export type LoopholeOutcome = "opened" | "partly opened" | "not reproduced" | "closed" | "fired anyway" | "none declared";

/** One design's loophole verdict (see {@link LoopholeOutcome}). */
export interface LoopholeVerdict {
  design: string;
  /** Detector names the design expects to fire; absent when the design declares none. */
  expected?: string[];
  /** Detector names that fired at some step of training (first firing order, each once). */
  firedDuringTraining: string[];
  /** Detector names still firing at the end of training. */
  firedAtEnd: string[];
  outcome: LoopholeOutcome;
  /** The verdict in one sentence, with the numbers (held-out success and score before → after). */
  text: string;
}

/** One design's run in an env lab: as {@link DesignResult}, with the recipe's evaluation row after RL. */
export interface EnvDesignResult extends Omit<DesignResult, "after"> {
  /** Held-out evaluation after RL (task success, grade, calls, the recipe's breakdown). */
  after: SummaryRow;
  /** Detectors the design expects to fire (`RecipeLabDesign.expectedDetectors`); absent when it declares none. */
  expectedDetectors?: string[];
}

/**
 * A loophole lab (`EnvRecipe.labReport: "loopholes"`, the default): one warm start, each design trained by RL with the
 * same seed, data and budget, evaluated with the recipe's grader and breakdown, and judged by the detectors it was
 * expected to fire. Also written to `lab.json`.
 */
export interface EnvLabResult {
  name: string;
  /** The env recipe's registry name (`arl envs`). */
  env: string;
  /** The tool-call protocol the lab spoke. */
  protocol: string;
  seed: number;
  quick: boolean;
  /** RL steps per design (the shared budget). */
  rlSteps: number;
  /** Held-out tasks evaluated. */
  evalQuestions: number;
  /** Labels of the recipe's breakdown keys, in table order (`RecipeInstance.breakdownLabels`). */
  breakdownLabels: Record<string, string>;
  /** The shared warm start (SFT) on the held-out tasks. */
  warmStart: SummaryRow;
  designs: EnvDesignResult[];
  /** Per design: which loophole it opened (expected detectors vs what fired). */
  loopholes: LoopholeVerdict[];
  /** The warm-start checkpoint the designs started from when it was given (`--warm-start`), else absent (trained here). */
  warmStartFrom?: string;
  /** Total wall time (ms). */
  wallMs: number;
  /** `labFingerprint` of this lab (see `LabResult.fingerprint`); absent in labs written before it existed. */
  fingerprint?: string;
}

/** What `runLab` returns: the lab of the recipe's `labReport` kind (a QA lab has `claims`, a loophole lab `loopholes`). */
export type AnyLabResult = LabResult | EnvLabResult;
