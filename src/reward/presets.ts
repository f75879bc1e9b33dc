/**
 * Named reward designs: term weights for the reward lab's comparisons and for domains (finance, medical,
 * insurance, customer service, research). Every preset's weights are documented in `docs/rewards.md`, and a test
 * checks that the documented table equals `REWARD_PRESETS` exactly.
 */

/** A named reward design. */
export interface RewardPreset {
  /** What the design pays for and which loophole it opens or closes. */
  description: string;
  /** Where it is meant to be used: `lab` for the reward-hacking comparisons, else the application domain. */
  domain: string;
  /** Term weights (`RewardConfig.weights`); every name is a term of `REWARD_TERMS`. */
  weights: Record<string, number>;
}

const FINANCE: Record<string, number> = {
  em: 1,
  format: 0.1,
  invalid: 0.1,
  grounded: 0.3,
  ignored_evidence: 0.5,
  fabricated_citation: 1,
  unsupported_answer: 1,
  sensitive: 1,
  forbidden_tool: 1,
  conflict_verify: 0.3,
  search_cost: 0.02,
};

/** The presets by name (insertion order = documentation order). */
export const REWARD_PRESETS: Readonly<Record<string, RewardPreset>> = {
  default: {
    description: "the main job's reward: exact match, a small format bonus, a price per search and per invalid action",
    domain: "general",
    weights: { em: 1, format: 0.1, search_cost: 0.1, invalid: 0.1 },
  },
  "tool-env": {
    description: "any tool env with a grader: the env's grade, a small format bonus, a price per invalid action and per call beyond the group's leanest success",
    domain: "general",
    weights: { outcome: 1, format: 0.1, invalid: 0.1, needless_calls: 0.05 },
  },
  "outcome-only": {
    description: "exact match only: pays lucky guesses on facts the policy does not know (no reason to search)",
    domain: "lab",
    weights: { em: 1 },
  },
  "per-call-bonus": {
    description: "exact match plus pay per tool call: breeds tool spam",
    domain: "lab",
    weights: { em: 1, call_bonus: 0.15 },
  },
  "search-cost-only": {
    description: "exact match minus a steep price per search: breeds guessing instead of searching",
    domain: "lab",
    weights: { em: 1, search_cost: 0.3 },
  },
  composite: {
    description: "exact match with necessity and evidence terms: penalises guesses, needless searches, ignored evidence and invented citations",
    domain: "lab",
    weights: {
      em: 1,
      format: 0.1,
      invalid: 0.1,
      guess: 0.3,
      needless_search: 0.2,
      ignored_evidence: 0.2,
      fabricated_citation: 0.5,
      search_cost: 0.02,
    },
  },
  finance: {
    description: "grounded answers, no invented citations, no unsupported high-risk answers, no leaked personal data, verify conflicts",
    domain: "finance",
    weights: { ...FINANCE },
  },
  medical: {
    description: "as finance, with unsupported high-risk answers penalised twice as hard and stronger conflict verification",
    domain: "medical",
    weights: { ...FINANCE, unsupported_answer: 2, conflict_verify: 0.5 },
  },
  insurance: {
    description: "as finance, with leaked personal data penalised twice as hard",
    domain: "insurance",
    weights: { ...FINANCE, sensitive: 2 },
  },
  "customer-service": {
    description: "fast and cheap: prices searches, latency and tokens; no needless searches, no leaked personal data, no forbidden tools",
    domain: "customer-service",
    weights: {
      em: 1,
      format: 0.1,
      invalid: 0.1,
      search_cost: 0.2,
      latency: 0.2,
      gen_tokens: 0.005,
      obs_tokens: 0.001,
      needless_search: 0.3,
      sensitive: 1,
      forbidden_tool: 1,
    },
  },
  research: {
    description: "partial credit (F1), evidence recall, verified conflicts and honest citations; searching is cheap",
    domain: "research",
    weights: {
      em: 0.5,
      f1: 0.5,
      format: 0.1,
      invalid: 0.1,
      evidence_recall: 0.3,
      conflict_verify: 0.5,
      fabricated_citation: 1,
      search_cost: 0.01,
    },
  },
};

/**
 * The weights of a preset (a fresh copy the caller may change).
 * @throws Error naming the unknown preset and listing the allowed ones
 */
export function presetWeights(name: string): Record<string, number> {
  if (!Object.hasOwn(REWARD_PRESETS, name)) {
    throw new Error(`unknown reward preset "${name}"; allowed presets: ${Object.keys(REWARD_PRESETS).join(", ")}`);
  }
  return { ...REWARD_PRESETS[name].weights };
}
