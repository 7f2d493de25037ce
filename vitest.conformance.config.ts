// The official conformance suite of Durable Streams, on each storage (npm run test:conformance).
// It ships its own vitest (4), so this config imports nothing from vitest: it is read by that one.
export default {
  test: {
    include: ["test/conformance/*.conformance.ts"],
    globals: true,
    testTimeout: 60_000,
    hookTimeout: 60_000
  }
}
