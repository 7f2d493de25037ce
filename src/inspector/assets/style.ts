/**
 * The inspector's style sheet, served from the package itself (no CDN): light by
 * default, dark when the browser prefers it.
 *
 * @internal
 */
export const STYLE_CSS = String.raw`
:root {
  --bg: #ffffff; --fg: #1b1f24; --muted: #5b636e; --line: #d6dae0; --panel: #f5f7f9;
  --accent: #0b5cad; --focus: #f0a500;
  --ok: #1a7f37; --warn: #9a6700; --bad: #c62828; --info: #0b5cad; --idle: #6e7781;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; font-size: 14px;
  color-scheme: light dark;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #0f1216; --fg: #e6e9ee; --muted: #9aa4b0; --line: #2c333c; --panel: #171c22;
    --accent: #6cb6ff; --focus: #ffcc4d;
    --ok: #4ac26b; --warn: #d4a72c; --bad: #ff6b6b; --info: #6cb6ff; --idle: #9aa4b0;
  }
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); }
a { color: var(--accent); }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
.skip { position: absolute; left: -9999px; }
.skip:focus { left: 8px; top: 8px; background: var(--panel); padding: 6px; z-index: 10; }
header { border-bottom: 1px solid var(--line); background: var(--panel); }
nav { display: flex; gap: 16px; align-items: center; padding: 10px 20px; flex-wrap: wrap; }
nav a { text-decoration: none; font-weight: 600; padding: 4px 2px; }
nav a[aria-current="page"] { border-bottom: 2px solid var(--accent); }
.brand { margin-right: 8px; }
.muted { color: var(--muted); }
.live { margin-left: auto; font-size: 12px; color: var(--muted); }
.live.on::before { content: "\25CF "; color: var(--ok); }
main { padding: 16px 20px 40px; max-width: 1400px; }
h1 { font-size: 20px; margin: 4px 0 12px; word-break: break-all; }
h2 { font-size: 16px; margin: 20px 0 8px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; text-transform: uppercase; letter-spacing: .03em; color: var(--muted); }
th button { all: unset; cursor: pointer; }
th button:focus-visible { outline: 3px solid var(--focus); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; border: 1px solid currentColor; white-space: nowrap; }
.s-running, .s-alive, .s-live { color: var(--info); }
.s-finished, .s-succeeded { color: var(--ok); }
.s-interrupted, .s-starting, .s-superseded, .s-waiting, .s-in-process, .s-evicted { color: var(--warn); }
.s-failed, .s-unreadable, .s-corrupt, .s-stopped, .s-exited, .s-diverged, .s-tombstone, .s-discarded, .s-dead { color: var(--bad); }
.s-idle, .s-empty { color: var(--idle); }
.controls { display: flex; gap: 10px; flex-wrap: wrap; align-items: end; margin-bottom: 12px; }
.controls label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); gap: 3px; }
input, select, button { font: inherit; color: var(--fg); background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 5px 8px; }
button { cursor: pointer; background: var(--panel); }
button.danger { border-color: var(--bad); color: var(--bad); }
.chips { display: flex; gap: 6px; flex-wrap: wrap; margin: 0 0 10px; }
.chips a { text-decoration: none; }
.pager { display: flex; gap: 12px; align-items: center; margin-top: 10px; }
dl.fields { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
dl.fields dt { color: var(--muted); }
dl.fields dd { margin: 0; word-break: break-all; }
.panel { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; margin: 10px 0; }
.grid2 { display: grid; grid-template-columns: repeat(auto-fit, minmax(380px, 1fr)); gap: 12px; }
.tree td.path { white-space: nowrap; }
.toggle { all: unset; cursor: pointer; width: 1.2em; display: inline-block; text-align: center; }
.toggle:focus-visible { outline: 3px solid var(--focus); }
.marks { display: flex; gap: 4px; flex-wrap: wrap; }
.json { margin: 6px 0; padding: 8px; background: var(--bg); border: 1px solid var(--line); border-radius: 6px; overflow: auto; max-height: 420px; }
.json details { margin-left: 1.2em; }
.json summary { cursor: pointer; margin-left: -1.2em; }
.json .k { color: var(--accent); }
.json .str { color: var(--ok); }
.json .num { color: var(--warn); }
.timeline { display: grid; grid-template-columns: max-content 1fr max-content; gap: 2px 10px; align-items: center; }
.timeline .bar { position: relative; height: 10px; background: var(--line); border-radius: 5px; }
.timeline .dot { position: absolute; top: -2px; width: 14px; height: 14px; border-radius: 7px; background: var(--accent); margin-left: -7px; }
svg.spark { display: block; }
svg.spark polyline { fill: none; stroke: var(--accent); stroke-width: 1.5; }
svg.spark line { stroke: var(--line); }
.notfound { padding: 30px 0; }
.problem { color: var(--bad); }
dialog { background: var(--panel); color: var(--fg); border: 1px solid var(--line); border-radius: 10px; max-width: 520px; }
dialog::backdrop { background: rgb(0 0 0 / 45%); }
dialog menu { display: flex; gap: 10px; justify-content: flex-end; padding: 0; }
.toast { margin: 8px 0; padding: 8px 10px; border-radius: 6px; border: 1px solid var(--line); background: var(--panel); }
`
