import { defineConfig } from "vitest/config"

/** Tests in a real browser (`npm run test:browser`): Debian's chromium-headless-shell driven by playwright-core. */
export default defineConfig({
  test: {
    include: ["test/browser/**/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 60_000
  }
})
