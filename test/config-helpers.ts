/** Helpers of the config tests: the message of the ConfigError a call throws. */
import { expect } from "vitest";
import { ConfigError } from "../src/train/config.ts";

/** The ConfigError message of `fn` (fails the test when it returns or throws anything else). */
export function configError(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    expect(e, (e as Error).stack).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error("expected a ConfigError");
}
