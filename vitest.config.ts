import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Says so when the Postgres tests are skipped (no NOETIC_PG_URL).
    globalSetup: ["test/setup/postgresNotice.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000
  }
})
