// backendmgr's page: plain DOM, text set with textContent only (never markup from the server).
"use strict";

const state = { rows: [], settings: {}, jobs: new Map() };

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

// Run an action; its message or error is shown in `where` (the place the action was taken).
async function act(where, action, after) {
  where.textContent = "…";
  where.className = "muted";
  try {
    const result = await action();
    where.textContent = (result && result.message) || "done";
    where.className = "ok";
    for (const w of (result && result.warnings) || []) where.append(el("div", { class: "warn" }, "warning: " + w));
    if (after !== false) await refresh();
  } catch (err) {
    where.textContent = "error: " + err.message;
    where.className = "error";
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
    const here = c.variants.filter((v) => v.available).map((v) => v.id);
    const variant = el("select", { name: "variant", "aria-label": `variant of ${c.id}` },
      here.map((v) => el("option", { value: v, selected: v === c.suggested }, v)));
    const versions = el("datalist", { id: `versions-${c.id}` });
    const version = el("input", { name: "version", placeholder: "latest", size: 10, list: versions.id, "aria-label": `version of ${c.id}` });
    version.addEventListener("focus", () => loadVersions(c.id, variant.value, versions), { once: true });
    const note = el("span", { class: "muted" });
    const button = el("button", {
      type: "button", "data-install": c.id,
      onclick: () => startInstall(c.id, version.value.trim() || null, variant.value || null, note),
    }, "Install");
    return el("tr", { "data-component": c.id },
      el("td", {}, c.id, el("div", { class: "muted" }, c.source)),
      el("td", {}, here.join(", ") || "-"),
      el("td", {}, c.suggested || "-", el("div", { class: "muted" }, c.why)),
      el("td", {}, c.activated || "-"),
      el("td", {}, el("span", { class: "inline" }, version, versions, variant, button), note));
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

async function startInstall(component, version, variant, note) {
  note.textContent = "";
  note.className = "muted";
  let job;
  try {
    job = await api("POST", "/api/builds", { component, version, variant });
  } catch (err) {
    note.textContent = "error: " + err.message;
    note.className = "error";
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
  const rows = builds.map((b) => {
    const note = el("div", { class: "muted" });
    return el("tr", { "data-build": b.id },
      el("td", {}, b.id),
      el("td", {}, b.activated ? "yes" : ""),
      el("td", {}, b.pinned_by.join(", ")),
      el("td", {}, formatSize(b.size_bytes)),
      el("td", {},
        el("span", { class: "inline" },
          el("button", { type: "button", disabled: b.activated, "data-activate": b.id,
            onclick: () => act(note, () => api("POST", `/api/builds/${encodeURIComponent(b.id)}/activate`, {})) }, "Activate"),
          el("button", { type: "button", "data-uninstall": b.id,
            onclick: () => act(note, () => api("DELETE", `/api/builds/${encodeURIComponent(b.id)}`)) }, "Uninstall")),
        note));
  });
  fill("builds", table(["build", "activated", "pinned by", "size", ""], rows,
    'no builds installed; install one above'));
}

function renderBackends(rows) {
  state.rows = rows;
  const body = rows.map((r) => {
    const note = el("div", { class: "muted" });
    return el("tr", { "data-row": r.id },
      el("td", { class: "star" }, r.default ? "★" : ""),
      el("td", {}, r.id),
      el("td", {}, r.kind),
      el("td", {}, r.classes.join(", ") || "-"),
      el("td", {}, r.build ? "build" : r.managed ? "yes" : ""),
      el("td", { class: "path" }, r.path),
      el("td", {}, r.default ? "" : el("button", { type: "button",
        onclick: () => act(note, () => api("POST", `/api/backends/${encodeURIComponent(r.id)}/default`, {})) }, "Make ★"), note));
  });
  fill("backends", table(["", "id", "kind", "classes", "managed", "path", ""], body,
    "the registry is empty"));
}

// --- models --------------------------------------------------------------------------------

function renderModels(models) {
  const rows = models.map((m) => {
    const note = el("div", { class: "muted" });
    const path = `/api/models/${encodeURIComponent(m.id)}`;
    const current = (state.settings[m.id] || {});
    const pin = el("select", { "data-pin": m.id, "aria-label": `pin ${m.id}`,
      onchange: () => act(note, () => pin.value
        ? api("POST", `${path}/pin`, { row: pin.value })
        : api("POST", `${path}/unpin`, {})) },
      el("option", { value: "" }, "(class default)"),
      state.rows.map((r) => el("option", { value: r.id, selected: current.backend === r.id }, r.id)));
    const settings = Object.entries(current).filter(([k, v]) => k !== "backend" && v !== null).map(([k, v]) =>
      el("span", { class: "inline" }, `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`,
        el("button", { type: "button", title: `unset ${k}`,
          onclick: () => act(note, () => api("POST", `${path}/unset`, { keys: [k] })) }, "×")));
    const input = el("input", { placeholder: "ctx=8192", size: 12, "data-set": m.id, "aria-label": `setting for ${m.id}` });
    const set = el("button", { type: "button", onclick: () => {
      const [key, ...rest] = input.value.split("=");
      act(note, () => {
        if (!rest.length) return Promise.reject(new Error(`"${input.value}" is not KEY=VALUE`));
        return api("POST", `${path}/set`, { values: { [key.trim()]: rest.join("=") } });
      });
    } }, "Set");
    const backend = m.skipped ? "-" : (m.backend && (m.backend.id || m.backend.path)) || "-";
    const why = m.skipped ? `skipped: ${m.skipped}` : [m.backend ? m.backend.reason : "", ...m.notes].filter(Boolean).join("; ");
    return el("tr", { "data-model": m.id },
      el("td", {}, m.id, el("div", { class: "muted" }, `${m.format}${m.size_gb !== null ? ", " + m.size_gb.toFixed(2) + " GiB" : ""}`)),
      el("td", {}, m.class || "-"),
      el("td", { "data-backend": m.id }, backend),
      el("td", {}, why),
      el("td", {}, pin),
      el("td", {}, settings, el("span", { class: "inline" }, input, set), note));
  });
  fill("models", table(["model", "class", "backend", "why", "pin", "settings"], rows, "no models found in models_dirs"));
}

// --- generated config, doctor ----------------------------------------------------------------

function renderGenerated(g) {
  const note = el("span", { class: "muted" });
  const verdict = !g.exists ? el("span", { class: "warn" }, g.status)
    : el("span", { class: g.valid && g.up_to_date ? "ok" : "error", "data-valid": String(g.valid) },
      g.valid ? "valid" : "invalid: " + g.problems.join("; "), " — ", g.status);
  fill("generated",
    el("div", {}, el("span", { class: "muted" }, g.output), " ", verdict, " ",
      el("button", { type: "button", onclick: () => act(note, () => api("POST", "/api/generate", { force: true })) }, "Regenerate"), " ", note),
    el("pre", { id: "generated-text" }, g.text));
}

function renderDoctor(d) {
  const note = el("span", { class: "muted" });
  const lines = [
    ...d.problems.map((p) => el("li", { class: "error" }, p)),
    ...d.notes.map((n) => el("li", { class: "warn" }, n)),
  ];
  fill("doctor",
    el("div", {}, el("span", { class: d.ok ? "ok" : "error" }, d.ok ? "everything is consistent" : `${d.problems.length} problem(s)`), " ",
      el("button", { type: "button", onclick: () => act(note, async () => {
        const r = await api("POST", "/api/doctor", { fix: true });
        return { message: r.fixed.length ? `removed ${r.fixed.join(", ")}` : "nothing to fix" };
      }) }, "Fix"), " ", note),
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
      load("generated", "/api/generate", renderGenerated),
      load("doctor", "/api/doctor", renderDoctor),
    ]);
    status.textContent = "updated " + new Date().toLocaleTimeString();
    document.body.dataset.loaded = String(Number(document.body.dataset.loaded || 0) + 1);
  })();
  try { await refreshing; } finally { refreshing = null; }
  if (again) { again = false; await refresh(); }
}

document.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("refresh").addEventListener("click", () => refresh());
  window.addEventListener("focus", () => refresh());
  await refresh();
  // a reloaded page picks up the jobs still running (started here, or before the reload)
  try {
    for (const job of await api("GET", "/api/jobs")) {
      if (job.state === "running" && !state.jobs.has(job.id)) {
        const r = job.request;
        watchJob(job, `${r.component || "update"} ${r.version || "latest"} ${r.variant || ""}`.trim());
      }
    }
  } catch (err) { /* shown by the next refresh */ }
});
