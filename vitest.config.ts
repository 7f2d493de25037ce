import { configDefaults, defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Real-browser tests run on their own: npm run test:browser (vitest.browser.config.ts).
    exclude: [...configDefaults.exclude, "test/browser/**"],
    // Says so when the Postgres tests are skipped (no NOETIC_PG_URL).
    globalSetup: ["test/setup/postgresNotice.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000
  }
})
