// The polyflow explorer: compile C or TC through the service (POST /v1/compile with
// "explore": true), then show the source with per-loop badges, the IR after each stage (a line
// with a source position highlights that source line), the schedule trees, the dependences, a
// run against the baseline (POST /v1/run) and a share link (/#key=..., GET /v1/results/{key}).
// The contract with the service: docs in /work/notes or server/explore.py; ids below are stable.

import { SourceEditor, badgeElement, BADGES } from "./editor.js";
import { escapeHtml, highlightIR } from "./highlight.js";

const STAGE_ORDER = ["mlir", "affine", "grad", "affine-opt", "gpu", "llvm-dialect", "llvm", "ptx"];
const EMIT = {
  cpu: ["mlir", "affine", "affine-opt", "llvm-dialect"],
  cuda: ["mlir", "affine", "affine-opt", "gpu"], // the service adds the PTX of a CUDA build
};
const EXAMPLES = {
  "c-matmul": { file: "example-matmul.c", language: "c", entry: "matmul" },
  "c-stencil": { file: "example-stencil.c", language: "c", entry: "jacobi" },
  "tc-matmul": { file: "example-matmul.tc", language: "tc", entry: "matmul", sizes: "M=128,N=128,K=128" },
};
const KEY_STORAGE = "polyflow.explorer.apiKey";
const MAX_IR_LINES = 30000;
const NEEDS_KEY =
  "This service needs an API key: enter yours in “API key” (it is sent as Authorization: Bearer KEY).";

const $ = (id) => document.getElementById(id);

const state = {
  result: null, // the last compile's answer
  request: null, // the request it answered
  stage: null, // the IR tab shown
  view: "ir", // ir | loops | schedule | dependences | run
  health: null,
  exploreMissing: false, // the service refused "explore": badges come from the report
  pendingShare: null, // a shared key waiting for an API key
  busy: false,
};

const editor = new SourceEditor($("editor"), {
  onCaretLine: (line) => linkIRLines(line),
  onEdit: () => {
    $("examples").value = ""; // the text is no longer the example's
    if (state.result) setStatus("edited: compile again to update", "");
  },
});

// ---------------------------------------------------------------- service calls

/** A call of the service: {status, ok, data, headers}; status 0 when it could not be reached. */
async function api(method, path, body) {
  const headers = {};
  if (body !== undefined) headers["content-type"] = "application/json";
  const key = $("api-key").value.trim();
  if (key) headers.authorization = `Bearer ${key}`;
  for (let attempt = 0; ; attempt++) {
    let response;
    try {
      response = await fetch(path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (error) {
      return { status: 0, ok: false, data: { detail: `cannot reach the service (${error.message})` } };
    }
    let data = null;
    try {
      data = await response.json();
    } catch {
      data = null;
    }
    // a full queue: wait as the service asks, a few times
    if (response.status === 503 && attempt < 3) {
      const wait = Math.min(10, Number(response.headers.get("retry-after")) || 1);
      setStatus(`the service is busy: retrying in ${wait} s…`, "busy");
      await new Promise((resolve) => setTimeout(resolve, wait * 1000));
      continue;
    }
    return { status: response.status, ok: response.ok, data, headers: response.headers };
  }
}

/** One line saying why a call failed (every status but a 422 with source positions). */
function failure(res, what) {
  if (res.status === 401) return NEEDS_KEY;
  const detail = res.data && res.data.detail;
  const text = typeof detail === "string" ? detail : detail ? JSON.stringify(detail) : "";
  if (res.status === 0) return text;
  if (res.status === 404 && !text) return `${what}: this service does not have it (404)`;
  return `${what} failed (${res.status})${text ? `: ${text}` : ""}`;
}

function setStatus(text, kind = "") {
  const status = $("status");
  status.textContent = text;
  status.className = kind;
  status.title = text;
}

// ---------------------------------------------------------------- the request

function parseSizes(text) {
  const sizes = {};
  for (const part of text.split(/[,\s]+/).filter(Boolean)) {
    const m = /^([A-Za-z_]\w*)\s*=\s*(\d+)$/.exec(part);
    if (!m) throw new Error(`sizes: expected NAME=NUMBER, e.g. M=64, got "${part}"`);
    sizes[m[1]] = Number(m[2]);
  }
  return sizes;
}

/** "f" or "f:a,b" (the CLI's --grad) as the request's `grad` ({entry, wrt}), or null. */
function parseGrad(text) {
  const spec = text.trim();
  if (!spec) return null;
  const m = /^([A-Za-z_]\w*)(?::\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*))?$/.exec(spec);
  if (!m) throw new Error(`gradient: expected NAME or NAME:wrt1,wrt2, got "${spec}"`);
  return { entry: m[1], wrt: m[2] ? m[2].split(/\s*,\s*/) : null };
}

function formatGrad(grad) {
  if (!grad) return "";
  return grad.wrt ? `${grad.entry}:${grad.wrt.join(",")}` : grad.entry;
}

function formatSizes(sizes) {
  return Object.entries(sizes || {})
    .map(([name, value]) => `${name}=${value}`)
    .join(",");
}

/** The compile request of the form (Error naming the field when one is malformed). */
function buildRequest() {
  const language = $("language").value;
  const target = $("target").value;
  const options = { opt_level: Number($("opt-level").value), fusion: $("fusion").value };
  const tiles = $("tile-sizes").value.trim();
  if (tiles) {
    const sizes = tiles.split(/[,x\s]+/).filter(Boolean).map(Number);
    if (sizes.some((s) => !Number.isInteger(s) || s < 1)) {
      throw new Error(`tile sizes: expected positive integers separated by commas, got "${tiles}"`);
    }
    options.tile_sizes = sizes;
  }
  const threads = $("threads").value.trim();
  if (threads) {
    const n = Number(threads);
    if (!Number.isInteger(n) || n < 1) throw new Error(`threads: expected a positive integer, got "${threads}"`);
    options.threads = n;
  }
  const request = {
    language,
    source: editor.value,
    entry: $("entry").value.trim() || null,
    target,
    options,
    emit: EMIT[target],
  };
  if (language === "tc") request.sizes = parseSizes($("sizes").value);
  const grad = parseGrad($("grad").value);
  if (grad) {
    if (target !== "cpu") throw new Error("gradient: the reverse-mode gradient compiles for the CPU target");
    request.grad = grad;
    request.emit = [...request.emit.slice(0, 2), "grad", ...request.emit.slice(2)];
  }
  return request;
}

/** Puts a request's fields back into the form (a shared link). */
function applyRequest(request) {
  const options = request.options || {};
  $("language").value = request.language || "c";
  $("entry").value = request.entry || "";
  $("sizes").value = formatSizes(request.sizes);
  $("target").value = request.target || options.target || "cpu";
  $("opt-level").value = String(options.opt_level ?? 3);
  $("fusion").value = options.fusion || "smart";
  $("tile-sizes").value = (options.tile_sizes || []).join(",");
  $("threads").value = options.threads ?? "";
  $("grad").value = formatGrad(request.grad);
  languageChanged();
  editor.value = request.source || "";
}

function languageChanged() {
  const tc = $("language").value === "tc";
  $("sizes").disabled = !tc;
  $("sizes").closest("label").classList.toggle("off", !tc);
  editor.setLanguage($("language").value);
}

// ---------------------------------------------------------------- compile, run, share

async function compile() {
  if (state.busy) return;
  let request;
  try {
    request = buildRequest();
  } catch (error) {
    showErrors([{ message: error.message }]);
    setStatus(error.message, "error");
    return;
  }
  setBusy(true);
  clearErrors();
  setStatus("compiling…", "busy");
  const started = performance.now();
  try {
    let res = await api("POST", "/v1/compile", state.exploreMissing ? request : { ...request, explore: true });
    if (!state.exploreMissing && res.status === 422 && refusesExplore(res.data)) {
      state.exploreMissing = true; // an older service: compile without, badges from the report
      res = await api("POST", "/v1/compile", request);
    }
    const ms = Math.round(performance.now() - started);
    if (res.ok) {
      state.request = state.exploreMissing ? request : { ...request, explore: true };
      showResult(res.data);
      const note = state.exploreMissing ? " (this service has no explore data: badges from its report)" : "";
      setStatus(res.data.cached ? `cached: done in ${ms} ms${note}` : `done in ${ms} ms${note}`, "ok");
      setShareLink(null);
    } else if (res.status === 422 && Array.isArray(res.data?.detail)) {
      showErrors(res.data.detail);
      const count = res.data.detail.length;
      setStatus(`${count} error${count === 1 ? "" : "s"}: ${describeDetail(res.data.detail[0])}`, "error");
    } else {
      const message = failure(res, "compile");
      showErrors([{ message }]);
      setStatus(message, "error");
      if (res.status === 401) $("api-key").focus();
    }
  } finally {
    setBusy(false);
  }
}

function refusesExplore(data) {
  return Array.isArray(data?.detail) && data.detail.some((d) => Array.isArray(d.loc) && d.loc.includes("explore"));
}

async function run() {
  if (state.busy) return;
  let request;
  try {
    request = buildRequest();
  } catch (error) {
    setStatus(error.message, "error");
    return;
  }
  const body = { language: request.language, source: request.source, entry: request.entry, options: request.options };
  if (request.sizes) body.sizes = request.sizes;
  setBusy(true);
  selectView("run");
  $("run-result").innerHTML = '<p class="empty">running on the server…</p>';
  setStatus("running…", "busy");
  const started = performance.now();
  try {
    const res = await api("POST", "/v1/run", body);
    const ms = Math.round(performance.now() - started);
    if (res.ok) {
      showRun(res.data);
      const match = res.data.outputs_match ? "outputs match" : "OUTPUTS DIFFER";
      setStatus(`ran in ${ms} ms: ${formatNumber(res.data.speedup)}x over ${res.data.baseline}, ${match}`, res.data.outputs_match ? "ok" : "error");
    } else {
      const detail = res.data?.detail;
      const message = Array.isArray(detail) ? detail.map(describeDetail).join("; ") : failure(res, "run");
      if (res.status === 422 && Array.isArray(detail)) showErrors(detail);
      $("run-result").innerHTML = `<p class="empty">${escapeHtml(message)}</p>`;
      setStatus(message, "error");
    }
  } finally {
    setBusy(false);
  }
}

function setBusy(busy) {
  state.busy = busy;
  $("compile").disabled = busy;
  updateRunButton();
}

async function share() {
  if (!state.result || !state.result.key) {
    setStatus("compile first: the link shares a compiled result", "error");
    return;
  }
  const url = `${location.origin}/#key=${state.result.key}`;
  setShareLink(url);
  let copied = false;
  try {
    await navigator.clipboard.writeText(url);
    copied = true;
  } catch {
    copied = false; // no clipboard here (e.g. not a secure context): the link is on the page
  }
  setStatus(copied ? "share link copied" : "share link ready", "ok");
}

function setShareLink(url) {
  const link = $("share-link");
  link.hidden = !url;
  link.href = url || "#";
  link.textContent = url || "";
  link.title = url ? "opens this source, its options and its result" : "";
}

/** Shows the shared result `key` (GET /v1/results/{key}) without compiling again. */
async function loadShared(key) {
  setStatus("loading the shared result…", "busy");
  const res = await api("GET", `/v1/results/${encodeURIComponent(key)}`);
  if (res.status === 401) {
    state.pendingShare = key;
    setStatus(NEEDS_KEY, "error");
    $("api-key").focus();
    return;
  }
  state.pendingShare = null;
  if (!res.ok) {
    setStatus(
      res.status === 404 ? `no stored result for the shared key ${key.slice(0, 12)}…` : failure(res, "loading the shared result"),
      "error",
    );
    return;
  }
  applyRequest(res.data.request || {});
  state.request = res.data.request;
  showResult(res.data.result);
  setShareLink(`${location.origin}/#key=${key}`);
  setStatus(`shared result ${key.slice(0, 12)}… loaded`, "ok");
}

function sharedKey() {
  const fromHash = new URLSearchParams(location.hash.replace(/^#/, "")).get("key");
  return fromHash || new URLSearchParams(location.search).get("key");
}

// ---------------------------------------------------------------- errors

function describeDetail(d) {
  if (d.line !== undefined && d.message !== undefined) {
    return d.line > 0 ? `${d.line}:${d.column}: ${d.message}` : d.message;
  }
  if (d.loc) return `${d.loc.filter((p) => p !== "body").join(".")}: ${d.msg}`;
  return d.message || d.msg || JSON.stringify(d);
}

function clearErrors() {
  $("errors").replaceChildren();
  $("notes").replaceChildren();
  editor.setMarkers([]);
}

/** 422 details: markers in the editor at line:column, and one list item each. */
function showErrors(details) {
  const list = $("errors");
  list.replaceChildren();
  const markers = [];
  for (const d of details) {
    const item = document.createElement("li");
    item.textContent = `error: ${describeDetail(d)}`;
    if (d.line > 0) {
      markers.push({ line: d.line, column: d.column, message: d.message, severity: "error" });
      item.dataset.line = String(d.line);
      item.dataset.column = String(d.column || 1);
      item.title = "show in the source";
    }
    list.append(item);
  }
  editor.setMarkers(markers);
}

function showNotes(diagnostics) {
  const list = $("notes");
  list.replaceChildren();
  const markers = [];
  for (const d of diagnostics || []) {
    const item = document.createElement("li");
    item.className = d.severity || "note";
    const where = d.line > 0 ? `${d.line}:${d.column || 0}: ` : "";
    item.textContent = `${where}${d.severity || "note"}: ${d.message}`;
    if (d.line > 0) {
      item.dataset.line = String(d.line);
      item.dataset.column = String(d.column || 1);
      if (d.severity === "warning") {
        markers.push({ line: d.line, column: d.column, message: d.message, severity: "warning" });
      }
    }
    list.append(item);
  }
  editor.setMarkers(markers);
}

// ---------------------------------------------------------------- a result

function showResult(result) {
  state.result = result;
  $("errors").replaceChildren();
  showNotes(result.diagnostics);
  const loops = loopFacts(result);
  editor.setLoops(loops);
  showLoops(loops, result);
  showStageTabs(result);
  showSchedule(result);
  showDependences(result);
  $("run-result").innerHTML = '<p class="empty">Press Run to time this kernel against the baseline.</p>';
  if (state.view !== "ir" && state.view !== "loops" && state.view !== "schedule" && state.view !== "dependences") {
    selectView("ir");
  }
}

/** One entry per source loop: {function, line, column, badges, titles, whyNot, details}. */
function loopFacts(result) {
  const explore = result.explore;
  if (explore && Array.isArray(explore.loops)) {
    return explore.loops.map((loop) => ({
      function: loop.function,
      line: loop.line,
      column: loop.column,
      badges: loop.badges || [],
      whyNot: loop.why_not || [],
      details: loop.details || {},
      titles: badgeTitles(loop.badges || [], loop.details || {}),
    }));
  }
  return loopsFromReport(result.report || {});
}

function badgeTitles(badges, details) {
  const titles = {};
  const d = details || {};
  for (const kind of badges) {
    let title = BADGES[kind] ? BADGES[kind].title : kind;
    if (kind === "raised" && Array.isArray(d.reductions) && d.reductions.length) {
      title = `raised to affine loops (carries: ${d.reductions.join(", ")} reduction)`;
    }
    if (kind === "tiled" && Array.isArray(d.tile_sizes)) {
      const how = [d.second_level && "two levels", d.wavefront && "wavefront", d.contraction && "contraction sizes"].filter(Boolean);
      title = `tiled ${d.tile_sizes.join("x")}${how.length ? ` (${how.join(", ")})` : ""}`;
    }
    if (kind === "micro-kernel" && d.micro_kernel) {
      const [rows, vectors] = String(d.micro_kernel).split("x");
      title = vectors
        ? `micro-kernel: register blocks of ${rows} rows x ${vectors} vectors` +
          (d.vector_lanes ? ` of ${d.vector_lanes} ${d.element || "lanes"}` : "")
        : `micro-kernel ${d.micro_kernel}`;
    }
    if (kind === "parallel" && Array.isArray(d.parallel_reductions) && d.parallel_reductions.length) {
      title = `runs in parallel (reductions: ${d.parallel_reductions.join(", ")})`;
    }
    if (kind === "parallel" && d.gpu_axis) {
      const block = Array.isArray(d.gpu_block) ? ` (blocks of ${d.gpu_block.join("x")} threads)` : "";
      title = `mapped to GPU blocks and threads along ${d.gpu_axis}${block}`;
    }
    titles[kind] = title;
  }
  return titles;
}

/** Loops from the compile report's remarks (a service without explore data). */
function loopsFromReport(report) {
  const byPlace = new Map();
  const WHY_NOT_KINDS = new Set(["not-raised", "not-scheduled", "source-order", "untiled", "unfused", "unraised", "left-to-cc"]);
  for (const r of report.remarks || []) {
    if (!(r.line > 0)) continue;
    const place = `${r.function}:${r.line}`;
    if (!byPlace.has(place)) {
      byPlace.set(place, { function: r.function, line: r.line, column: r.column, badges: [], whyNot: [], details: {}, titles: {} });
    }
    const loop = byPlace.get(place);
    const add = (kind, title) => {
      if (!loop.badges.includes(kind)) loop.badges.push(kind);
      loop.titles[kind] = title;
    };
    const data = r.data || {};
    if (r.kind === "loop") {
      if (data.raised) add("raised", r.message);
      else loop.whyNot.push(data.reason ? `not raised: ${data.reason}` : r.message);
    } else if (r.kind === "tiled") {
      add("tiled", r.message);
      if (data.sizes) loop.details.tile_sizes = data.sizes;
    } else if (r.kind === "micro-kernel") {
      add("micro-kernel", r.message);
    } else if (r.kind === "parallel-loop") {
      add("parallel", r.message);
    } else if (WHY_NOT_KINDS.has(r.kind) || r.severity === "warning") {
      loop.whyNot.push(r.message);
    }
  }
  return [...byPlace.values()].filter((l) => l.badges.length || l.whyNot.length).sort((a, b) => a.line - b.line);
}

function lineLink(line, column) {
  if (!(line > 0)) return "–";
  const where = column > 0 ? `${line}:${column}` : String(line);
  return `<a class="line-link" data-src-line="${line}" href="#" title="show line ${line}">${where}</a>`;
}

function showLoops(loops, result) {
  const root = $("loops");
  if (!loops.length) {
    root.innerHTML = '<p class="empty">No loops to report.</p>';
  } else {
    const table = document.createElement("table");
    table.className = "grid loops";
    table.innerHTML = "<thead><tr><th>function</th><th>line</th><th>what polyflow did</th><th>why not</th><th>details</th></tr></thead>";
    const body = document.createElement("tbody");
    for (const loop of loops) {
      const row = document.createElement("tr");
      row.innerHTML = `<td class="mono">${escapeHtml(loop.function || "")}</td><td>${lineLink(loop.line, loop.column)}</td><td class="badge-cell"></td><td>${escapeHtml(loop.whyNot.join("; "))}</td><td class="mono">${escapeHtml(formatDetails(loop.details))}</td>`;
      for (const kind of loop.badges) row.querySelector(".badge-cell").append(badgeElement(kind, loop.titles[kind]), " ");
      body.append(row);
    }
    table.append(body);
    root.replaceChildren(table);
  }
  const timings = Object.entries(result.timings || {});
  if (timings.length) {
    const heading = document.createElement("h3");
    heading.textContent = "Compile time per stage";
    const table = document.createElement("table");
    table.className = "grid timings";
    table.innerHTML = `<thead><tr><th>stage</th><th>ms</th></tr></thead><tbody>${timings
      .map(([stage, ms]) => `<tr><td class="mono">${escapeHtml(stage)}</td><td class="mono">${formatNumber(ms)}</td></tr>`)
      .join("")}</tbody>`;
    root.append(heading, table);
  }
}

function formatDetails(details) {
  return Object.entries(details || {})
    .map(([k, v]) => `${k}=${Array.isArray(v) ? v.join("x") : typeof v === "object" ? JSON.stringify(v) : v}`)
    .join(" ");
}

function formatNumber(value) {
  if (typeof value !== "number" || !Number.isFinite(value)) return String(value ?? "–");
  return value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2);
}

// ---------------------------------------------------------------- the IR

function stageTexts(result) {
  const stages = {};
  for (const [name, text] of Object.entries(result.stages || {})) stages[name] = { text, lines: null };
  const explored = (result.explore && result.explore.stages) || {};
  for (const [name, stage] of Object.entries(explored)) stages[name] = { text: stage.text, lines: stage.lines || null };
  return stages;
}

function showStageTabs(result) {
  const stages = stageTexts(result);
  const names = Object.keys(stages).sort((a, b) => rank(a) - rank(b));
  const tabs = $("stage-tabs");
  tabs.replaceChildren(
    ...names.map((name) => {
      const button = document.createElement("button");
      button.type = "button";
      button.setAttribute("role", "tab");
      button.dataset.stage = name;
      button.textContent = name;
      button.title = `the IR after the ${name} stage`;
      return button;
    }),
  );
  if (!names.includes(state.stage)) state.stage = names.includes("affine-opt") ? "affine-opt" : names[0] || null;
  if (state.stage) selectStage(state.stage, state.view === "ir");
  else $("ir").innerHTML = '<p class="empty">This compile has no IR text.</p>';
}

function rank(stage) {
  const i = STAGE_ORDER.indexOf(stage);
  return i < 0 ? STAGE_ORDER.length : i;
}

function selectStage(name, show = true) {
  state.stage = name;
  const stage = stageTexts(state.result || {})[name];
  const root = $("ir");
  if (!stage) {
    root.innerHTML = '<p class="empty">No such stage.</p>';
  } else {
    const lines = stage.text.split("\n");
    if (lines.length && lines[lines.length - 1] === "") lines.pop();
    const shown = lines.slice(0, MAX_IR_LINES);
    const html = shown.map((line, i) => {
      const pos = stage.lines ? stage.lines[i] : null;
      const where = pos && pos.line > 0;
      const attrs = where
        ? ` data-src-line="${pos.line}" data-src-column="${pos.column || 0}" title="from source line ${pos.line}:${pos.column || 0}; click to show it"`
        : "";
      return `<div class="ir-line"${attrs}><span class="no">${i + 1}</span><span class="src">${where ? `:${pos.line}` : ""}</span><span class="text">${highlightIR(line, name)}</span></div>`;
    });
    if (lines.length > shown.length) html.push(`<p class="empty">… ${lines.length - shown.length} more lines</p>`);
    root.innerHTML = html.join("");
    root.scrollTop = 0;
    linkIRLines(editor.caretLine);
  }
  for (const button of $("stage-tabs").querySelectorAll("button")) {
    button.setAttribute("aria-selected", String(button.dataset.stage === name && show));
  }
  if (show) selectView("ir");
}

/** IR lines that came from source line `line`: .linked (the caret's line in the editor). */
function linkIRLines(line) {
  for (const old of $("ir").querySelectorAll(".ir-line.linked")) old.classList.remove("linked");
  if (!(line > 0)) return;
  for (const el of $("ir").querySelectorAll(`.ir-line[data-src-line="${line}"]`)) el.classList.add("linked");
}

function selectView(view) {
  state.view = view;
  const panels = { ir: "panel-ir", loops: "panel-loops", schedule: "panel-schedule", dependences: "panel-dependences", run: "panel-run" };
  for (const [name, id] of Object.entries(panels)) $(id).hidden = name !== view;
  for (const button of $("view-tabs").querySelectorAll("button")) {
    button.setAttribute("aria-selected", String(button.dataset.view === view));
  }
  if (view !== "ir") {
    for (const button of $("stage-tabs").querySelectorAll("button")) button.setAttribute("aria-selected", "false");
  }
}

// ---------------------------------------------------------------- schedule trees, dependences, run

function showSchedule(result) {
  const explore = result.explore || {};
  const trees = explore.schedule_trees || (result.report && result.report.schedules) || {};
  const statements = explore.statements || {};
  const root = $("schedule-tree");
  const names = Object.keys(trees);
  if (!names.length) {
    root.innerHTML = '<p class="empty">No function was rescheduled (the polyhedral stage runs at level 3).</p>';
    return;
  }
  root.innerHTML = names
    .map((fn) => {
      const places = statements[fn] || {};
      const tree = escapeHtml(trees[fn]).replace(/\b(S_?\d+)\b/g, (name) => {
        const pos = places[name];
        return pos && pos.line > 0
          ? `<span class="stmt" data-src-line="${pos.line}" title="statement ${name}: source line ${pos.line}">${name}</span>`
          : name;
      });
      const legend = Object.entries(places)
        .map(([name, pos]) => `<tr><td class="mono">${escapeHtml(name)}</td><td>${lineLink(pos.line, pos.column)}</td></tr>`)
        .join("");
      return (
        `<h3>${escapeHtml(fn)}</h3><pre class="tree">${tree}</pre>` +
        (legend ? `<table class="grid statements"><thead><tr><th>statement</th><th>source</th></tr></thead><tbody>${legend}</tbody></table>` : "")
      );
    })
    .join("");
}

function showDependences(result) {
  const explore = result.explore;
  const root = $("dependences");
  if (!explore || !explore.dependences) {
    root.innerHTML = '<p class="empty">This service does not report dependences.</p>';
    return;
  }
  const names = Object.keys(explore.dependences);
  if (!names.length) {
    root.innerHTML = '<p class="empty">No dependences: no function went through the polyhedral stage (level 3).</p>';
    return;
  }
  root.innerHTML = names
    .map((fn) => {
      const deps = explore.dependences[fn] || [];
      const end = (statement, line) => `${statement ? `${escapeHtml(statement)} ` : ""}${lineLink(line)}`;
      const rows = deps
        .map(
          (d) =>
            `<tr><td><span class="kind ${escapeHtml(d.kind)}">${escapeHtml(d.kind)}</span></td><td class="mono">${escapeHtml(d.relation)}</td><td class="mono">${end(d.source, d.source_line)}</td><td class="mono">${end(d.sink, d.sink_line)}</td></tr>`,
        )
        .join("");
      const left = (explore.dependences_truncated || {})[fn];
      return (
        `<h3>${escapeHtml(fn)} <small>(${deps.length}${left ? `, ${left} more not shown` : ""})</small></h3>` +
        (deps.length
          ? `<table class="grid deps"><thead><tr><th>kind</th><th>relation</th><th>source</th><th>sink</th></tr></thead><tbody>${rows}</tbody></table>`
          : '<p class="empty">none</p>')
      );
    })
    .join("");
}

function showRun(data) {
  const match = data.outputs_match;
  const rows = [
    ["polyflow", `${formatNumber(data.polyflow_ms)} ms`, "polyflow_ms"],
    [data.baseline || "baseline", `${formatNumber(data.baseline_ms)} ms`, "baseline_ms"],
    ["speedup", `<span class="speedup">${formatNumber(data.speedup)}×</span>`, "speedup", true],
    ["outputs match", match ? "yes ✓" : "no ✗", "outputs_match"],
    ["runs", String(data.runs ?? "–"), "runs"],
  ];
  if (data.note) rows.push(["note", escapeHtml(data.note), "note", true]);
  $("run-result").innerHTML = `<dl class="result">${rows
    .map(([label, value, field, html]) => {
      const cls = field === "outputs_match" ? ` class="match ${match ? "yes" : "no"}"` : "";
      return `<dt>${escapeHtml(label)}</dt><dd data-field="${field}"${cls}>${html ? value : escapeHtml(value)}</dd>`;
    })
    .join("")}</dl>`;
}

// ---------------------------------------------------------------- health, keys, examples, files

async function checkHealth() {
  const res = await api("GET", "/v1/healthz");
  if (res.status === 401) {
    state.health = null;
    updateRunButton(NEEDS_KEY);
    return false;
  }
  state.health = res.ok ? res.data : null;
  updateRunButton(res.ok ? null : failure(res, "the service's health"));
  return res.ok;
}

function updateRunButton(why) {
  const button = $("run");
  let reason = why || null;
  if (!reason && !state.health) reason = "checking whether this service runs code…";
  if (!reason && !(state.health.tuning && state.health.tuning.allowed)) {
    reason = "this service does not run submitted code: start it with `polyflow serve --allow-run`";
  }
  button.disabled = Boolean(reason) || state.busy;
  const title = reason || "time the kernel on the server against the baseline (C: a program with main; TC: random inputs of the sizes)";
  button.title = title;
  $("run-wrap").title = title;
  button.dataset.reason = reason || "";
}

async function loadExample(name) {
  const example = EXAMPLES[name];
  if (!example) return;
  const response = await fetch(`/static/${example.file}`);
  if (!response.ok) {
    setStatus(`could not load the example ${example.file} (${response.status})`, "error");
    return;
  }
  $("language").value = example.language;
  $("entry").value = example.entry || "";
  $("sizes").value = example.sizes || "";
  languageChanged();
  editor.value = await response.text();
  clearResult();
  setStatus(`example ${example.file} loaded: press Compile`, "");
}

function clearResult() {
  state.result = null;
  editor.clearAnnotations();
  $("errors").replaceChildren();
  $("notes").replaceChildren();
  setShareLink(null);
}

async function openFile(file) {
  const text = await file.text();
  const tc = /\.tc$/i.test(file.name);
  $("language").value = tc ? "tc" : "c";
  languageChanged();
  editor.value = text;
  clearResult();
  setStatus(`opened ${file.name}: press Compile`, "");
}

// ---------------------------------------------------------------- wiring

function wire() {
  $("controls").addEventListener("submit", (event) => {
    event.preventDefault();
    compile();
  });
  $("run").addEventListener("click", run);
  $("share").addEventListener("click", share);
  $("language").addEventListener("change", languageChanged);
  $("examples").addEventListener("change", (event) => loadExample(event.target.value));
  $("upload").addEventListener("change", (event) => {
    const [file] = event.target.files;
    if (file) openFile(file);
  });
  $("source").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      compile();
    }
  });
  const key = $("api-key");
  key.value = localStorage.getItem(KEY_STORAGE) || "";
  key.addEventListener("change", async () => {
    const value = key.value.trim();
    if (value) localStorage.setItem(KEY_STORAGE, value);
    else localStorage.removeItem(KEY_STORAGE);
    const healthy = await checkHealth();
    if (state.pendingShare) await loadShared(state.pendingShare);
    else if (healthy) setStatus("API key accepted", "ok");
    else if (!value) setStatus(NEEDS_KEY, "error");
    else setStatus("this API key was refused", "error");
  });
  $("stage-tabs").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-stage]");
    if (button) selectStage(button.dataset.stage);
  });
  $("view-tabs").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-view]");
    if (button) selectView(button.dataset.view);
  });
  $("ir").addEventListener("click", (event) => {
    const line = event.target.closest(".ir-line[data-src-line]");
    if (!line) return;
    for (const old of $("ir").querySelectorAll(".ir-line.selected")) old.classList.remove("selected");
    line.classList.add("selected");
    editor.highlightLine(Number(line.dataset.srcLine));
  });
  // line links in the tables and the schedule trees
  for (const id of ["loops", "schedule-tree", "dependences"]) {
    $(id).addEventListener("click", (event) => {
      const link = event.target.closest("[data-src-line]");
      if (!link) return;
      event.preventDefault();
      editor.highlightLine(Number(link.dataset.srcLine));
    });
  }
  for (const id of ["errors", "notes"]) {
    $(id).addEventListener("click", (event) => {
      const item = event.target.closest("li[data-line]");
      if (item) editor.moveCaret(Number(item.dataset.line), Number(item.dataset.column));
    });
  }
  window.addEventListener("hashchange", () => {
    const key = sharedKey();
    if (key) loadShared(key);
  });
}

async function main() {
  wire();
  languageChanged();
  selectView("ir");
  const healthy = await checkHealth();
  const key = sharedKey();
  if (key) {
    await loadShared(key);
  } else {
    await loadExample("c-matmul");
    $("examples").value = "c-matmul";
    if (healthy) setStatus("ready: press Compile (Ctrl+Enter)", "");
    else setStatus(state.health === null && $("run").dataset.reason === NEEDS_KEY ? NEEDS_KEY : "the service did not answer /v1/healthz", "error");
  }
  document.body.dataset.ready = "true";
}

main();
