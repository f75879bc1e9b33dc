/**
 * The viewer's chart templates (`CurveTemplates`, src/view/client/charts.ts): Vega-Lite's compile of the curve chart
 * with a stand-in metric, one source and width 400, for labelled (SVG) and plain (canvas) charts. Run in Node when
 * the page script is bundled (`bundle.ts` puts them in through esbuild's `define`), so the page needs no Vega-Lite.
 */
import { compile } from "vega-lite";
import { METRIC_SLOT, curveSpec, type CurveTemplates } from "./client/charts.ts";

/** Compiles the two templates (JSON text of the Vega specs). */
export function curveTemplates(): CurveTemplates {
  const of = (labelled: boolean): string => JSON.stringify(compile(curveSpec(METRIC_SLOT, ["\u0000source\u0000"], 400, labelled)).spec);
  return { labelled: of(true), plain: of(false) };
}
