// scripts/explorer/explorer.js — the memory explorer: the page's controls make a command line, and
// ./train (train.wasm, wasi.js) runs it as a dry run: every number the page shows is one the binary
// printed or wrote (--mem-json, --mem-timeline, --mem-ops, --fit), none computed here. The page only
// draws them. window.gptmem is what the browser test (tests/explorer.py) drives.
"use strict";

const CATEGORY_COLOR = {
  params: "#4e79a7", master: "#a0cbe8", grads: "#f28e2b", adam_m: "#59a14f", adam_v: "#8cd17d",
  activations: "#e15759", scratch: "#b07aa1", comm: "#76b7b2", data: "#9c755f", qweights: "#edc948",
  qscales: "#bab0ac", kv_cache: "#ff9da7", adapters: "#d37295",
};
const PHASES = ["after init", "after forward", "after backward", "after step"];
const GiB = 1073741824, MiB = 1048576;
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
const gib = (b) => (b / GiB).toFixed(2) + " GiB";

let wasmModule = null;
const run = (args) => runTrain(wasmModule, args, CORPUS);

// --- the controls -> the flags ---------------------------------------------------------------------
// Each control is a flag; a control left at the binary's default (empty, unchecked, its first
// choice) adds nothing to the command line.
const NUMBER_FLAGS = ["layers", "channels", "heads", "kv-heads", "ffn", "vocab", "max-seq", "batch", "seq-len", "accum",
                      "ranks", "shard-group", "tp", "lora"];
const SELECT_FLAGS = ["model", "device", "gpu", "dtype", "zero", "offload", "offload-to", "adam-bits", "quantize", "base-dtype"];
const CHECK_FLAGS = ["fp32-grads", "ckpt", "flash", "fused-ce", "double-quant", "infer", "eval-only", "sp"];
const RECOMPUTE = ["gelu", "ln", "attn", "mlp"];

function settingsArgs() {
  const a = [];
  for (const f of SELECT_FLAGS) {
    const el = $("f-" + f);
    if (el.value !== el.dataset.default) a.push("--" + f, el.value);
  }
  for (const f of NUMBER_FLAGS) if ($("f-" + f).value.trim() !== "") a.push("--" + f, $("f-" + f).value.trim());
  for (const f of CHECK_FLAGS) if ($("f-" + f).checked) a.push("--" + f);
  const rec = RECOMPUTE.filter((r) => $("f-rec-" + r).checked);
  if (rec.length) a.push("--recompute", rec.join(","));
  return a;
}

// The flags back into the controls (the page's address: explorer.html#--model llama3-8b --batch 1).
function setArgs(args) {
  for (const f of SELECT_FLAGS) $("f-" + f).value = $("f-" + f).dataset.default;
  for (const f of NUMBER_FLAGS) $("f-" + f).value = "";
  for (const f of CHECK_FLAGS) $("f-" + f).checked = false;
  for (const r of RECOMPUTE) $("f-rec-" + r).checked = false;
  for (let i = 0; i < args.length; i++) {
    const f = args[i].replace(/^--/, "");
    if (f === "recompute") { for (const r of (args[++i] || "").split(",")) if ($("f-rec-" + r)) $("f-rec-" + r).checked = true; }
    else if (CHECK_FLAGS.includes(f)) $("f-" + f).checked = true;
    else if (SELECT_FLAGS.includes(f) || NUMBER_FLAGS.includes(f)) $("f-" + f).value = args[++i];
  }
}

const commandLine = (args) => "./train " + args.join(" ");

// --- the views ---------------------------------------------------------------------------------------
// A bar of the parts, `total` bytes to the full width; with a card (--gpu: the dry run's "gpu"), its memory as a
// line across the bar, the bar scaled to the larger of the two.
function stackedBar(parts, total, width, label, card) {
  const scale = card ? Math.max(total, card.memory_bytes) : total;
  let x = 0, svg = `<svg class="bar" viewBox="0 0 ${width} 34" width="100%" height="34" preserveAspectRatio="xMinYMid meet" role="img" aria-label="${esc(label)}">`;
  for (const [name, b] of parts) {
    const w = scale ? (b / scale) * width : 0;
    svg += `<rect x="${x}" y="2" width="${w}" height="30" fill="${CATEGORY_COLOR[name]}"><title>${name}: ${b} B (${gib(b)})</title></rect>`;
    x += w;
  }
  if (card) {
    const at = Math.min(width - 2, (card.memory_bytes / scale) * width);
    svg += `<line class="capacity" x1="${at}" x2="${at}" y1="0" y2="34" stroke="#000" stroke-width="3" stroke-dasharray="4 2">` +
           `<title>${card.name}: ${card.memory_bytes} B (${gib(card.memory_bytes)})</title></line>`;
  }
  return svg + "</svg>";
}

// The headline is the device's peak (a GPU's memory; the CPU's RAM on --device cpu): peak_at.device, the
// dry run's printed total. The categories count every place; each place gets its own bar, all on one scale.
function showPeak(pred, card, infer) {
  const cats = Object.keys(CATEGORY_COLOR).filter((c) => pred.peak[c] > 0), device = pred.peak_at.device;
  const where = $("f-device").value === "cuda" ? "the GPU's" : "the device's (the CPU's RAM)";
  $("peak-total").textContent = device;
  $("peak-gib").textContent = gib(device);
  $("peak-where").textContent = where + " peak, a rank's";
  $("serving").hidden = !infer;
  if (infer) {  // --infer: serving's bytes first (the weights in the run's dtype and the KV cache); training's below
    $("serve-total").textContent = infer.serving_bytes;
    $("serve-gib").textContent = gib(infer.serving_bytes);
    $("serve-what").textContent = `serving: the ${infer.format} weights (${gib(infer.weights_bytes[infer.format])}) and the ` +
      `KV cache (${gib(infer.kv_cache_bytes)}); int8 ${gib(infer.weights_bytes.int8)}, int4 ${gib(infer.weights_bytes.int4)} ` +
      "of weights (the table under 'against the published formulas'); training's peak below";
  }
  // the device at its peak: every category as after init, the activations at their highest
  const init = pred["after init"].at.device;
  const onDevice = cats.map((c) => [c, c === "activations" ? pred.peak[c] : init[c] || 0]).filter(([, b]) => b > 0);
  $("peak-bar").innerHTML = stackedBar(onDevice, device, 800, "the device's peak by category", card);
  $("card").textContent = card ? `the dashed line: one ${card.name}, ${gib(card.memory_bytes)}; the peak ` +
    (card.fits ? `leaves ${gib(card.memory_bytes - device)}` : `is ${gib(device - card.memory_bytes)} over`) : "";
  $("card").dataset.fits = card ? String(card.fits) : "";
  let rows = "";  // every category (the ones at 0 B faint), side by side
  for (const c of Object.keys(CATEGORY_COLOR))
    rows += `<span class="cat${pred.peak[c] ? "" : " zero"}"><span class="swatch" style="background:${CATEGORY_COLOR[c]}"></span>${c} ` +
            `<span class="num" title="${pred.peak[c]} B" data-cat="${c}" data-bytes="${pred.peak[c]}">${gib(pred.peak[c])}</span></span>`;
  $("peak-table").innerHTML = rows;
  // by place, when something is off the device: each place's categories in the phase where it is highest, one scale
  const places = Object.keys(pred.peak_at).filter((l) => pred.peak_at[l] > 0);
  const scale = Math.max(...Object.values(pred.peak_at));
  let html = "";
  if (places.length > 1 || places[0] !== "device") {
    for (const l of Object.keys(pred.peak_at)) {
      const at = PHASES.filter((p) => pred[p] && pred[p].at && pred[p].at[l])
                       .sort((p, q) => pred[q].at[l].total - pred[p].at[l].total)[0];
      const b = at ? pred[at].at[l] : null;
      html += `<div class="place"><b>${l}</b>: <span class="num" title="${pred.peak_at[l]} B" data-at="${l}" data-bytes="${pred.peak_at[l]}">${gib(pred.peak_at[l])}</span>` +
              (b ? `, at its highest ${at}` + stackedBar(Object.keys(CATEGORY_COLOR).filter((c) => b[c] > 0).map((c) => [c, b[c]]),
                                                         scale, 800, l) : "") + "</div>";
    }
  }
  $("places").innerHTML = html;
  $("peak-note").textContent = html ? "the headline and its bar are the device's; the table counts every place, each place's own below (one scale)" : "";
}

// The timeline: the device's predicted total after every push, pop and drop of one step (--mem-timeline),
// forward and backward shaded. The timeline's totals count every place; what is off the device (--offload's
// host and disk) holds still all step, so it is the dry run's total less the device's, taken off each point.
function showTimeline(csv, pred) {
  if (!csv) { $("timeline").innerHTML = '<p class="note">--eval-only runs no training step: no timeline.</p>'; return; }
  const lines = csv.trim().split("\n"), head = lines[0].split(","), rows = lines.slice(1).map((l) => l.split(","));
  const init = pred["after init"], device = init.at && init.at.device ? init.at.device.total : init.total;
  const off = init.total - device;
  const col = (n) => head.indexOf(n), tot = rows.map((r) => +r[col("predicted_total")] - off);
  // the y axis spans the step's own range (from its lowest total), so a swing of a few GiB on tens is not flat
  const W = 800, H = 220, max = Math.max(...tot), lo = Math.min(...tot), n = rows.length, span = Math.max(1, max - lo);
  const X = (i) => 70 + (i / Math.max(1, n - 1)) * (W - 80), Y = (b) => H - 20 - ((b - lo) / span) * (H - 40);
  let svg = `<svg viewBox="0 0 ${W} ${H}" width="100%" role="img" aria-label="the step's memory over time">`;
  let start = 0;
  for (let i = 1; i <= n; i++) {  // the parts of the step, shaded: forward light, backward darker
    const part = (r) => (/backward/.test(r[col("where")]) ? "backward" : "forward");
    if (i === n || part(rows[i]) !== part(rows[start])) {
      const p = part(rows[start]);
      svg += `<rect x="${X(start)}" y="10" width="${Math.max(1, X(i - 1) - X(start))}" height="${H - 30}" class="${p}"><title>${p}</title></rect>`;
      start = i;
    }
  }
  const pts = [], k = Math.ceil(n / W);  // at most a lowest and a highest point a pixel's column
  for (let i = 0; i < n; i += k) {
    const part = tot.slice(i, i + k), lo = Math.min(...part), hi = Math.max(...part);
    const first = part.indexOf(lo) < part.indexOf(hi) ? lo : hi;
    pts.push(X(i) + "," + Y(first), X(i) + "," + Y(first === lo ? hi : lo));
  }
  svg += `<polyline fill="none" stroke="#e15759" stroke-width="1.5" points="${pts.join(" ")}"/>`;
  const peak = tot.indexOf(max);
  svg += `<circle cx="${X(peak)}" cy="${Y(max)}" r="4" fill="#333"><title>${rows[peak][col("op")]} ${rows[peak][col("tensor")]}, ${rows[peak][col("where")]}: ${max} B</title></circle>`;
  const right = X(peak) > W / 2;  // the label on the side with room
  svg += `<text x="${X(peak) + (right ? -6 : 6)}" y="${Y(max) + 4}" text-anchor="${right ? "end" : "start"}" class="small">` +
         `${gib(max)}: ${esc(rows[peak][col("op")] + " " + rows[peak][col("tensor")] + ", " + rows[peak][col("where")])}</text>`;
  svg += `<text x="66" y="${Y(max) + 4}" text-anchor="end" class="small">${(max / GiB).toFixed(2)} GiB</text>` +
         `<text x="66" y="${Y(lo)}" text-anchor="end" class="small">${(lo / GiB).toFixed(2)} GiB</text>`;
  svg += `<text x="0" y="${H - 5}" class="small">event 0</text><text x="${W - 80}" y="${H - 5}" class="small">event ${n - 1}</text></svg>`;
  const apart = off ? `; the device's total, the ${gib(off)} held off it (--offload's host and disk) apart, the same all step` : "";
  $("timeline").innerHTML = svg + `<p class="note">${n} pushes, pops and drops; forward <span class="key forward"></span>, backward <span class="key backward"></span>; the highest total ${max} B${apart}.</p>`;
}

// The lecture's ladder for this setting: from it with none of the memory flags (fp32, nothing rebuilt, no
// sharding, no offload), one flag of the setting's own more a rung, in the lecture's order, up to the
// setting itself (its peak is the headline); then the lecture's flags it does not have yet, one more a rung.
const LADDER = [["--dtype", "bf16"], ["--flash"], ["--ckpt"], ["--recompute", null], ["--fused-ce"], ["--adam-bits", "8"],
                ["--zero", "3"], ["--offload", "opt"]];
const TAKES = { "--dtype": 1, "--recompute": 1, "--adam-bits": 1, "--zero": 1, "--offload": 1, "--offload-to": 1, "--shard-group": 1 };
// a flag that goes with another's rung
const WITH = { "--dtype": ["--fp32-grads"], "--zero": ["--shard-group"], "--offload": ["--offload-to"] };

function ladderRungs(args, card) {
  const own = {}, base = [];
  for (let i = 0; i < args.length; i++) {
    const f = args[i], known = LADDER.some(([g]) => g === f) || Object.values(WITH).some((w) => w.includes(f));
    if (f === "--quantize") { i++; continue; }  // inference's flags: the ladder is training's
    if (f === "--infer" || f === "--eval-only") continue;
    if (!known) { base.push(f); continue; }
    own[f] = TAKES[f] ? args[++i] : true;
  }
  const flag = (f, v) => (v === true || v === undefined ? [f] : [f, v]);
  const ranks = +$("f-ranks").value || 1, rungs = [["fp32, nothing on", base.slice(), false]];
  let flags = [];
  for (const [f] of LADDER) {  // the setting's own flags
    if (!(f in own)) continue;
    flags = flags.concat(flag(f, own[f]));
    for (const w of WITH[f] || []) if (w in own) flags = flags.concat(flag(w, own[w]));
    rungs.push(["+ " + flag(f, own[f]).join(" "), base.concat(flags), false]);
  }
  rungs[rungs.length - 1][2] = true;  // this setting
  for (let [f, v] of LADDER) {  // and what it does not have yet, in the same order (16 bits: fp16 on a card without bf16)
    if (f === "--dtype" && card && !card.bf16) v = "fp16";
    if (f in own || v === null || (f === "--zero" && ranks < 2) || (f === "--ckpt" && "--recompute" in own)) continue;
    if (f === "--adam-bits" || (f === "--offload" && $("f-device").value !== "cuda" && !("--zero" in own))) continue;
    flags = flags.concat(flag(f, v));
    rungs.push(["+ " + flag(f, v).join(" ") + " (not on)", base.concat(flags), false]);
  }
  return rungs;
}

function showLadder(args, card) {
  let rows = "", first = 0;
  for (const [name, a, self] of ladderRungs(args, card)) {
    const r = run(a.concat(["--dry-run", "--mem-json", "rung.json"]));
    if (r.code !== 0) { rows += `<tr><td>${esc(name)}</td><td colspan="5" class="err">${esc(r.stderr.trim())}</td></tr>`; continue; }
    const d = JSON.parse(r.files["rung.json"]), p = d.predicted, peak = p.peak_at.device, c = d.cost;
    first = first || peak;
    rows += `<tr class="${self ? "self" : ""}"><td><code>${esc(name)}</code>${self ? " <b>= this setting</b>" : ""}</td>` +
            `<td class="num" title="${peak} B" data-rung="${esc(a.join(" "))}" data-bytes="${peak}"${self ? ' data-self="1"' : ""}>${gib(peak)}</td>` +
            `<td>${stackedBar(Object.keys(CATEGORY_COLOR).filter((k) => p.peak[k] > 0).map((k) => [k, p.peak[k]]), first, 400, name, card)}</td>` +
            `<td class="num">${(100 * c.extra_flops).toFixed(1)}%</td><td class="num">${(c.rebuilt_bytes / MiB).toFixed(1)} MiB</td>` +
            `<td class="num">${(c.comm_bytes / MiB).toFixed(1)} MiB</td></tr>`;
  }
  $("ladder").innerHTML = rows;
}

// Memory against the sequence length (the articles' chart): the device's peak of this setting at each length
// from 256 up to the model's maxT, each a dry run; the card's memory as a line; DeepSpeed's largest layer beside.
function showLengths(args, card, stdout, largest) {
  const maxT = +(stdout.match(/ maxT (\d+)/) || [0, 1024])[1], lengths = [];
  for (let t = 256; t <= maxT && lengths.length < 10; t *= 2) lengths.push(t);  // (256 .. 128K: Llama 3.1's 131072)
  if (lengths[lengths.length - 1] !== maxT && maxT > 256) lengths.push(maxT);
  const base = [];
  for (let i = 0; i < args.length; i++) { if (args[i] === "--seq-len") { i++; continue; } base.push(args[i]); }
  const pts = [];
  for (const t of lengths) {
    const r = run(base.concat(["--seq-len", String(t), "--dry-run", "--mem-json", "len.json"]));
    if (r.code === 0) pts.push([t, JSON.parse(r.files["len.json"]).predicted.peak_at.device]);
  }
  if (!pts.length) { $("lengths").innerHTML = ""; return; }
  const W = 800, H = 200, top = Math.max(...pts.map((p) => p[1]), card ? card.memory_bytes : 0);
  const X = (i) => 60 + (i / Math.max(1, pts.length - 1)) * (W - 90), Y = (b) => H - 24 - (b / top) * (H - 40);
  let svg = `<svg viewBox="0 0 ${W} ${H}" width="100%" role="img" aria-label="memory against the sequence length">`;
  svg += `<polyline fill="none" stroke="#e15759" stroke-width="2" points="${pts.map((p, i) => X(i) + "," + Y(p[1])).join(" ")}"/>`;
  pts.forEach((p, i) => {
    svg += `<circle cx="${X(i)}" cy="${Y(p[1])}" r="4" fill="#e15759" data-len="${p[0]}" data-bytes="${p[1]}"><title>--seq-len ${p[0]}: ${p[1]} B</title></circle>` +
           `<text x="${X(i)}" y="${H - 6}" text-anchor="middle" class="small">${p[0]}</text>` +
           `<text x="${X(i)}" y="${Y(p[1]) - 8}" text-anchor="middle" class="small">${gib(p[1])}</text>`;
  });
  if (card) svg += `<line x1="50" x2="${W - 20}" y1="${Y(card.memory_bytes)}" y2="${Y(card.memory_bytes)}" stroke="#000" stroke-dasharray="6 3"/>` +
                   `<text x="${W - 20}" y="${Y(card.memory_bytes) - 4}" text-anchor="end" class="small">${card.name}: ${gib(card.memory_bytes)}</text>`;
  $("lengths").innerHTML = svg + "</svg>" + `<p class="note">the device's peak at each --seq-len (the setting's own batch); the largest ` +
    `layer, DeepSpeed's 4L term: ${largest} parameters, ${gib(4 * largest)} in fp32</p>`;
}

// What the calculators people quote say for this setting (--mem-json's "estimators", --estimators' lines),
// beside the device's peak: DeepSpeed's, accelerate's, Megatron-LM's, each by its own formula.
function showEstimators(mem) {
  const list = mem.estimators || [];
  let rows = "";
  for (const e of list)
    rows += `<tr class="${e.this_run ? "self" : ""}"><td>${esc(e.source)}</td><td>${esc(e.setting)}${e.this_run ? " <b>*</b>" : ""}</td>` +
            `<td class="num" data-est="${esc(e.source + " / " + e.setting)}" data-bytes="${e.gpu_bytes}" title="${e.gpu_bytes} B">${gib(e.gpu_bytes)}</td>` +
            `<td class="num">${e.cpu_bytes >= 0 ? gib(e.cpu_bytes) : "-"}</td></tr>`;
  rows += `<tr><td>gptmem (this page's headline)</td><td>everything, activations too</td><td class="num">${gib(mem.predicted.peak_at.device)}</td>` +
          `<td class="num" data-est-cpu="${mem.machine_host_bytes}">${gib(mem.machine_host_bytes)}</td></tr>`;  // (the machine's: every rank's)
  $("estimators").innerHTML = rows;
}

// The binary's own comparisons with the published formulas: the ZeRO paper's (2+2+K)Psi/N against
// the model states, Korthikanti et al.'s activations against the saved tensors (--mem-ops: flash's
// O(T) in the att row), the inference table (--infer).
function showFormulas(stdout) {
  const from = stdout.indexOf("the ZeRO paper against this run"), ops = stdout.indexOf("one block's saved tensors");
  const parts = [];
  if (from >= 0) parts.push(stdout.slice(from, ops >= 0 ? ops : undefined).trimEnd());
  if (ops >= 0) parts.push(stdout.slice(ops).trimEnd());
  const inf = stdout.indexOf("inference: the weights");
  if (inf >= 0 && from < 0) parts.push(stdout.slice(inf).trimEnd());
  $("formulas").textContent = parts.join("\n\n") || "(--device cuda: the dry run compares the CPU's states and stack with the papers; pick --device cpu)";
}

function showFit(base) {
  const budget = $("fit-budget").value.trim();
  if (!budget) { $("fit").textContent = "(type a budget, like 80GiB)"; $("fit-cmd").textContent = ""; return; }
  const a = base.concat(["--fit", budget]);  // the host and the disk of the machine in mind (the page has none of its own)
  if ($("f-device").value === "cuda") a.push("--fit-host", $("fit-host").value.trim() || "512GiB");
  a.push("--fit-disk", $("fit-disk").value.trim() || "2TB");
  const r = run(a);
  $("fit-cmd").textContent = commandLine(a);
  $("fit").textContent = (r.stdout + r.stderr).trim();
}

// One change: the dry run of the settings, then each view (gptmem.lastMs: their time), then --fit's
// table (gptmem.fitMs), which searches hundreds of settings: after the views are drawn when a
// control changed (later), at once when the test asks (gptmem.update()).
let fitPending = 0;
function update(later) {
  const t0 = performance.now(), args = settingsArgs(), cpu = $("f-device").value !== "cuda";
  const train = !$("f-eval-only").checked;  // (--mem-ops shows the CPU's stack; --mem-timeline either device's)
  const extra = ["--dry-run", "--mem-json", "mem.json"].concat(train ? (cpu ? ["--mem-ops"] : []).concat(["--mem-timeline", "timeline.csv"]) : []);
  const r = run(args.concat(extra));
  $("cmd").textContent = commandLine(args.concat(["--dry-run"]));
  $("cmd-full").textContent = commandLine(args.concat(extra));
  try { history.replaceState(null, "", "#" + args.join(" ")); } catch (e) { /* an address the browser keeps as it is */ }
  $("error").textContent = r.code ? r.stderr.trim() : "";
  $("error").hidden = !r.code;
  $("views").hidden = !!r.code;
  if (!r.code) {
    const mem = JSON.parse(r.files["mem.json"]), pred = mem.predicted;
    showPeak(pred, mem.gpu && mem.gpu.name ? mem.gpu : null, mem.inference || null);
    showEstimators(mem);
    $("dryrun").textContent = r.stdout;
    showTimeline(r.files["timeline.csv"], pred);
    showFormulas(r.stdout);
    showLadder(args, mem.gpu && mem.gpu.name ? mem.gpu : null);
    showLengths(args, mem.gpu && mem.gpu.name ? mem.gpu : null, r.stdout, mem.largest_layer_params || 0);
  }
  window.gptmem.lastMs = performance.now() - t0;
  const fit = () => {
    const t1 = performance.now();
    if (!r.code) showFit(args);
    window.gptmem.fitMs = performance.now() - t1;
    $("timing").textContent = `updated in ${window.gptmem.lastMs.toFixed(1)} ms; --fit's table ${window.gptmem.fitMs.toFixed(1)} ms after`;
  };
  clearTimeout(fitPending);
  if (later === true) fitPending = setTimeout(fit, 0);
  else fit();
}

function presetsFromHelp() {  // the model presets, as ./train --help lists them
  const help = run(["--help"]).stdout, list = [];
  const from = help.indexOf("model presets:");
  for (const line of help.slice(from).split("\n").slice(1)) {
    const m = line.match(/^  (\S+)\s+(L\d+ .*?)  (.*)$/);
    if (!m) break;
    list.push([m[1], m[2] + "  " + m[3]]);
  }
  return list;
}

function start() {
  const t0 = performance.now();
  wasmModule = new WebAssembly.Module(Uint8Array.from(atob(TRAIN_WASM), (c) => c.charCodeAt(0)));
  $("f-model").innerHTML = presetsFromHelp().map(([n, d]) => `<option value="${n}" title="${esc(d)}">${n}</option>`).join("");
  for (const id of SELECT_FLAGS) $("f-" + id).dataset.default = $("f-" + id).dataset.default || $("f-" + id).options[0].value;
  $("f-model").dataset.default = "small";
  $("f-model").value = "small";
  const hash = decodeURIComponent(location.hash.replace(/^#/, "")).trim();
  // the lecture path's running example on a GPU (doc/README.md, step 0's second table: the bytes a GPU
  // lecture shows, no fp32 working copies to explain away), unless the address names settings
  setArgs(hash ? hash.split(/\s+/) : ["--model", "gpt2", "--device", "cuda", "--batch", "8", "--seq-len", "1024"]);
  for (const el of document.querySelectorAll("#controls input, #controls select, #fit-controls input"))
    el.addEventListener(el.tagName === "SELECT" || el.type === "checkbox" ? "change" : "input",
                        () => update(!el.id.startsWith("fit-")));
  $("copy").addEventListener("click", () => navigator.clipboard && navigator.clipboard.writeText($("cmd").textContent));
  window.addEventListener("hashchange", () => {  // a link to a setting, followed in an open tab
    const h = decodeURIComponent(location.hash.replace(/^#/, "")).trim();
    if (h !== settingsArgs().join(" ")) { setArgs(h ? h.split(/\s+/) : []); update(); }
  });
  update();
  window.gptmem.loadMs = performance.now() - t0;
}

window.gptmem = { run: (args) => run(args), settingsArgs, setArgs, update: () => update(false), loadMs: 0, lastMs: 0, fitMs: 0 };
window.addEventListener("DOMContentLoaded", start);
