/**
 * The data of a reward lab: what `runLab` produces and `renderReport` turns into `report.html`. Plain JSON (also
 * written to `lab.json`), so a report can be re-rendered without retraining.
 */
import type { Metrics } from "../core/types.ts";
import type { DetectorFiring } from "../reward/detectors.ts";

export type { DetectorFiring };

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

/** A whole lab. */
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
  /** Total wall time (ms). */
  wallMs: number;
}
