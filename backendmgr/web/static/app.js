// backendmgr's page: plain DOM, text set with textContent only (never markup from the server).
"use strict";

const state = { rows: [], kinds: new Set(["custom"]), settings: {}, jobs: new Map(), said: new Map() };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "onclick" || key === "onchange") node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else if (key in node && typeof value !== "string") node[key] = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  let data = null;
  try { data = await response.json(); } catch (e) { data = null; }
  if (!response.ok) {
    throw new Error((data && data.error) || `${response.status} ${response.statusText}`);
  }
  return data;
}

function table(headers, rows, empty) {
  if (!rows.length) return el("p", { class: "muted" }, empty);
  return el("table", {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows));
}

// What an action said, by the key of the place it was taken: a refresh rebuilds the rows, and
// the rebuilt place shows the message again.
function note(key, tag = "div") {
  const node = el(tag, { class: "muted", "data-note": key });
  const said = state.said.get(key);
  if (said) show(node, said);
  return node;
}

function show(node, said) {
  node.textContent = said.text;
  node.className = said.cls;
  for (const w of said.warnings || []) node.append(el("div", { class: "warn" }, "warning: " + w));
}

function busy(key) {
  const said = state.said.get(key);
  return Boolean(said && said.busy);
}

// Put `said` where `where` is now (a refresh may have replaced it) and keep it under its key.
function say(where, said) {
  const key = where.dataset.note;
  if (key) state.said.set(key, said);
  const now = key ? document.querySelector(`[data-note="${CSS.escape(key)}"]`) : null;
  show(now || where, said);
}

// One action's message at a time: what earlier actions said is cleared when another starts
// (a check still running keeps its "…").
function forgetOthers(key) {
  for (const [k, said] of [...state.said]) {
    if (k === key || said.busy) continue;
    state.said.delete(k);
    const node = document.querySelector(`[data-note="${CSS.escape(k)}"]`);
    if (node) show(node, { text: "", cls: "muted" });
  }
}

// Run an action; its message or error is shown in `where` (the place the action was taken).
// opts.done: where a success is shown instead (a removed row's own place goes with it);
// opts.refresh: false to leave the page as it is. The action may answer {message, warnings,
// failed}: failed shows the message as an error (a check that ran and said no).
async function act(where, action, opts = {}) {
  forgetOthers(where.dataset.note);
  say(where, { text: "…", cls: "muted", busy: true });
  try {
    const result = await action();
    const said = {
      text: (result && result.message) || "done",
      cls: result && result.failed ? "error" : "ok",
      warnings: (result && result.warnings) || [],
    };
    if (opts.done) {
      say(where, { text: "", cls: "muted" });
      say(opts.done, said);
    } else {
      say(where, said);
    }
    if (opts.refresh !== false) await refresh();
  } catch (err) {
    say(where, { text: "error: " + err.message, cls: "error" });
  }
}

function section(id) {
  return document.querySelector(`#${id} .body`);
}

function fill(id, ...nodes) {
  section(id).replaceChildren(...nodes);
}

function formatSize(n) {
  if (n === null || n === undefined) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

// --- components and install jobs ---------------------------------------------------------

function renderComponents(catalog) {
  const jobsBox = document.getElementById("jobs") || el("div", { id: "jobs" });
  const rows = catalog.map((c) => {
    state.kinds.add(c.kind);
    const here = c.variants.filter((v) => v.available).map((v) => v.id);
    const variant = el("select", { name: "variant", "aria-label": `variant of ${c.id}` },
      here.map((v) => el("option", { value: v, selected: v === c.suggested }, v)));
    const versions = el("datalist", { id: `versions-${c.id}` });
    const version = el("input", { name: "version", placeholder: "latest", size: 10, list: versions.id, "aria-label": `version of ${c.id}` });
    version.addEventListener("focus", () => loadVersions(c.id, variant.value, versions), { once: true });
    const said = note(`install:${c.id}`);
    const button = el("button", {
      type: "button", "data-install": c.id,
      onclick: () => startInstall(c.id, version.value.trim() || null, variant.value || null, said),
    }, "Install");
    return el("tr", { "data-component": c.id },
      el("td", {}, c.id, el("div", { class: "muted" }, c.source)),
      el("td", {}, here.join(", ") || "-"),
      el("td", {}, c.suggested || "-", el("div", { class: "muted" }, c.why)),
      el("td", {}, c.activated || "-"),
      el("td", {}, el("span", { class: "inline" }, version, versions, variant, button), said));
  });
  fill("components", jobsBox,
    table(["component", "variants here", "suggested", "activated", "install"], rows, "no components"));
}

// The recent releases that ship this variant here, offered as the version field's choices.
async function loadVersions(component, variant, list) {
  try {
    const query = variant ? `?variant=${encodeURIComponent(variant)}` : "";
    const releases = await api("GET", `/api/releases/${encodeURIComponent(component)}${query}`);
    list.replaceChildren(...releases.map((r) => el("option", { value: r.tag },
      r.installed.length ? `${r.tag} (installed: ${r.installed.join(", ")})` : r.tag)));
  } catch (err) {
    list.replaceChildren();  // offline or no listing: the field still takes a typed version
  }
}

async function startInstall(component, version, variant, where) {
  say(where, { text: "", cls: "muted" });
  let job;
  try {
    job = await api("POST", "/api/builds", { component, version, variant });
  } catch (err) {
    say(where, { text: "error: " + err.message, cls: "error" });
    return;
  }
  watchJob(job, `${component} ${version || "latest"} ${variant || ""}`.trim());
}

function watchJob(job, label) {
  const bar = el("progress", { max: 100, value: 0, "data-job": job.id });
  const text = el("span", { class: "muted", "data-job-text": job.id }, "starting…");
  const cancel = el("button", { type: "button", onclick: () => api("DELETE", `/api/jobs/${job.id}`).catch(() => {}) }, "Cancel");
  const box = el("div", { class: "job", "data-job-box": job.id }, el("span", { class: "inline" }, label, bar, cancel), " ", text);
  document.getElementById("jobs").append(box);
  const source = new EventSource(`/api/jobs/${job.id}/events`);
  const finish = () => { source.close(); cancel.disabled = true; state.jobs.delete(job.id); };
  state.jobs.set(job.id, source);
  const progress = (ev) => {
    const e = JSON.parse(ev.data);
    if (e.phase === "downloading" && e.total) {
      bar.value = Math.min(100, Math.floor((100 * e.bytes) / e.total));
      const rate = e.rate ? `, ${formatSize(e.rate)}/s` : "";
      text.textContent = e.message || `downloading ${e.asset}: ${formatSize(e.bytes)} of ${formatSize(e.total)}${rate}`;
    } else {
      text.textContent = e.message || e.phase + "…";
    }
  };
  for (const phase of ["resolving", "downloading", "verifying", "extracting", "committing", "registering"]) {
    source.addEventListener(phase, progress);
  }
  source.addEventListener("done", (ev) => {
    const e = JSON.parse(ev.data);
    bar.value = 100;
    text.textContent = e.message + " (100 %)";
    text.className = "ok";
    finish();
    refresh();
  });
  source.addEventListener("failed", (ev) => {
    text.textContent = "error: " + JSON.parse(ev.data).error;
    text.className = "error";
    finish();
  });
  source.addEventListener("cancelled", () => {
    text.textContent = "cancelled";
    text.className = "warn";
    finish();
    refresh();
  });
}

// --- builds, registry ----------------------------------------------------------------------

function renderBuilds(builds) {
  state.builds = builds;
  const rows = builds.map((b) => {
    const here = note(`build:${b.id}`);
    const path = `/api/builds/${encodeURIComponent(b.id)}`;
    return el("tr", { "data-build": b.id },
      el("td", {}, b.id),
      el("td", {}, b.activated ? "yes" : ""),
      el("td", {}, b.pinned_by.join(", ")),
      el("td", { class: "num" }, formatSize(b.size_bytes)),
      el("td", { class: "actions" },
        el("span", { class: "inline" },
          el("button", { type: "button", disabled: b.activated, "data-activate": b.id,
            onclick: () => act(here, () => api("POST", `${path}/activate`, {})) }, "Activate"),
          el("button", { type: "button", "data-uninstall": b.id,
            onclick: () => act(here, () => api("DELETE", path), { done: document.querySelector('[data-note="builds"]') }) }, "Uninstall")),
        here));
  });
  fill("builds", table(["build", "activated", "pinned by", "size", ""], rows,
    "no builds installed; install one above"), note("builds"));
}

function renderBackends(rows) {
  state.rows = rows;
  for (const r of rows) state.kinds.add(r.kind);
  const body = rows.map((r) => {
    const here = note(`row:${r.id}`);
    const path = `/api/backends/${encodeURIComponent(r.id)}`;
    // ★ is for rows whose kind serves a class; builds are activated or pinned, never ★
    const star = r.default || r.build || !r.classes.length ? null : el("button", {
      type: "button", "data-default": r.id,
      onclick: () => act(here, () => api("POST", `${path}/default`, {})) }, "Make ★");
    const remove = r.build || r.managed ? null : el("button", {
      type: "button", "data-remove": r.id,
      onclick: () => act(here, () => api("DELETE", path), { done: document.querySelector('[data-note="registry"]') }) }, "Remove");
    return el("tr", { "data-row": r.id },
      el("td", { class: "star", title: r.default ? "default for its classes" : null }, r.default ? "★" : ""),
      el("td", {}, r.id, r.name ? el("div", { class: "muted" }, r.name) : null),
      el("td", {}, r.kind),
      el("td", {}, r.classes.join(", ") || "-"),
      el("td", {}, r.build ? "build" : r.managed ? "managed" : "manual"),
      el("td", { class: "path" }, r.path),
      el("td", { class: "actions" }, el("span", { class: "inline" }, star, remove), here));
  });
  fill("backends", table(["★", "id", "kind", "classes", "row", "path", ""], body,
    "the registry is empty"), note("registry"));
}

// The form that appends a manual row: built once, so a refresh keeps what is typed in it.
function addRowForm() {
  const field = (label, input) => el("label", {}, el("span", { class: "muted" }, label), input);
  const id = el("input", { name: "id", required: true, size: 14, placeholder: "my-llama", autocomplete: "off" });
  const kind = el("select", { name: "kind" });
  const path = el("input", { name: "path", required: true, size: 40, placeholder: "/path/to/llama-server", autocomplete: "off" });
  const name = el("input", { name: "name", size: 14, placeholder: "optional", autocomplete: "off" });
  const star = el("input", { type: "checkbox", name: "default" });
  const force = el("input", { type: "checkbox", name: "force" });
  const said = note("add-row");
  const form = el("form", { id: "add-row", class: "add-row" },
    el("span", { class: "label" }, "Add a row"),
    field("id", id), field("kind", kind), field("path", path), field("name", name),
    el("label", { class: "check" }, star, "make ★"),
    el("label", { class: "check", title: "keep a path that is missing or not executable" }, force, "--force"),
    el("button", { type: "submit" }, "Add"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    act(said, async () => {
      const result = await api("POST", "/api/backends", {
        id: id.value.trim(), kind: kind.value, path: path.value.trim(), name: name.value.trim(),
        default: star.checked, force: force.checked,
      });
      for (const input of [id, path, name]) input.value = "";
      star.checked = force.checked = false;
      return result;
    });
  });
  return el("div", { class: "add" }, form, said);
}

// The kinds offered: those of the catalog's components and of the rows, and "custom".
function renderKinds() {
  const select = document.querySelector('#add-row select[name="kind"]');
  const chosen = select.value || (state.kinds.has("llama") ? "llama" : "");
  select.replaceChildren(...[...state.kinds].sort().map((k) => el("option", { value: k, selected: k === chosen }, k)));
}

// --- models --------------------------------------------------------------------------------

function verifyLine(r) {
  if (!r.ok) return { message: `failed: ${r.reason}`, failed: true };
  const parts = [`ok in ${r.ready_s.toFixed(1)} s`];
  if (r.gpu_gib !== null && r.gpu_gib !== undefined) parts.push(`${r.gpu_gib.toFixed(2)} GiB used`);
  if (r.est_vram_gb !== null && r.est_vram_gb !== undefined) parts.push(`${r.est_vram_gb.toFixed(2)} GiB estimated`);
  return { message: parts.join(", ") };
}

// Verify runs as a job: start it, then follow its events where the button is.
async function startVerify(id, where) {
  forgetOthers(where.dataset.note);
  say(where, { text: "…", cls: "muted", busy: true });
  let job;
  try {
    job = await api("POST", "/api/verify", { models: [id] });
  } catch (err) {
    say(where, { text: "error: " + err.message, cls: "error" });
    refresh();
    return;
  }
  watchVerify(job, where);
}

// Follow a job's events where its action was taken: progress(e) and done(e) say what to
// show there; a failure or a cancel is shown in the CLI's words.
function followJob(job, where, progress, done) {
  const source = new EventSource(`/api/jobs/${job.id}/events`);
  state.jobs.set(job.id, source);
  const end = (said) => {
    source.close();
    state.jobs.delete(job.id);
    say(where, said);
    refresh();
  };
  source.addEventListener("verifying", (ev) => say(where, { ...progress(JSON.parse(ev.data)), cls: "muted", busy: true }));
  source.addEventListener("done", (ev) => end(done(JSON.parse(ev.data))));
  source.addEventListener("failed", (ev) => end({ text: "error: " + JSON.parse(ev.data).error, cls: "error" }));
  source.addEventListener("cancelled", () => end({ text: "cancelled", cls: "warn" }));
}

function watchVerify(job, where) {
  followJob(job, where, (e) => ({ text: `starting ${e.asset}…` }), (e) => {
    const r = e.results[0];
    const line = r ? verifyLine(r) : { message: "nothing to verify" };
    return { text: line.message, cls: line.failed ? "error" : "ok" };
  });
}

function renderModels(models) {
  state.models = models;
  const rows = models.map((m) => {
    const here = note(`model:${m.id}`);
    const checked = note(`verify:${m.id}`);
    const path = `/api/models/${encodeURIComponent(m.id)}`;
    const current = (state.settings[m.id] || {});
    const pin = el("select", { "data-pin": m.id, "aria-label": `pin ${m.id}`,
      onchange: () => act(here, () => pin.value
        ? api("POST", `${path}/pin`, { row: pin.value })
        : api("POST", `${path}/unpin`, {})) },
      el("option", { value: "" }, "(class default)"),
      state.rows.map((r) => el("option", { value: r.id, selected: current.backend === r.id }, r.id)));
    const settings = Object.entries(current).filter(([k, v]) => k !== "backend" && v !== null).map(([k, v]) =>
      el("span", { class: "inline" }, `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`,
        el("button", { type: "button", title: `unset ${k}`,
          onclick: () => act(here, () => api("POST", `${path}/unset`, { keys: [k] })) }, "×")));
    const input = el("input", { placeholder: "ctx=8192", size: 10, "data-set": m.id, "aria-label": `setting for ${m.id}` });
    const set = el("button", { type: "button", onclick: () => {
      const [key, ...rest] = input.value.split("=");
      act(here, () => {
        if (!rest.length) return Promise.reject(new Error(`"${input.value}" is not KEY=VALUE`));
        return api("POST", `${path}/set`, { values: { [key.trim()]: rest.join("=") } });
      });
    } }, "Set");
    const verify = m.skipped ? null : el("button", { type: "button", "data-verify": m.id,
      disabled: busy(`verify:${m.id}`),
      title: "start the model's command once, send one request, stop it",
      onclick: (ev) => {
        ev.target.disabled = true;
        startVerify(m.id, checked);
      } }, "Verify");
    const last = m.verified;
    const verification = el("span", { "data-verification": m.id,
      class: !last ? "muted" : last.ok ? "ok" : "error" }, m.verification || "not verified");
    // issue 32: the last `bench` figures per build (tokens per second, medians)
    const benched = el("div", { class: "muted", "data-bench": m.id },
      ...(m.bench || []).map((f) => el("div", {}, `${f.build}: prompt ${f.prompt_per_second ?? "?"} t/s, ` +
        `generation ${f.predicted_per_second} t/s (median of ${f.runs})`)));
    const backend = m.skipped ? "-" : (m.backend && (m.backend.id || m.backend.path)) || "-";
    // the context sentence (issue 33) once, in the words "backendmgr models" uses
    const sized = m.tuning && !m.notes.includes(m.tuning) ? [m.tuning] : [];
    const why = m.skipped ? `skipped: ${m.skipped}` : [m.backend ? m.backend.reason : "", ...m.notes, ...sized].filter(Boolean).join("; ");
    const size = m.size_gb !== null ? `, ${m.size_gb.toFixed(2)} GiB` : "";
    return el("tr", { "data-model": m.id },
      el("td", { class: "id" }, m.id, el("div", { class: "muted" }, `${m.format}${size}`)),
      el("td", {}, m.class || "-"),
      el("td", { "data-backend": m.id }, backend),
      el("td", {}, why),
      el("td", {}, pin),
      el("td", {}, settings, el("span", { class: "inline" }, input, set), here),
      el("td", {}, el("span", { class: "inline" }, verify, verification), checked, benched));
  });
  fill("models", table(["model", "class", "backend", "why", "pin", "settings", "verified"], rows,
    "no models found in models_dirs"));
}

// --- canary (issue 32) ------------------------------------------------------------------------

// The canary form: built once (a refresh keeps what is chosen), its choices refreshed.
function canaryForm() {
  const build = el("select", { name: "build", "aria-label": "build to try" });
  const models = el("span", { class: "inline", "data-canary-models": "" });
  const tolerance = el("input", { name: "tolerance", type: "number", min: 0, max: 100, step: "any", value: 5, size: 4 });
  const repeat = el("input", { name: "repeat", type: "number", min: 1, max: 100, value: 3, size: 3 });
  const field = (label, input) => el("label", {}, el("span", { class: "muted" }, label), input);
  build.addEventListener("change", () => renderCanaryChoices());
  const form = el("form", { id: "canary-form", class: "add-row" },
    field("build", build), el("span", { class: "label" }, "canaries"), models,
    field("tolerance %", tolerance), field("runs", repeat),
    el("button", { type: "submit", "data-canary-start": "" }, "Try"));
  const said = note("canary");
  const chart = el("div", { id: "canary-result" });
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const chosen = [...models.querySelectorAll("input:checked")].map((i) => i.value);
    startCanary({ build: build.value, models: chosen, tolerance: Number(tolerance.value), repeat: Number(repeat.value) }, said);
  });
  return [form, said, chart];
}

// The builds a canary can try (installed, not activated) and, for the chosen one, the models
// that follow its component's activated build (the ones a promotion would move).
function renderCanaryChoices() {
  const select = document.querySelector('#canary-form select[name="build"]');
  const box = document.querySelector("#canary-form [data-canary-models]");
  if (!select || !box) return;
  const candidates = (state.builds || []).filter((b) => !b.activated);
  const chosen = candidates.some((b) => b.id === select.value) ? select.value : (candidates[0] || {}).id;
  select.replaceChildren(...candidates.map((b) => el("option", { value: b.id, selected: b.id === chosen }, b.id)));
  const build = candidates.find((b) => b.id === chosen);
  const follows = new Set((state.rows || []).filter((r) => build && r.managed && !r.build && r.component === build.component).map((r) => r.id));
  const ticked = new Set([...box.querySelectorAll("input:checked")].map((i) => i.value));
  const followers = (state.models || []).filter((m) => !m.skipped && m.backend && follows.has(m.backend.id));
  box.replaceChildren(...(followers.length ? followers.map((m) => el("label", { class: "check" },
    el("input", { type: "checkbox", value: m.id, "data-canary-model": m.id, checked: ticked.has(m.id) }), m.id))
    : [el("span", { class: "muted" }, build ? "no model follows its component's activated build" : "install another build to try one")]));
}

async function startCanary(body, where) {
  forgetOthers(where.dataset.note);
  if (!body.models.length) {
    say(where, { text: "error: choose at least one canary model", cls: "error" });
    return;
  }
  say(where, { text: "…", cls: "muted", busy: true });
  let job;
  try {
    job = await api("POST", "/api/canary", body);
  } catch (err) {
    say(where, { text: "error: " + err.message, cls: "error" });
    return;
  }
  watchCanary(job, where);
}

// Follow a canary's job where its form is; at the end, its comparison as a chart.
function watchCanary(job, where) {
  followJob(job, where, (e) => ({ text: e.message || "measuring…" }), (report) => {
    drawCanary(report);
    return { text: report.message, cls: report.promoted ? "ok" : "error", warnings: report.warnings || [] };
  });
}

// Both builds' prompt and generation speed per canary model, as bars (CSS widths set from the
// numbers: no markup from the server, no chart library).
function drawCanary(report) {
  const metrics = [["prompt_per_second", "prompt"], ["predicted_per_second", "generation"]];
  const sides = [["old", report.previous], ["new", report.build]];
  const models = (report.comparison || []).map((c) => {
    const groups = metrics.map(([key, label]) => {
      const values = sides.map(([side]) => (c[side] && c[side].ok ? c[side][key] : null));
      const top = Math.max(1e-9, ...values.filter((v) => typeof v === "number"));
      const bars = sides.map(([side, build], i) => {
        const v = values[i];
        const bar = el("span", { class: `bar ${side}` });
        bar.style.width = typeof v === "number" ? `${Math.max(1, (100 * v) / top).toFixed(1)}%` : "0";
        return el("div", { class: "bar-row", "data-chart-model": c.model, "data-chart-metric": key, "data-chart-build": build, "data-value": v === null ? "" : String(v) },
          el("span", { class: "bar-label" }, build), el("span", { class: "bar-track" }, bar),
          el("span", { class: "num" }, typeof v === "number" ? `${v} t/s` : "not measured"));
      });
      const slower = (c.slower_pct || {})[key];
      return el("div", { class: "bar-group" },
        el("div", { class: "muted" }, label, slower === null || slower === undefined ? "" : ` (${slower} % slower)`), bars);
    });
    return el("div", { class: "chart-model", "data-chart": c.model },
      el("div", { class: c.ok ? "ok" : "error" }, c.model, c.problems && c.problems.length ? `: ${c.problems.join(", ")}` : ": ok"), groups);
  });
  const verdict = el("div", { class: report.promoted ? "ok" : "error", "data-canary-verdict": report.promoted ? "promoted" : "rolled back" },
    report.promoted ? `promoted ${report.build}` : `rolled back: ${report.previous} stays activated`,
    el("span", { class: "muted" }, ` (tolerance ${report.tolerance} %)`));
  document.getElementById("canary-result").replaceChildren(verdict, ...models);
}

// --- generated config, doctor ----------------------------------------------------------------

function renderGenerated(g) {
  const here = note("generate", "span");
  const verdict = !g.exists ? el("span", { class: "warn" }, g.status)
    : el("span", { class: g.valid && g.up_to_date ? "ok" : "error", "data-valid": String(g.valid) },
      g.valid ? "valid" : "invalid: " + g.problems.join("; "), " — ", g.status);
  fill("generated",
    el("div", {}, el("span", { class: "muted" }, g.output), " ", verdict, " ",
      el("button", { type: "button", onclick: () => act(here, () => api("POST", "/api/generate", { force: true })) }, "Regenerate"), " ", here),
    el("pre", { id: "generated-text" }, g.text));
}

function renderSwap(s) {
  const lines = [el("div", { class: s.running ? (s.current === false ? "warn" : "ok") : "muted", "data-running": String(s.running) }, s.message)];
  if (s.running) {
    let page = null;  // llama-swap's own UI: a plain loopback-or-LAN http address, nothing else
    try { page = new URL(s.ui).protocol === "http:" ? s.ui : null; } catch (e) { page = null; }
    lines.push(el("div", {}, `version ${s.version || "unknown"} · listen ${s.listen} · config ${s.config}`,
      page ? [" · ", el("a", { href: page, target: "_blank", rel: "noopener noreferrer" }, "llama-swap's own page")] : []));
    lines.push(table(["model", "state", "cmd"], s.loaded.map((m) =>
      el("tr", {}, el("td", {}, m.model), el("td", {}, m.state), el("td", {}, el("code", {}, m.cmd.split("\n")[0])))),
      "no model loaded"));
  }
  if (s.service) lines.push(el("div", { class: "muted" }, "service: " + s.service));
  for (const p of s.problems) lines.push(el("div", { class: "warn" }, "warning: " + p));
  fill("swap", ...lines);
}

function renderDoctor(d) {
  const here = note("doctor", "span");
  const lines = [
    ...d.problems.map((p) => el("li", { class: "error" }, p)),
    ...d.notes.map((n) => el("li", { class: "warn" }, n)),
  ];
  fill("doctor",
    el("div", {}, el("span", { class: d.ok ? "ok" : "error" }, d.ok ? "everything is consistent" : `${d.problems.length} problem(s)`), " ",
      el("button", { type: "button", onclick: () => act(here, async () => {
        const r = await api("POST", "/api/doctor", { fix: true });
        return { message: r.fixed.length ? r.fixed.join("; ") : "nothing to fix" };
      }) }, "Fix"), " ", here),
    el("ul", {}, lines));
}

// --- loading -------------------------------------------------------------------------------

async function load(id, path, render) {
  try {
    render(await api("GET", path));
  } catch (err) {
    fill(id, el("p", { class: "error" }, "error: " + err.message));
  }
}

let refreshing = null;
let again = false;
async function refresh() {
  if (refreshing) { again = true; return refreshing; }
  const status = document.getElementById("status");
  status.textContent = "loading…";
  refreshing = (async () => {
    try {
      const config = await api("GET", "/api/config");
      state.settings = (config.settings && config.settings.models) || {};
    } catch (err) { state.settings = {}; }
    await load("backends", "/api/backends", renderBackends);
    await Promise.all([
      load("components", "/api/catalog", renderComponents),
      load("builds", "/api/builds", renderBuilds),
      load("models", "/api/models", renderModels),
      load("swap", "/api/status", renderSwap),
      load("generated", "/api/generate", renderGenerated),
      load("doctor", "/api/doctor", renderDoctor),
    ]);
    renderKinds();
    renderCanaryChoices();
    status.textContent = "updated " + new Date().toLocaleTimeString();
    document.body.dataset.loaded = String(Number(document.body.dataset.loaded || 0) + 1);
  })();
  try { await refreshing; } finally { refreshing = null; }
  if (again) { again = false; await refresh(); }
}

document.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("refresh").addEventListener("click", () => refresh());
  document.getElementById("backends").append(addRowForm());
  section("canary").append(...canaryForm());
  window.addEventListener("focus", () => refresh());
  await refresh();
  // a reloaded page picks up the jobs still running (started here, or before the reload),
  // and draws the last canary's comparison
  try {
    const jobs = await api("GET", "/api/jobs");
    const canaries = jobs.filter((j) => j.kind === "canary" && j.state === "done" && j.result);
    if (canaries.length) drawCanary(canaries[canaries.length - 1].result);
    for (const job of jobs) {
      if (job.state !== "running" || state.jobs.has(job.id)) continue;
      const r = job.request;
      if (job.kind === "canary") {
        watchCanary(job, document.querySelector('[data-note="canary"]'));
      } else if (job.kind === "verify") {
        const id = (r.models || [])[0];
        const where = id && document.querySelector(`[data-note="verify:${CSS.escape(id)}"]`);
        if (where) watchVerify(job, where);
      } else {
        watchJob(job, `${r.component || job.kind} ${r.version || "latest"} ${r.variant || ""}`.trim());
      }
    }
  } catch (err) { /* shown by the next refresh */ }
});
