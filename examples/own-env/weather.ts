// A minimal env of your own: "which city is warmer today?" with one tool, get_weather(city). The agent must call
// it for both cities before answering; a lazy persona guesses, so SFT learns a mix and RL learns to look it up.
// It starts from the package's base model (policy.init: base), which reads any text: no vocabulary to list.
import { z } from "zod";
import { defineToolRecipe, Rng, tool, type Action, type Task, type TurnContext } from "agentic-rl";

const CITIES = ["Oslo", "Cairo", "Lima", "Perth", "Tokyo", "Quito", "Dakar", "Hanoi", "Rome", "Austin", "Doha", "Minsk"];
type Pair = { a: string; b: string };

// The world: each city's temperature today (°C), re-drawn per counterfactual world k so answers cannot be memorised.
const temps = (seed: number) => { const r = new Rng(seed); return new Map(CITIES.map((c) => [c, r.int(40)])); };
const warmer = (t: ReadonlyMap<string, number>, p: Pair) => (t.get(p.a)! >= t.get(p.b)! ? p.a : p.b);
const tasks: Task<Pair>[] = CITIES.flatMap((a) => CITIES.filter((b) => b !== a).map((b) =>
  ({ id: `weather:${a}:${b}`, question: `Which is warmer today, ${a} or ${b}?`, answers: [], kind: "compare", data: { a, b } })));
const split = new Rng(7).shuffle(tasks);

const weatherTool = (t: ReadonlyMap<string, number>) => tool({
  name: "get_weather",
  description: "today's temperature of a city in celsius",
  inputSchema: z.object({ city: z.string() }),
  execute: ({ city }) => {
    if (!t.has(city)) throw new Error(`unknown city ${city}`);
    return { city, temp_c: t.get(city)! };
  },
});

// Personas write actions; the protocol writes them as text. careful looks both up; lazy answers the first city.
function personaAction(persona: string, ctx: TurnContext): Action {
  const p = ctx.task.data as Pair;
  if (persona === "lazy") return { type: "answer", answer: p.a };
  const seen = new Map<string, number>();
  for (const r of ctx.history.flatMap((h) => h.toolResults ?? [])) {
    const v = r.value as { city: string; temp_c: number } | undefined;
    if (v !== undefined) seen.set(v.city, v.temp_c);
  }
  const next = [p.a, p.b].find((c) => !seen.has(c)); // a failed call is simply made again
  return next !== undefined ? { type: "tool_call", calls: [{ name: "get_weather", arguments: { city: next } }] } : { type: "answer", answer: warmer(seen, p) };
}

export const weatherRecipe = defineToolRecipe({
  name: "weather",
  description: "which of two cities is warmer today (one tool: get_weather)",
  toolNames: ["get_weather"],
  // tool-env without its needless_calls price: the lazy guess is right half the time, and then it is the group's
  // leanest success, so the careful answer's two lookups were charged in exactly the groups where the guess wins —
  // after GRPO's division by each group's std that cancelled the groups where the guess loses (RL drifted lazy).
  defaults: { "policy.init": "base", "policy.contextLength": "384", "env.maxTurns": "4", "rl.maxTokensPerTurn": "32", "reward.preset": "tool-env", "reward.weights.needless_calls": "0", "sft.steps": "300", "rl.steps": "30" },
  baseDefaults: { "policy.contextLength": "384" },
  smoke: { "policy.init": "scratch", "policy.dModel": "32", "policy.nLayers": "1", "sft.steps": "10", "rl.steps": "2", "rl.tasksPerStep": "2", "rl.groupSize": "2", "eval.maxTasks": "4" },
  world: (seed) => temps(seed * 31),
  counterfactual: (_real, { runSeed, k }) => temps(runSeed * 31 + k),
  tasks: () => ({ train: split.slice(0, 110), test: split.slice(110) }),
  instructions: "Answer with the warmer city. Look both temperatures up first.",
  tools: ({ world }) => [weatherTool(world)],
  // The whole answer must be the city: `includes` paid an answer listing every city, and RL learned to (issue 29).
  grade: ({ task, answer }, { world }) => { const right = answer?.trim() === warmer(world, task.data!) ? 1 : 0; return { score: right, parts: { right } }; },
  personas: { careful: 0.5, lazy: 0.5 },
  scriptedTurn: (persona, turn, protocol) => protocol.format(personaAction(persona, turn)),
  breakdown: (traj) => ({ looked_up_both: (traj.toolCalls?.get_weather ?? 0) >= 2 ? 1 : 0 }),
  breakdownLabels: { looked_up_both: "looked both up" },
  describe: () => `${CITIES.length} cities, ${tasks.length} questions`,
});
export default weatherRecipe;
