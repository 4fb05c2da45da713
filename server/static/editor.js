// The source editor: a plain <textarea> (#source) drawn over a highlighted copy of its lines
// (.backdrop, one .src-line per line) beside a gutter of line numbers, per-loop badges and error
// markers. The three scroll together; every row is one --lh high, so line N of each lines up.

import { escapeHtml, tokenizeSource } from "./highlight.js";

/** What each badge kind says on the page, and the colour class it takes. */
export const BADGES = {
  raised: { label: "raised", title: "raised to affine loops" },
  parallel: { label: "parallel", title: "runs in parallel" },
  tiled: { label: "tiled", title: "tiled" },
  "micro-kernel": { label: "micro-kernel", title: "computed by a register-blocked micro-kernel" },
  vectorized: { label: "vectorized", title: "vectorized" },
};

/** A badge element: `kind` (one of BADGES, or "why-not", or another word), its tooltip. */
export function badgeElement(kind, title, line) {
  const span = document.createElement("span");
  const known = BADGES[kind];
  span.className = `badge ${known || kind === "why-not" ? kind : "other"}`;
  span.dataset.badge = kind;
  if (line !== undefined) span.dataset.line = String(line);
  span.textContent = kind === "why-not" ? "why not?" : known ? known.label : kind;
  span.title = title || (known ? known.title : kind);
  span.setAttribute("aria-label", `${span.textContent} ${span.title}`);
  return span;
}

export class SourceEditor {
  /**
   * `root`: the .editor element holding .gutter, .backdrop and textarea#source.
   * `onCaretLine(line)`: called when the caret moves to another line.
   * `onEdit()`: called after the user changes the text.
   */
  constructor(root, { onCaretLine = () => {}, onEdit = () => {} } = {}) {
    this.textarea = root.querySelector("textarea");
    this.backdrop = root.querySelector(".backdrop");
    this.gutter = root.querySelector(".gutter");
    this.gutterInner = this.gutter.querySelector(".gutter-inner");
    this.language = "c";
    this.lineFacts = new Map(); // line -> {kinds: Map(kind -> title), whyNot: [reason]}
    this.markers = []; // {line, column, message, severity}
    this.highlighted = null;
    this.caretLine = 0;
    this.onCaretLine = onCaretLine;
    this.onEdit = onEdit;
    this.pendingRender = false;

    this.textarea.addEventListener("input", () => {
      this.gutter.classList.toggle("stale", this.lineFacts.size > 0);
      this.scheduleRender();
      this.onEdit();
    });
    this.textarea.addEventListener("scroll", () => this.syncScroll());
    for (const event of ["click", "keyup", "select", "focus"]) {
      this.textarea.addEventListener(event, () => this.trackCaret());
    }
    this.textarea.addEventListener("keydown", (event) => {
      if (event.key === "Tab" && !event.ctrlKey && !event.altKey && !event.metaKey) {
        event.preventDefault();
        document.execCommand("insertText", false, "  ");
      }
    });
    this.gutter.addEventListener("click", (event) => {
      const marker = event.target.closest(".marker");
      if (marker) this.moveCaret(Number(marker.dataset.line), Number(marker.dataset.column || 1));
    });
    this.render();
  }

  get value() {
    return this.textarea.value;
  }

  set value(text) {
    this.textarea.value = text;
    this.textarea.scrollTop = 0;
    this.render();
  }

  setLanguage(language) {
    this.language = language;
    this.render();
  }

  /** Per-line badges: `loops` as [{line, badges: [kind], titles: {kind: text}, whyNot: [text]}]. */
  setLoops(loops) {
    this.lineFacts = new Map();
    for (const loop of loops) {
      if (!(loop.line > 0)) continue;
      const facts = this.lineFacts.get(loop.line) || { kinds: new Map(), whyNot: [] };
      for (const kind of loop.badges) {
        const title = (loop.titles && loop.titles[kind]) || (BADGES[kind] ? BADGES[kind].title : kind);
        const before = facts.kinds.get(kind);
        facts.kinds.set(kind, before && before !== title ? `${before}\n${title}` : title);
      }
      for (const reason of loop.whyNot) if (!facts.whyNot.includes(reason)) facts.whyNot.push(reason);
      this.lineFacts.set(loop.line, facts);
    }
    this.gutter.classList.remove("stale");
    this.render();
  }

  /** Error and warning markers: [{line, column, message, severity: "error" | "warning"}]. */
  setMarkers(markers) {
    this.markers = markers.filter((m) => m.line > 0);
    this.render();
  }

  clearAnnotations() {
    this.lineFacts = new Map();
    this.markers = [];
    this.gutter.classList.remove("stale");
    this.render();
  }

  get lineHeight() {
    return parseFloat(getComputedStyle(this.textarea).lineHeight) || 20;
  }

  /** Marks source line `line` (1-based) with .highlight and scrolls it into view. */
  highlightLine(line) {
    this.highlighted = line;
    for (const old of this.root().querySelectorAll(".highlight")) old.classList.remove("highlight");
    const row = this.backdrop.querySelector(`.src-line[data-line="${line}"]`);
    const gutterRow = this.gutterInner.querySelector(`.gutter-row[data-line="${line}"]`);
    if (row) row.classList.add("highlight");
    if (gutterRow) gutterRow.classList.add("highlight");
    this.scrollToLine(line);
  }

  root() {
    return this.textarea.closest(".editor");
  }

  scrollToLine(line) {
    const top = (line - 1) * this.lineHeight;
    const view = this.textarea.clientHeight;
    const scroll = this.textarea.scrollTop;
    if (top < scroll + this.lineHeight || top > scroll + view - 3 * this.lineHeight) {
      this.textarea.scrollTop = Math.max(0, top - view / 3);
    }
    this.syncScroll();
  }

  /** Puts the caret at `line`:`column` (1-based) and focuses the editor. */
  moveCaret(line, column = 1) {
    const lines = this.value.split("\n");
    let offset = 0;
    for (let i = 0; i < Math.min(line - 1, lines.length); i++) offset += lines[i].length + 1;
    offset += Math.max(0, Math.min(column - 1, (lines[line - 1] || "").length));
    this.textarea.focus();
    this.textarea.setSelectionRange(offset, offset);
    this.scrollToLine(line);
    this.trackCaret();
  }

  trackCaret() {
    const line = this.value.slice(0, this.textarea.selectionStart).split("\n").length;
    if (line === this.caretLine) return;
    const old = this.backdrop.querySelector(".src-line.current");
    if (old) old.classList.remove("current");
    const row = this.backdrop.querySelector(`.src-line[data-line="${line}"]`);
    if (row) row.classList.add("current");
    this.caretLine = line;
    this.onCaretLine(line);
  }

  syncScroll() {
    this.backdrop.scrollTop = this.textarea.scrollTop;
    this.backdrop.scrollLeft = this.textarea.scrollLeft;
    this.gutter.scrollTop = this.textarea.scrollTop;
  }

  scheduleRender() {
    if (this.pendingRender) return;
    this.pendingRender = true;
    requestAnimationFrame(() => {
      this.pendingRender = false;
      this.render();
    });
  }

  render() {
    const lines = this.value.split("\n");
    const errorsByLine = new Map();
    for (const marker of this.markers) {
      if (!errorsByLine.has(marker.line)) errorsByLine.set(marker.line, []);
      errorsByLine.get(marker.line).push(marker);
    }
    let state = { comment: false };
    const rows = [];
    for (let i = 0; i < lines.length; i++) {
      const number = i + 1;
      const result = tokenizeSource(lines[i], this.language, state);
      state = result.state;
      const markers = errorsByLine.get(number) || [];
      const columns = markers.filter((m) => m.severity === "error" && m.column > 0).map((m) => m.column);
      const classes = ["src-line"];
      if (markers.some((m) => m.severity === "error")) classes.push("has-error");
      if (number === this.highlighted) classes.push("highlight");
      if (number === this.caretLine) classes.push("current");
      rows.push(
        `<div class="${classes.join(" ")}" data-line="${number}">${renderTokens(result.tokens, columns)}</div>`,
      );
    }
    this.backdrop.innerHTML = rows.join("");

    const gutter = document.createDocumentFragment();
    for (let i = 0; i < lines.length; i++) {
      const number = i + 1;
      const row = document.createElement("div");
      row.className = number === this.highlighted ? "gutter-row highlight" : "gutter-row";
      row.dataset.line = String(number);
      const lineno = document.createElement("span");
      lineno.className = "lineno";
      lineno.textContent = String(number);
      const badges = document.createElement("span");
      badges.className = "badges";
      const facts = this.lineFacts.get(number);
      if (facts) {
        for (const [kind, title] of facts.kinds) badges.append(badgeElement(kind, title, number));
        if (facts.whyNot.length) badges.append(badgeElement("why-not", facts.whyNot.join("\n"), number));
      }
      const markerSlot = document.createElement("span");
      markerSlot.className = "markers";
      for (const marker of errorsByLine.get(number) || []) {
        const dot = document.createElement("span");
        dot.className = `marker ${marker.severity}`;
        dot.dataset.line = String(marker.line);
        dot.dataset.column = String(marker.column || 0);
        dot.title = `${marker.line}:${marker.column || 0}: ${marker.severity}: ${marker.message}`;
        dot.textContent = marker.severity === "error" ? "✕" : "!";
        dot.setAttribute("role", "img");
        dot.setAttribute("aria-label", dot.title);
        markerSlot.append(dot);
      }
      row.append(lineno, badges, markerSlot);
      gutter.append(row);
    }
    this.gutterInner.replaceChildren(gutter);
    this.syncScroll();
  }
}

/** The HTML of a line's tokens, the characters at `columns` (1-based) underlined as errors. */
function renderTokens(tokens, columns) {
  const at = new Set(columns.map((c) => c - 1));
  let html = "";
  let offset = 0;
  for (const [text, cls] of tokens) {
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      if (!at.has(offset + i)) continue;
      html += span(text.slice(start, i), cls);
      html += `<span class="err-col">${span(text[i], cls)}</span>`;
      start = i + 1;
    }
    html += span(text.slice(start), cls);
    offset += text.length;
  }
  // an error past the end of the line (a missing ';'): a marked space after the text
  if ([...at].some((c) => c >= offset)) html += '<span class="err-col eol"> </span>';
  return html;
}

function span(text, cls) {
  if (!text) return "";
  return cls ? `<span class="${cls}">${escapeHtml(text)}</span>` : escapeHtml(text);
}
