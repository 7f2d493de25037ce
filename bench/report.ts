/**
 * The readable forms of `bench/results.json`: the console table `npm run bench`
 * prints, the full Markdown tables of bench/README.md and the headline table of the
 * top-level README (both written by `npm run bench:render`).
 */
import type { CaseResult, Figure, Ratio, Summary } from "./harness.ts"

/** The whole results document. */
export interface Results {
  readonly schema: 1
  readonly startedAt: string
  readonly finishedAt: string
  readonly quick: boolean
  readonly machine: {
    readonly node: string
    readonly platform: string
    readonly cpus: number
    readonly cpuModel: string
    readonly loadAverageAtStart: ReadonlyArray<number>
    readonly loadAverageAtEnd: ReadonlyArray<number>
  }
  readonly cases: ReadonlyArray<CaseResult>
  readonly failed: ReadonlyArray<{ readonly id: string; readonly error: string }>
  /** Modules listed but not in this checkout. */
  readonly notRun?: ReadonlyArray<{ readonly id: string; readonly error: string }> | undefined
}

/** A number with three significant digits (thousands separated). */
export const fmt = (x: number): string => {
  if (!Number.isFinite(x)) return String(x)
  const magnitude = Math.abs(x)
  if (magnitude >= 1000) return Math.round(x).toLocaleString("en-US")
  if (magnitude >= 100) return x.toFixed(0)
  if (magnitude >= 10) return x.toFixed(1)
  if (magnitude >= 1) return x.toFixed(2)
  return x.toPrecision(2)
}

/** `median (p25-p75)`. */
export const spread = (s: Summary): string => s.n <= 1 ? fmt(s.median) : `${fmt(s.median)} (${fmt(s.p25)}–${fmt(s.p75)})`

const targetText = (target: Pick<Ratio, "targetAtMost" | "targetAtLeast" | "met">, unit = ""): string =>
  target.targetAtMost !== undefined
    ? `≤ ${fmt(target.targetAtMost)}${unit === "" ? "" : ` ${unit}`} ${target.met ? "met" : "MISSED"}`
    : target.targetAtLeast !== undefined
    ? `≥ ${fmt(target.targetAtLeast)}${unit === "" ? "" : ` ${unit}`} ${target.met ? "met" : "MISSED"}`
    : ""

const hasTarget = (target: Pick<Ratio, "targetAtMost" | "targetAtLeast">): boolean =>
  target.targetAtMost !== undefined || target.targetAtLeast !== undefined

const pad = (text: string, width: number) => text + " ".repeat(Math.max(0, width - [...text].length))

const table = (rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((row) => [...row[c]!].length)))
  return rows.map((row) => row.map((cell, c) => pad(cell, widths[c]!)).join("  ").trimEnd()).join("\n")
}

const figureRow = (f: Figure): Array<string> => [
  f.label,
  `${spread(f.summary)} ${f.unit}`,
  `n=${f.summary.n}`,
  [
    f.detail?.["roundTripsPerStep"] !== undefined ? `${f.detail["roundTripsPerStep"]} round trips/step` :
    f.detail?.["roundTrips"] !== undefined ? `${f.detail["roundTrips"]} round trips` : "",
    targetText(f, f.unit)
  ].filter((text) => text !== "").join("; ")
]

/** The console report: per case, its figures, its ratios with targets, what was skipped and why. */
export const consoleReport = (results: Results): string => {
  const out: Array<string> = []
  out.push(
    `noetic-effect benchmark${results.quick ? " (QUICK: smoke run, not for figures)" : ""}, ${results.startedAt}`,
    `Node ${results.machine.node}, ${results.machine.cpus} x ${results.machine.cpuModel}, load average ${
      results.machine.loadAverageAtStart.map((x) => x.toFixed(1)).join(" ")
    } at start, ${results.machine.loadAverageAtEnd.map((x) => x.toFixed(1)).join(" ")} at end`,
    "Figures: median (25th–75th percentile) over interleaved rounds; ratios: median (quartiles) of per-round ratios.",
    ""
  )
  for (const c of results.cases) {
    out.push(`## ${c.title}${c.durationMs === undefined ? "" : `  [${(c.durationMs / 1000).toFixed(1)} s]`}`)
    if (c.figures.length > 0) out.push(table([["figure", "median (p25–p75)", "n", ""], ...c.figures.map(figureRow)]))
    if (c.ratios.length > 0) {
      out.push("")
      out.push(table([["ratio (same run)", "median (p25–p75)", "target"], ...c.ratios.map((r) => [r.label, spread(r.summary), targetText(r)])]))
    }
    for (const s of c.skipped) out.push(`  not measured: ${s.label}: ${s.reason}`)
    for (const note of c.notes) out.push(`  note: ${note}`)
    out.push("")
  }
  for (const f of results.notRun ?? []) out.push(`not run: ${f.id}: ${f.error}`)
  for (const f of results.failed) out.push(`FAILED case ${f.id}: ${f.error}`)
  return out.join("\n")
}

/** The tables of bench/README.md: one per case, ratios with targets first. */
export const markdownReport = (results: Results): string => {
  const out: Array<string> = []
  out.push(
    `Run of ${results.startedAt.slice(0, 16).replace("T", " ")} UTC, Node ${results.machine.node}, ${results.machine.cpus} × ${results.machine.cpuModel}, load average ${
      results.machine.loadAverageAtStart.map((x) => x.toFixed(1)).join(" / ")
    } at start and ${
      results.machine.loadAverageAtEnd.map((x) => x.toFixed(1)).join(" / ")
    } at end (1 / 5 / 15 min; the cases with 50 children raise the load themselves; absolute figures vary with the machine, ratios are interleaved in the same run). ` +
      "Figures are medians over rounds with the 25th–75th percentile in brackets.",
    ""
  )
  const cell = (text: string) => text.replaceAll("|", "\\|")
  // Every comparison with a target, across cases, first: where each target stands.
  const targeted = results.cases.flatMap((c) => c.ratios.filter(hasTarget))
  const absolute = results.cases.flatMap((c) => c.figures.filter(hasTarget))
  if (targeted.length + absolute.length > 0) {
    const met = targeted.filter((r) => r.met).length + absolute.filter((f) => f.met).length
    out.push(`**Targets: ${met} of ${targeted.length + absolute.length} met**`, "")
    out.push("| comparison, same run | median (quartiles) | target |", "| --- | --- | --- |")
    for (const r of targeted) out.push(`| ${cell(r.label)} | ${spread(r.summary)} | ${targetText(r)} |`)
    for (const f of absolute) out.push(`| ${cell(f.label)} | ${spread(f.summary)} ${f.unit} | ${targetText(f, f.unit)} |`)
    out.push("")
  }
  for (const c of results.cases) {
    out.push(`**${cell(c.title)}**`, "")
    // Comparisons with a target are in the table above; the rest are here.
    const others = c.ratios.filter((r) => !hasTarget(r))
    if (others.length > 0) {
      out.push("| other ratios, same run | median (quartiles) |", "| --- | --- |")
      for (const r of others) out.push(`| ${cell(r.label)} | ${spread(r.summary)} |`)
      out.push("")
    }
    if (c.figures.length > 0) {
      // The ratios carry the comparisons; the figures behind them fold away.
      const folded = c.ratios.length > 0 || c.figures.length > 12
      if (folded) out.push(`<details><summary>${c.figures.length} figures</summary>`, "")
      out.push("| figure | median (quartiles) | round trips |", "| --- | --- | --- |")
      for (const f of c.figures) {
        const trips = f.detail?.["roundTripsPerStep"] ?? f.detail?.["roundTrips"]
        out.push(`| ${cell(f.label)} | ${spread(f.summary)} ${f.unit} | ${trips === undefined ? "" : String(trips)} |`)
      }
      out.push("")
      if (folded) out.push("</details>", "")
    }
    for (const s of c.skipped) out.push(`- not measured: ${cell(s.label)}: ${cell(s.reason)}`)
    for (const note of c.notes) out.push(`- ${cell(note)}`)
    if (c.skipped.length + c.notes.length > 0) out.push("")
  }
  for (const f of results.notRun ?? []) out.push(`- not run: ${f.id}: ${cell(f.error)}`)
  for (const f of results.failed) out.push(`- case ${f.id} failed: ${cell(f.error)}`)
  return out.join("\n")
}

/** The comparisons the top-level README shows, by label, in this order: targets met and missed alike. */
export const HEADLINE_LABELS: ReadonlyArray<string> = [
  "SQLite durable step (1000th) / raw write + fdatasync",
  "sqlite / LangGraph SqliteSaver, N = 1000",
  "file / LangGraph SqliteSaver, N = 1000",
  "postgres / LangGraph PostgresSaver, N = 1000",
  "memory / effect/workflow memory, N = 1000",
  "SQLite ledger restore / raw SELECT of the same rows, 10000 entries",
  "restore, sqlite / LangGraph SqliteSaver load, N = 1000",
  "IPC pipelined stream, SQLite storage / raw socket (frames/s)",
  "IPC awaited append, SQLite storage / raw write + fdatasync (appends/s)",
  "IPC awaited append, file storage / raw write + fdatasync (appends/s)",
  "child start / bare node importing effect/Effect",
  "reattachLiveChildren after a restart, 50 live children (handles and parent contexts)"
]

/** The headline table of the top-level README: a few comparisons with targets, and the count met. */
export const markdownHeadline = (results: Results): string => {
  const cell = (text: string) => text.replaceAll("|", "\\|")
  const targeted = results.cases.flatMap((c) => c.ratios.filter(hasTarget))
  const absolute = results.cases.flatMap((c) => c.figures.filter(hasTarget))
  const met = targeted.filter((r) => r.met).length + absolute.filter((f) => f.met).length
  const out: Array<string> = [
    `Run of ${results.startedAt.slice(0, 16).replace("T", " ")} UTC, Node ${results.machine.node}, ${results.machine.cpus} × ${results.machine.cpuModel}; ` +
    `medians of interleaved rounds with quartiles; ${met} of ${targeted.length + absolute.length} targets met ` +
    "([all figures](bench/README.md)).",
    "",
    "| comparison, same run | median (quartiles) | target |",
    "| --- | --- | --- |"
  ]
  for (const label of HEADLINE_LABELS) {
    const ratio = targeted.find((r) => r.label === label)
    const figure = absolute.find((f) => f.label === label)
    if (ratio !== undefined) out.push(`| ${cell(label)} | ${spread(ratio.summary)} | ${targetText(ratio)} |`)
    else if (figure !== undefined) out.push(`| ${cell(label)} | ${spread(figure.summary)} ${figure.unit} | ${targetText(figure, figure.unit)} |`)
  }
  return out.join("\n")
}
