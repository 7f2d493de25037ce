/**
 * Vitest global setup: without `NOETIC_PG_URL` every Postgres test is skipped, and a
 * run would otherwise not say so. Prints one line naming what was skipped and how to
 * run it; prints nothing when the URL is set.
 */

/** The line printed when the Postgres tests are skipped; undefined when they run. */
export const postgresNotice = (env: Readonly<Record<string, string | undefined>>): string | undefined =>
  env.NOETIC_PG_URL !== undefined && env.NOETIC_PG_URL !== ""
    ? undefined
    : "Postgres tests SKIPPED: NOETIC_PG_URL is not set. To run them: " +
      "NOETIC_PG_URL=postgres://postgres@127.0.0.1:5432/test npm test"

export default function setup(): void {
  const notice = postgresNotice(process.env)
  if (notice !== undefined) process.stderr.write(`\n${notice}\n\n`)
}
