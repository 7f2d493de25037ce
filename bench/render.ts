/**
 * Renders `bench/results.json` (or the file given) into the committed report, with no
 * dependencies and without running a benchmark: the SVG charts under bench/, the full
 * tables of bench/README.md between its `<!-- bench:begin -->` and `<!-- bench:end -->`
 * markers, and the headline table of the top-level README between its
 * `<!-- bench:headline:begin -->` and `<!-- bench:headline:end -->` markers. The charts
 * and the tables come from the same results document, so from the same run.
 *
 *   npm run bench:render [-- results.json]
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import type { CaseResult, Series, Summary } from "./harness.ts"
import { fmt, markdownHeadline, markdownReport, type Results } from "./report.ts"

const here = Path.dirname(fileURLToPath(import.meta.url))

/** One chart: log-log lines with the interquartile range as error bars. */
interface ChartSpec {
  readonly file: string
  readonly title: string
  readonly xLabel: string
  readonly yLabel: string
  readonly series: ReadonlyArray<Series>
  readonly figure: (id: string) => Summary | undefined
  readonly subtitle: string
}

const PALETTE: Readonly<Record<string, string>> = {
  memory: "#1f77b4",
  file: "#d62728",
  sqlite: "#9467bd",
  postgres: "#2ca02c",
  workflow: "#ff7f0e",
  "effect/workflow": "#ff7f0e"
}

const colorOf = (name: string, index: number): string => {
  const lower = name.toLowerCase()
  if (lower.includes("effect/workflow")) return PALETTE["workflow"]!
  if (lower.includes("raw")) return "#7f7f7f"
  if (lower.includes("memory")) return PALETTE["memory"]!
  if (lower.includes("sqlite")) return PALETTE["sqlite"]!
  if (lower.includes("postgres")) return PALETTE["postgres"]!
  if (lower.includes("file")) return PALETTE["file"]!
  return ["#8c564b", "#e377c2", "#17becf", "#bcbd22"][index % 4]!
}

const escape = (text: string) => text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;")

const round1 = (x: number) => Math.round(x * 10) / 10

/** An axis label: whole numbers with separators, decimals as they are. */
const tick = (v: number) => (v >= 1 ? Math.round(v).toLocaleString("en-US") : String(Number(v.toPrecision(2))))

/** Decades covering [min, max] on a log axis. */
const decades = (min: number, max: number): [number, number] => [Math.floor(Math.log10(min)), Math.ceil(Math.log10(max))]

/** Renders one chart as SVG text. */
export const chart = (spec: ChartSpec): string => {
  const width = 1000
  const height = 520
  const margin = { left: 80, right: 400, top: 64, bottom: 64 }
  const plotW = width - margin.left - margin.right
  const plotH = height - margin.top - margin.bottom
  const lines = spec.series.map((s) => ({
    series: s,
    points: s.points.flatMap((p) => {
      const summary = spec.figure(p.figure)
      return summary === undefined || !(summary.median > 0) ? [] : [{ x: p.x, s: summary }]
    })
  })).filter((l) => l.points.length > 0)
  const xs = lines.flatMap((l) => l.points.map((p) => p.x))
  const ys = lines.flatMap((l) => l.points.flatMap((p) => [p.s.median, p.s.p25 > 0 ? p.s.p25 : p.s.median, p.s.p75]))
  // Points at the first and last x stay off the frame.
  const x0 = Math.log10(Math.min(...xs)) - 0.12
  const x1 = Math.log10(Math.max(...xs)) + 0.12
  const [y0, y1] = decades(Math.min(...ys), Math.max(...ys))
  const xOf = (x: number) => round1(margin.left + ((Math.log10(x) - x0) / (x1 - x0)) * plotW)
  const yOf = (y: number) => round1(margin.top + plotH - ((Math.log10(y) - y0) / Math.max(1, y1 - y0)) * plotH)
  const out: Array<string> = []
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="${margin.left}" y="26" font-size="16" font-weight="bold">${escape(spec.title)}</text>`,
    `<text x="${margin.left}" y="46" fill="#555">${escape(spec.subtitle)}</text>`
  )
  // Grid and ticks: every decade labelled, 2 and 5 as minor lines.
  for (let d = y0; d <= y1; d++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** d
      if (v > 10 ** y1) continue
      const y = yOf(v)
      out.push(`<line x1="${margin.left}" x2="${margin.left + plotW}" y1="${y}" y2="${y}" stroke="${m === 1 ? "#ccc" : "#eee"}"/>`)
      if (m === 1 || y1 - y0 <= 2) out.push(`<text x="${margin.left - 8}" y="${y + 4}" text-anchor="end">${tick(v)}</text>`)
    }
  }
  for (const v of [...new Set(xs)].sort((a, b) => a - b)) {
    const x = xOf(v)
    out.push(`<line x1="${x}" x2="${x}" y1="${margin.top}" y2="${margin.top + plotH}" stroke="#ccc"/>`)
    out.push(`<text x="${x}" y="${margin.top + plotH + 18}" text-anchor="middle">${tick(v)}</text>`)
  }
  out.push(
    `<rect x="${margin.left}" y="${margin.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#333"/>`,
    `<text x="${margin.left + plotW / 2}" y="${height - 18}" text-anchor="middle">${escape(spec.xLabel)} (log scale)</text>`,
    `<text transform="translate(20 ${margin.top + plotH / 2}) rotate(-90)" text-anchor="middle">${escape(spec.yLabel)} (log scale)</text>`
  )
  lines.forEach((line, index) => {
    const color = colorOf(line.series.name, index)
    const dash = line.series.kind === "peer" ? ` stroke-dasharray="7 4"` : line.series.kind === "baseline" ? ` stroke-dasharray="2 3"` : ""
    const widthPx = line.series.kind === "this" ? 2.5 : 1.6
    const path = line.points.map((p, i) => `${i === 0 ? "M" : "L"}${xOf(p.x).toFixed(1)},${yOf(p.s.median).toFixed(1)}`).join(" ")
    out.push(`<path d="${path}" fill="none" stroke="${color}" stroke-width="${widthPx}"${dash}/>`)
    for (const p of line.points) {
      const x = xOf(p.x)
      if (p.s.p25 > 0 && p.s.p75 > p.s.p25) {
        out.push(`<line x1="${x}" x2="${x}" y1="${yOf(p.s.p25)}" y2="${yOf(p.s.p75)}" stroke="${color}" stroke-width="1"/>`)
      }
      const marker = line.series.kind === "this"
        ? `<circle cx="${x}" cy="${yOf(p.s.median)}" r="4" fill="${color}"/>`
        : line.series.kind === "peer"
        ? `<rect x="${x - 3.5}" y="${yOf(p.s.median) - 3.5}" width="7" height="7" fill="#fff" stroke="${color}" stroke-width="1.5"/>`
        : `<circle cx="${x}" cy="${yOf(p.s.median)}" r="2.5" fill="${color}"/>`
      out.push(marker)
    }
    // Legend: the series name and its value at the largest x.
    const lastPoint = line.points[line.points.length - 1]!
    const ly = margin.top + 8 + index * 20
    const lx = margin.left + plotW + 16
    out.push(
      `<line x1="${lx}" x2="${lx + 26}" y1="${ly}" y2="${ly}" stroke="${color}" stroke-width="${widthPx}"${dash}/>`,
      `<text x="${lx + 32}" y="${ly + 4}">${escape(line.series.name)}: ${fmt(lastPoint.s.median)} at ${fmt(lastPoint.x)}</text>`
    )
  })
  const legendEnd = margin.top + 8 + lines.length * 20
  out.push(
    `<text x="${margin.left + plotW + 16}" y="${legendEnd + 14}" fill="#555">solid: this library; dashed: peers;</text>`,
    `<text x="${margin.left + plotW + 16}" y="${legendEnd + 30}" fill="#555">dotted: raw baselines. Bars: 25th–75th pct.</text>`,
    "</svg>"
  )
  return out.join("\n") + "\n"
}

const figureLookup = (c: CaseResult) => (id: string) => c.figures.find((f) => f.id === id)?.summary

/** Replaces what lies between `begin` and `end` in `file`; false when a marker is missing. */
const writeBetween = (file: string, begin: string, end: string, body: string): boolean => {
  const text = Fs.readFileSync(file, "utf8")
  const from = text.indexOf(begin)
  const to = text.indexOf(end)
  if (from < 0 || to <= from) {
    process.stderr.write(`${file} has no ${begin} ... ${end} section; it was not written\n`)
    return false
  }
  Fs.writeFileSync(file, text.slice(0, from + begin.length) + "\n" + body + "\n" + text.slice(to))
  return true
}

const main = () => {
  const source = process.argv[2] ?? Path.join(here, "results.json")
  const results = JSON.parse(Fs.readFileSync(source, "utf8")) as Results
  const stamp = `${results.startedAt.slice(0, 16).replace("T", " ")} UTC, ${results.machine.cpus} × ${results.machine.cpuModel}, load ${
    results.machine.loadAverageAtStart[0]?.toFixed(1)
  }; median of interleaved rounds`
  const steps = results.cases.find((c) => c.id === "steps")
  const restore = results.cases.find((c) => c.id === "restore")
  const written: Array<string> = []
  if (steps?.series !== undefined) {
    const file = Path.join(here, "per-step.svg")
    Fs.writeFileSync(file, chart({
      file,
      title: "Per-step cost of a durable run against run length",
      subtitle: stamp,
      xLabel: "steps in the run (N)",
      yLabel: "µs per step",
      series: steps.series,
      figure: figureLookup(steps)
    }))
    written.push(file)
  }
  if (restore?.series !== undefined) {
    const file = Path.join(here, "restore.svg")
    Fs.writeFileSync(file, chart({
      file,
      title: "Restore cost against ledger length",
      subtitle: stamp,
      xLabel: "ledger entries (steps recorded)",
      yLabel: "ms per restore",
      series: restore.series,
      figure: figureLookup(restore)
    }))
    written.push(file)
  }
  const benchReadme = Path.join(here, "README.md")
  if (writeBetween(benchReadme, "<!-- bench:begin -->", "<!-- bench:end -->", markdownReport(results))) written.push(benchReadme)
  const readme = Path.join(here, "..", "README.md")
  if (writeBetween(readme, "<!-- bench:headline:begin -->", "<!-- bench:headline:end -->", markdownHeadline(results))) {
    written.push(readme)
  }
  process.stdout.write(`rendered ${source} into:\n${written.map((f) => `  ${f}`).join("\n")}\n`)
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) main()
