// Small tokenizers for the explorer's colours: C and TC sources (line by line, with the block
// comment state carried across lines) and MLIR / LLVM / PTX text. Every character of the input
// comes out in exactly one token, so a highlighted line is as wide as the plain one (the source
// editor draws its text over the textarea's).

const HTML_ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** `text` safe inside HTML text and attribute values. */
export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]);
}

const C_KEYWORDS = new Set(
  ("for while do if else return break continue switch case default goto sizeof static const " +
    "extern inline restrict typedef struct union enum volatile register").split(" "),
);
const C_TYPES = new Set(
  ("void char short int long float double signed unsigned _Bool bool size_t int8_t int16_t " +
    "int32_t int64_t uint8_t uint16_t uint32_t uint64_t").split(" "),
);
const TC_KEYWORDS = new Set(["def", "where", "in", "exists"]);
const TC_TYPES = new Set(
  "float double half bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 float64".split(" "),
);

const SOURCE_TOKEN =
  /(\/\*)|(\/\/.*$)|("(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)*'?)|(\b\d+(?:\.\d*)?(?:[eE][+-]?\d+)?[fFuUlL]*\b|\.\d+(?:[eE][+-]?\d+)?[fF]?)|([A-Za-z_]\w*)/gy;

/**
 * The tokens of one source line, as [text, class | null] pairs, and the state for the next line.
 * `state.comment`: the line starts inside a C block comment.
 */
export function tokenizeSource(line, language, state = { comment: false }) {
  const tokens = [];
  let comment = state.comment;
  let pos = 0;
  let plain = "";
  const flush = () => {
    if (plain) tokens.push([plain, null]);
    plain = "";
  };
  if (language === "c" && !comment && /^\s*#/.test(line)) {
    return { tokens: [[line, "tok-pp"]], state: { comment: false } };
  }
  if (language === "tc") {
    const hash = line.indexOf("#");
    if (hash >= 0) {
      const head = tokenizeSource(line.slice(0, hash), "tc-body", state).tokens;
      return { tokens: [...head, [line.slice(hash), "tok-com"]], state: { comment: false } };
    }
  }
  const keywords = language === "c" ? C_KEYWORDS : TC_KEYWORDS;
  const types = language === "c" ? C_TYPES : TC_TYPES;
  while (pos < line.length) {
    if (comment) {
      const end = line.indexOf("*/", pos);
      flush();
      const stop = end < 0 ? line.length : end + 2;
      tokens.push([line.slice(pos, stop), "tok-com"]);
      pos = stop;
      comment = end < 0;
      continue;
    }
    SOURCE_TOKEN.lastIndex = pos;
    const m = language === "c" || language === "tc" || language === "tc-body" ? SOURCE_TOKEN.exec(line) : null;
    if (!m) {
      plain += line[pos];
      pos += 1;
      continue;
    }
    if (m[1] && language === "c") {
      flush();
      const end = line.indexOf("*/", pos + 2);
      const stop = end < 0 ? line.length : end + 2;
      tokens.push([line.slice(pos, stop), "tok-com"]);
      pos = stop;
      comment = end < 0;
      continue;
    }
    flush();
    const [text] = m;
    let cls = null;
    if (m[2]) cls = "tok-com";
    else if (m[3]) cls = "tok-str";
    else if (m[4]) cls = "tok-num";
    else if (m[5]) cls = keywords.has(text) ? "tok-kw" : types.has(text) ? "tok-type" : null;
    if (m[1]) cls = null; // "/*" in TC: not a comment there
    tokens.push([text, cls]);
    pos += text.length;
  }
  flush();
  return { tokens, state: { comment } };
}

const IR_TOKEN = new RegExp(
  [
    String.raw`(\/\/.*$)`, // 1 MLIR / PTX comment
    String.raw`("(?:[^"\\]|\\.)*")`, // 2 string
    String.raw`(%[\w.$#-]+(?::\d+)?|\$[\w.]+)`, // 3 SSA value, PTX register
    String.raw`(@[\w.$-]+|@"[^"]*")`, // 4 symbol
    String.raw`(#[\w.$-]+|\^[\w.-]+|\b(?:loc|attributes)\b)`, // 5 attribute alias, block label
    String.raw`(\b[a-z_][\w]*\.[a-z_][\w.]*\b)`, // 6 dialect.op
    String.raw`(\b(?:i\d+|f16|bf16|f32|f64|index|memref|vector|tensor|ptr|void|\.(?:f32|f64|u32|u64|s32|s64|b32|b64|pred))\b)`, // 7 type
    String.raw`(-?\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b|\b0x[0-9a-fA-F]+\b)`, // 8 number
    String.raw`(\b(?:func|module|return|true|false|define|declare|ret|br|call|label|to|step|iter_args|in)\b)`, // 9 keyword
  ].join("|"),
  "gy",
);
const IR_CLASSES = [null, "tok-com", "tok-str", "tok-ssa", "tok-sym", "tok-attr", "tok-op", "tok-type", "tok-num", "tok-kw"];

/** The HTML of one line of MLIR, LLVM IR or PTX, coloured. */
export function highlightIR(line, stage = "") {
  let html = "";
  let plain = "";
  let pos = 0;
  const llvmComment = stage === "llvm";
  while (pos < line.length) {
    if (llvmComment && line[pos] === ";") {
      html += escapeHtml(plain) + `<span class="tok-com">${escapeHtml(line.slice(pos))}</span>`;
      return html;
    }
    IR_TOKEN.lastIndex = pos;
    const m = IR_TOKEN.exec(line);
    if (!m) {
      plain += line[pos];
      pos += 1;
      continue;
    }
    const group = m.findIndex((value, i) => i > 0 && value !== undefined);
    html += escapeHtml(plain) + `<span class="${IR_CLASSES[group]}">${escapeHtml(m[0])}</span>`;
    plain = "";
    pos += m[0].length;
  }
  return html + escapeHtml(plain);
}
