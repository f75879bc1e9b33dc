/**
 * The complaint tools, bound to one world: `complaints` (the complaints database), `sales` (the sales database, with
 * the complaint rate per 1000 units sold) and `reports` (third-party reports on competitors' products). Arguments
 * arrive as the embedded word tokenizer decodes them (lower-cased, tokens joined by single spaces: `" aria "`,
 * `"2 0 2 5"`), so every tool normalises inside `execute`: names are lower-cased with whitespace collapsed, years lose
 * all whitespace. A bad argument, or a database asked about a product it does not hold, throws: the env shows it as
 * an error observation (`error: tool <name>: …`) and the episode goes on.
 *
 * Results are compact objects with short keys, exactly what the policy sees (as JSON):
 * - `complaints` → `{"count":84}`;
 * - `sales` → `{"units":12000,"rate":7}` (rate: complaints of the caliber per 1000 units sold, one decimal);
 * - `reports` → `[{"source":"forum digest","reliability":"low","complaints":240,"rate":4.2},…]`.
 */
import { z } from "zod";
import { tool, type Tool } from "../../env/tool.ts";
import { CALIBERS, COMPETITOR_PRODUCTS, isCompetitor, isOwn, OWN_PRODUCTS, YEARS, type Caliber, type ComplaintWorld, type ReportEntry } from "./world.ts";

/** What `complaints` returns. */
export interface CountView {
  count: number;
}

/** What `sales` returns. */
export interface SalesView {
  units: number;
  rate: number;
}

/** A name as a tool reads it: lower-case, `-`/`_` as spaces, whitespace collapsed and trimmed. */
export function normName(s: string): string {
  return s.toLowerCase().replace(/[-_]/g, " ").replace(/\s+/g, " ").trim();
}

/** A code or number as a tool reads it: lower-case, every whitespace removed (`"2 0 2 5"` → `2025`). */
export function normCode(s: string): string {
  return s.toLowerCase().replace(/\s+/g, "");
}

/** Reads a product argument. @throws Error `unknown product "x"` */
export function resolveProduct(raw: string): string {
  const p = normName(raw);
  if (!isOwn(p) && !isCompetitor(p)) throw new Error(`unknown product "${p}"`);
  return p;
}

/** Reads a year argument. @throws Error `year must be yyyy, got "x"` or `no figures for 2023 (years 2024, 2025, 2026)` */
export function resolveYear(raw: string): number {
  const y = normCode(raw);
  if (!/^\d{4}$/.test(y)) throw new Error(`year must be yyyy, got "${y}"`);
  const n = Number(y);
  if (!(YEARS as readonly number[]).includes(n)) throw new Error(`no figures for ${n} (years ${YEARS.join(", ")})`);
  return n;
}

/** Reads a caliber argument. @throws Error `caliber must be contacts or defects, got "x"` */
export function resolveCaliber(raw: string): Caliber {
  const c = normName(raw);
  if (!(CALIBERS as readonly string[]).includes(c)) throw new Error(`caliber must be ${CALIBERS.join(" or ")}, got "${c}"`);
  return c as Caliber;
}

/** The error a database throws for a competitor's product. */
export const notOurs = (p: string) => `${p} is not our product : its figures are in reports`;
/** The error `reports` throws for an own product. */
export const ours = (p: string) => `${p} is our product : use complaints and sales`;

/** Arguments of `complaints` and `sales` and `reports` (all strings; checked in `execute`). */
export const FIGURE_INPUT = z.object({ product: z.string(), year: z.string(), caliber: z.string() });

/** Tool names, in prompt order. */
export const COMPLAINT_TOOL_NAMES = ["complaints", "sales", "reports"] as const;

/**
 * The three tools over `world`:
 * - `complaints({product, year, caliber})` → `CountView`; @throws `unknown product`, `year must be yyyy`,
 *   `no figures for y`, `caliber must be contacts or defects`, `x is not our product : its figures are in reports`;
 * - `sales({product, year, caliber})` → `SalesView` (units sold and the caliber's complaints per 1000 units);
 *   @throws as `complaints`;
 * - `reports({product, year, caliber})` → `ReportEntry[]` (2–3 sources, in the world's order); @throws as
 *   `complaints`, and `x is our product : use complaints and sales` for an own product.
 */
export function complaintTools(world: ComplaintWorld): Tool[] {
  const read = (args: { product: string; year: string; caliber: string }) => ({
    product: resolveProduct(args.product),
    year: resolveYear(args.year),
    caliber: resolveCaliber(args.caliber),
  });
  const complaints = tool({
    name: "complaints",
    description: "Complaints database: the count of a product's complaints in a year, by caliber (contacts or defects).",
    inputSchema: FIGURE_INPUT,
    execute: (args): CountView => {
      const { product, year, caliber } = read(args);
      if (!isOwn(product)) throw new Error(notOurs(product));
      return { count: world.own[product][year].count[caliber] };
    },
  });
  const sales = tool({
    name: "sales",
    description: "Sales database: units sold in a year, and the caliber's complaints per 1000 units sold.",
    inputSchema: FIGURE_INPUT,
    execute: (args): SalesView => {
      const { product, year, caliber } = read(args);
      if (!isOwn(product)) throw new Error(notOurs(product));
      const y = world.own[product][year];
      return { units: y.units, rate: y.rate[caliber] };
    },
  });
  const reports = tool({
    name: "reports",
    description: "Third-party reports on a competitor's product: each source's complaint count and rate per 1000 units sold.",
    inputSchema: FIGURE_INPUT,
    execute: (args): ReportEntry[] => {
      const { product, year, caliber } = read(args);
      if (!isCompetitor(product)) throw new Error(ours(product));
      return world.competitor[product][year][caliber].entries.map((e) => ({ ...e }));
    },
  });
  return [complaints, sales, reports] as Tool[];
}

/** The text a successful call shows: its value as compact JSON. */
export function formatComplaintResult(_name: string, value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** Every error text the tools can throw for the world's names (for the vocabulary). */
export function toolErrorTexts(): string[] {
  return [
    ...OWN_PRODUCTS.map(ours),
    ...COMPETITOR_PRODUCTS.map(notOurs),
    'unknown product "x"',
    'year must be yyyy, got "x"',
    `no figures for 2023 (years ${YEARS.join(", ")})`,
    `caliber must be ${CALIBERS.join(" or ")}, got "x"`,
  ];
}
