/**
 * Random ids drawn from the `Random` service (so tests can seed them): the harness's
 * execution ids and the adapters' handle ids.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Random from "effect/Random"

const randomHex: Effect.Effect<string> = Effect.map(
  Effect.all([Random.nextInt, Random.nextInt, Random.nextInt, Random.nextInt]),
  (parts) => parts.map((part) => (part >>> 0).toString(16).padStart(8, "0")).join("")
)

/** A random 128-bit id in hex. */
export const randomId: Effect.Effect<string> = randomHex

/** A random UUID (version 4 layout): noetic's id format. */
export const randomUuid: Effect.Effect<string> = Effect.map(randomHex, (hex) => {
  const variant = ((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16)
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`
})
