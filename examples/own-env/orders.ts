// An env that needs reading: "order 5 of the Amber Kettle". find_product(name) returns the product's id; get_stock
// (product_id) returns each warehouse's stock; place_order(product_id, warehouse, quantity) refuses a warehouse with
// too little. Success needs an id copied from one call into the next and a choice made by a number in a result. The
// careful persona checks the stock and orders from the first warehouse with enough; the hasty one orders from the
// first warehouse it knows of without looking, so SFT learns a mix and RL learns to read the stock.
import { z } from "zod";
import { defineToolRecipe, Rng, tool, type Action, type Task, type TurnContext } from "agentic-rl";

const COLOURS = ["Amber", "Blue", "Coral", "Denim", "Ebony", "Fern", "Gold", "Hazel", "Ivory", "Jade", "Khaki", "Lilac", "Mint", "Navy", "Olive", "Plum"];
const THINGS = ["Kettle", "Lamp", "Chair", "Mug", "Desk", "Clock", "Rug", "Vase", "Fan", "Shelf", "Bowl", "Stool"];
const WAREHOUSES = ["north", "south", "east", "west"];
type Order = { product: string; quantity: number };
type Stock = { warehouse: string; stock: number }[];
type World = { ids: Map<string, string>; stock: Map<string, Stock> };

// The world: each product's id and each warehouse's stock, re-drawn per counterfactual world k, so neither an id nor
// a warehouse can be memorised: the policy must read them.
const PRODUCTS = COLOURS.flatMap((c) => THINGS.map((t) => `${c} ${t}`));
function world(seed: number): World {
  const r = new Rng(seed);
  const ids = new Map<string, string>(), stock = new Map<string, Stock>();
  for (const p of PRODUCTS) {
    ids.set(p, `${"abcdefghjkmnpqrstuvwxyz"[r.int(23)]}-${1000 + r.int(9000)}`);
    // Most shelves hold 0–1 units; one warehouse always has 6–12, so every request (2–6 units) can be met somewhere.
    const s = WAREHOUSES.map((warehouse) => ({ warehouse, stock: r.next() < 0.6 ? r.int(2) : 2 + r.int(11) }));
    if (!s.some((x) => x.stock >= 6)) s[r.int(s.length)].stock = 6 + r.int(7);
    stock.set(p, s);
  }
  return { ids, stock };
}
const tasks: Task<Order>[] = new Rng(3).shuffle(PRODUCTS).map((product, i) =>
  ({ id: `orders:${i}`, question: `Order ${2 + (i % 5)} of the ${product}.`, answers: [], kind: "order", data: { product, quantity: 2 + (i % 5) } }));

type State = { placed: { id: string; warehouse: string; quantity: number }[] };
const tools = (w: World, state: State) => [
  tool({
    name: "find_product", description: "Find a product by its exact name. Returns [{id, name}] or [].",
    inputSchema: z.object({ name: z.string() }),
    execute: ({ name }) => (w.ids.has(name) ? [{ id: w.ids.get(name)!, name }] : []),
  }),
  tool({
    name: "get_stock", description: "Units in stock of a product at each warehouse.",
    inputSchema: z.object({ product_id: z.string() }),
    execute: ({ product_id }) => {
      const p = PRODUCTS.find((x) => w.ids.get(x) === product_id);
      if (p === undefined) throw new Error(`no product ${product_id}`);
      return w.stock.get(p)!;
    },
  }),
  tool({
    name: "place_order", description: "Order units of a product from one warehouse. Returns an order id.",
    inputSchema: z.object({ product_id: z.string(), warehouse: z.enum(WAREHOUSES as [string, ...string[]]), quantity: z.number().int().positive() }),
    execute: ({ product_id, warehouse, quantity }) => {
      const p = PRODUCTS.find((x) => w.ids.get(x) === product_id);
      if (p === undefined) throw new Error(`no product ${product_id}`);
      const have = w.stock.get(p)!.find((s) => s.warehouse === warehouse)!.stock;
      if (have < quantity) throw new Error(`only ${have} in stock at ${warehouse}`);
      state.placed.push({ id: product_id, warehouse, quantity });
      return { order_id: `o-${state.placed.length}${product_id.slice(2)}` };
    },
  }),
];

// Personas write actions; the protocol writes them as text. Both find the product first and answer once ordered.
function personaAction(persona: string, ctx: TurnContext): Action {
  const { product, quantity } = ctx.task.data as Order;
  const values = ctx.history.flatMap((h) => (h.toolResults ?? []).map((r) => r.value));
  const found = values.find((v): v is { id: string }[] => Array.isArray(v) && v.length > 0 && "id" in v[0])?.[0]?.id;
  const stock = values.find((v): v is Stock => Array.isArray(v) && v.length > 0 && "stock" in v[0]);
  const placed = values.find((v): v is { order_id: string } => typeof v === "object" && v !== null && "order_id" in v);
  const call = (name: string, args: Record<string, unknown>): Action => ({ type: "tool_call", calls: [{ name, arguments: args }] });
  if (placed) return { type: "answer", answer: `Ordered ${quantity} of the ${product}: ${placed.order_id}.` };
  if (found === undefined) return call("find_product", { name: product });
  if (persona === "hasty") return ctx.history.length >= 2 ? { type: "answer", answer: "Sorry, I could not order it." } : call("place_order", { product_id: found, warehouse: WAREHOUSES[0], quantity });
  if (stock === undefined) return call("get_stock", { product_id: found });
  return call("place_order", { product_id: found, warehouse: stock.find((s) => s.stock >= quantity)!.warehouse, quantity });
}

export const ordersRecipe = defineToolRecipe<World, Order, State>({
  name: "orders",
  description: "order a product from a warehouse with enough stock (tools: find_product, get_stock, place_order)",
  toolNames: ["find_product", "get_stock", "place_order"],
  // tool-env without needless_calls: a hasty order succeeds whenever the first warehouse has enough, and then its
  // 2 calls are the group's leanest success — RL learned to skip the stock check (66.7 → 31.3 %; weather.ts, docs/rewards.md).
  defaults: { "policy.init": "base", "env.maxTurns": "5", "rl.maxTokensPerTurn": "80", "reward.preset": "tool-env", "reward.weights.needless_calls": "0", "sft.steps": "200" },
  // GRPO at the base-start 1e-4 left the warm start unchanged in 30 steps (entropy 0.01 nats/token, KL to it 0.001).
  baseDefaults: { "policy.contextLength": "512", "rl.learningRate": "3e-4", "rl.steps": "40" },
  smoke: { "policy.init": "scratch", "policy.dModel": "32", "policy.nLayers": "1", "sft.steps": "10", "rl.steps": "2", "rl.tasksPerStep": "2", "rl.groupSize": "2", "eval.maxTasks": "4" },
  world: (seed) => world(seed * 31),
  counterfactual: (_real, { runSeed, k }) => world(runSeed * 31 + k),
  tasks: () => ({ train: tasks.slice(0, 144), test: tasks.slice(144) }),
  instructions: "You take orders. Find the product, check its stock, and order from the first warehouse with enough.",
  reset: () => ({ placed: [] }),
  tools: ({ world: w, state }) => tools(w, state),
  grade: ({ task, state }, { world: w }) => {
    const right = state.placed.some((o) => o.id === w.ids.get(task.data!.product) && o.quantity === task.data!.quantity) ? 1 : 0;
    return { score: right, parts: { right } };
  },
  personas: { careful: 0.5, hasty: 0.5 },
  scriptedTurn: (persona, turn, protocol) => protocol.format(personaAction(persona, turn)),
  breakdown: (traj) => ({ checked_stock: (traj.toolCalls?.get_stock ?? 0) >= 1 ? 1 : 0 }),
  breakdownLabels: { checked_stock: "checked stock" },
  describe: () => `${PRODUCTS.length} products, ${WAREHOUSES.length} warehouses`,
});
export default ordersRecipe;
