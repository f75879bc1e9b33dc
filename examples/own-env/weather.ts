// A minimal env of your own: "which city is warmer today?" with one tool, get_weather(city). The agent must call
// it for both cities before answering; a lazy persona guesses, so SFT learns a mix and RL learns to look it up.
import { z } from "zod";
import { defineToolRecipe, Rng, tool, type Action, type Task, type TurnContext } from "agentic-rl";

const CITIES = ["oslo", "cairo", "lima", "perth", "tokyo", "quito", "dakar", "hanoi", "rome", "austin", "doha", "minsk"];
type Pair = { a: string; b: string };

// The world: each city's temperature today (°C), re-drawn per counterfactual world k so answers cannot be memorised.
const temps = (seed: number) => { const r = new Rng(seed); return new Map(CITIES.map((c) => [c, r.int(40)])); };
const warmer = (t: ReadonlyMap<string, number>, p: Pair) => (t.get(p.a)! >= t.get(p.b)! ? p.a : p.b);
const tasks: Task<Pair>[] = CITIES.flatMap((a) => CITIES.filter((b) => b !== a).map((b) =>
  ({ id: `weather:${a}:${b}`, question: `which is warmer today , ${a} or ${b} ?`, answers: [], kind: "compare", data: { a, b } })));
const split = new Rng(7).shuffle(tasks);

const weatherTool = (t: ReadonlyMap<string, number>) => tool({
  name: "get_weather",
  description: "today's temperature of a city in celsius",
  inputSchema: z.object({ city: z.string() }),
  execute: ({ city }) => {
    const c = city.trim().toLowerCase(); // the embedded tokenizer decodes words with spaces around them
    if (!t.has(c)) throw new Error(`unknown city ${c}`);
    return { city: c, temp_c: t.get(c)! };
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
  defaults: { "policy.contextLength": "384", "env.maxTurns": "4", "rl.maxTokensPerTurn": "32", "reward.preset": "tool-env", "sft.steps": "300", "rl.steps": "30" },
  smoke: { "policy.dModel": "32", "policy.nLayers": "1", "sft.steps": "10", "rl.steps": "2", "rl.tasksPerStep": "2", "rl.groupSize": "2", "eval.maxTasks": "4" },
  world: (seed) => temps(seed * 31),
  counterfactual: (_real, { runSeed, k }) => temps(runSeed * 31 + k),
  tasks: () => ({ train: split.slice(0, 110), test: split.slice(110) }),
  instructions: "answer with the warmer city . look both temperatures up first .",
  tools: ({ world }) => [weatherTool(world)],
  // The whole answer must be the city: `includes` paid an answer listing every city, and RL learned to (issue 29).
  grade: ({ task, answer }, { world }) => { const right = answer?.trim().toLowerCase() === warmer(world, task.data!) ? 1 : 0; return { score: right, parts: { right } }; },
  personas: { careful: 0.5, lazy: 0.5 },
  scriptedTurn: (persona, turn, protocol) => protocol.format(personaAction(persona, turn)),
  breakdown: (traj) => ({ looked_up_both: (traj.toolCalls?.get_weather ?? 0) >= 2 ? 1 : 0 }),
  breakdownLabels: { looked_up_both: "looked both up" },
  // Every text the policy can see or write, for the embedded word tokenizer's vocabulary; the fixed system prompt
  // (instructions + the tool's JSON Schema) becomes one token of it.
  texts: ({ protocol, system }) => [
    protocol.prompt(system, ""), protocol.invalidObservation("error unknown city"),
    ...split.map((t) => t.question),
    ...CITIES.flatMap((city) => [protocol.format({ type: "tool_call", calls: [{ name: "get_weather", arguments: { city } }] }), protocol.format({ type: "answer", answer: city })]),
    ...Array.from({ length: 40 }, (_, n) => protocol.observation([{ name: "get_weather", ok: true, content: JSON.stringify({ city: "oslo", temp_c: n }) }]).text),
  ],
  describe: () => `${CITIES.length} cities, ${tasks.length} questions`,
});
export default weatherRecipe;
