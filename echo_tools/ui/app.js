// The echo-tools run viewer: the recorded runs, one run as a timeline of its calls, live, and the
// decisions a paused run waits for. Plain DOM: every value from the server goes in as text
// (textContent / text nodes), never as markup.

const KEY = "echo-tools-api-key";
const FINISHED = new Set(["completed", "completed_with_errors", "failed", "cancelled"]);
const $ = (id) => document.getElementById(id);
const state = {
  view: null,
  stream: null,
  runs: [],
  next: null,
  calls: new Map(),
  items: null,
  renderToken: 0,
  run: null,
  refresh: 0,
};

// -- DOM -------------------------------------------------------------------------------------------

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "className") node.className = value;
    else if (name === "dataset") Object.assign(node.dataset, value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function show(id) {
  for (const section of ["login", "list", "run"]) $(section).hidden = section !== id;
}

function fail(message) {
  $("error").textContent = message;
  $("error").hidden = !message;
}

const runLink = (runId) => "#/run/" + encodeURIComponent(runId);
const json = (value) => (typeof value === "string" ? value : JSON.stringify(value, null, 2));

function when(text) {
  if (!text) return "";
  const date = new Date(text);
  return Number.isNaN(date.getTime()) ? String(text) : date.toLocaleString();
}

function took(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

function badge(status) {
  const word = status || "no status";
  return el("span", { className: "badge", dataset: { status: word } }, word);
}

// Marks the first paint of the data: a task queued from the next animation frame runs once that frame
// (style, layout, paint) is done.
function painted(what, then = null) {
  requestAnimationFrame(() =>
    setTimeout(() => {
      performance.mark(`echo:${what}-painted`);
      document.body.dataset.painted = what;
      if (then) then();
    }, 0),
  );
}

// -- HTTP ------------------------------------------------------------------------------------------

function headers(extra = {}) {
  const key = sessionStorage.getItem(KEY);
  return key ? { ...extra, "X-API-Key": key } : extra;
}

class Unauthorized extends Error {}

async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: headers(options.headers) });
  if (response.status === 401) {
    askForKey(sessionStorage.getItem(KEY) ? "The API key was refused." : "");
    throw new Unauthorized("unauthorized");
  }
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const message = body && body.message ? body.message : `${response.status} ${response.statusText}`;
    throw new Error(message);
  }
  return body;
}

function askForKey(message) {
  closeStream();
  show("login");
  $("logout").hidden = true;
  $("login-error").textContent = message;
  $("key").focus();
}

// A Server-Sent Events stream read with fetch (EventSource cannot send the key); reconnects.
function openStream(query, onFrame) {
  closeStream();
  const control = new AbortController();
  state.stream = control;
  const live = $("live");
  const connect = async () => {
    while (!control.signal.aborted) {
      try {
        const response = await fetch("api/stream?" + query(), { headers: headers(), signal: control.signal });
        if (response.status === 401) return askForKey("The API key was refused.");
        if (!response.ok) throw new Error(`stream answered ${response.status}`);
        live.textContent = "live";
        live.dataset.state = "live";
        await readFrames(response.body, onFrame);
      } catch (error) {
        if (control.signal.aborted) return;
      }
      live.textContent = "reconnecting";
      live.dataset.state = "off";
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  };
  connect();
}

function closeStream() {
  if (state.stream) state.stream.abort();
  state.stream = null;
  $("live").textContent = "not connected";
  $("live").dataset.state = "off";
}

async function readFrames(body, onFrame) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let type = "message";
      const data = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith("event: ")) type = line.slice(7);
        else if (line.startsWith("data: ")) data.push(line.slice(6));
      }
      if (data.length) onFrame(type, JSON.parse(data.join("\n")));
    }
  }
}

// -- the runs --------------------------------------------------------------------------------------

function filters() {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  for (const name of [...params.keys()]) if (!params.get(name)) params.delete(name);
  return params;
}

async function showList() {
  show("list");
  const params = filters();
  $("f-status").value = params.get("status") || "";
  $("f-workflow").value = params.get("workflow_id") || "";
  $("f-agent").value = params.get("agent_id") || "";
  await loadRuns(false);
  openStream(() => new URLSearchParams({ since: state.since }).toString(), (type, data) => {
    if (type === "run") scheduleRefresh();
  });
  loadPending();
}

async function loadRuns(more) {
  const params = filters();
  if (more && state.next) params.set("before", state.next);
  if (!more) params.set("limit", String(Math.min(200, Math.max(50, state.runs.length))));
  const page = await api("api/runs?" + params.toString());
  if (!more) state.since = page.now;
  fillStatuses(page.statuses);
  state.runs = more ? state.runs.concat(page.runs) : page.runs;
  state.next = page.next;
  const rows = page.runs.map(runRow);
  if (more) $("runs").tBodies[0].append(...rows);
  else $("runs").tBodies[0].replaceChildren(...rows);
  $("more").hidden = !page.next;
  const total = page.total === null ? `${state.runs.length}${page.next ? "+" : ""}` : page.total;
  $("list-count").textContent = `${total} run${total === 1 ? "" : "s"}`;
  fillChoices();
  painted("runs");
}

function fillStatuses(statuses) {
  const select = $("f-status");
  if (select.options.length > 1 || !statuses) return;
  const chosen = filters().get("status") || "";
  select.append(...statuses.map((s) => el("option", { value: s }, s)));
  select.value = chosen;
}

function fillChoices() {
  const workflows = new Set();
  const agents = new Map();
  for (const run of state.runs) {
    if (run.workflow_id) workflows.add(run.workflow_id);
    for (const agent of run.agents || []) agents.set(agent.agent_id, agent.agent_name);
  }
  $("workflows").replaceChildren(...[...workflows].sort().map((w) => el("option", { value: w })));
  $("agents").replaceChildren(
    ...[...agents].sort().map(([id, name]) => el("option", { value: id, label: name || id })),
  );
}

function runRow(run) {
  const started = Date.parse(run.created);
  const ended = FINISHED.has(run.status) ? Date.parse(run.updated) : NaN; // a paused run has not ended
  const agents = (run.agents || []).map((a) => a.agent_name || a.agent_id).join(", ");
  return el(
    "tr",
    { dataset: { runId: run.run_id } },
    el("th", { scope: "row" }, el("a", { href: runLink(run.run_id) }, run.run_id)),
    el("td", {}, run.workflow_id || ""),
    el("td", {}, badge(run.status)),
    el("td", {}, el("time", { datetime: run.created }, when(run.created))),
    el("td", {}, took(ended - started)),
    el("td", { className: "num" }, run.calls),
    el("td", { className: "num" }, run.failed || ""),
    el("td", {}, agents),
  );
}

function scheduleRefresh() {
  clearTimeout(state.refresh);
  state.refresh = setTimeout(() => {
    if (state.view === "list") loadRuns(false).then(loadPending).catch(report);
    else if (state.view === "run") loadRun(state.run.run.run_id).catch(report);
  }, 250);
}

async function loadPending() {
  const page = await api("api/runs?status=interrupted&limit=20");
  $("pending-runs").replaceChildren(
    ...page.runs.map((run) =>
      el("li", {}, el("a", { href: runLink(run.run_id) }, run.run_id), ` (${run.workflow_id || "no workflow id"}) paused since `, when(run.updated)),
    ),
  );
  const approvals = await loadApprovals();
  $("pending").hidden = page.runs.length === 0 && approvals === 0;
}

// Tool calls waiting for a person (GET /tools/approvals; a principal without `approve` sees none).
async function loadApprovals() {
  let answer;
  try {
    answer = await api("../tools/approvals?limit=50");
  } catch (error) {
    if (error instanceof Unauthorized) throw error;
    $("pending-approvals").replaceChildren();
    return 0;
  }
  $("pending-approvals").replaceChildren(...answer.approvals.map(approvalItem));
  return answer.approvals.length;
}

function approvalItem(record, index) {
  const who = record.agent_name ? ` asked by ${record.agent_name}` : "";
  const item = el("li", { className: "approval", dataset: { approvalId: record.approval_id, status: record.status || "pending" } });
  if (record.status && record.status !== "pending") {
    // an expired approval (ToolDef.approval_ttl_s) can no longer be decided: shown as what it is
    item.append(`${record.tool_name || record.tool_id}${who} `, badge(record.status), expiredNote(record));
    return item;
  }
  if (record.kind === "run" && record.run_id) {
    // a paused run's call: decided on the run's page, which carries the run on
    item.append(`${record.tool_name || record.tool_id}${who} in run `, el("a", { href: runLink(record.run_id) }, record.run_id));
    return item;
  }
  const ask = { type: "tool_approval", title: `${record.tool_name || record.tool_id} waits for approval${who}`, args: record.args };
  const send = (body) =>
    api("../tools/approvals/" + encodeURIComponent(record.approval_id), {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
  item.append(pauseForm(ask, `approval-${index}`, send, () => loadPending()));
  return item;
}

// -- one run ---------------------------------------------------------------------------------------

async function showRun(runId) {
  show("run");
  $("run-title").textContent = runId;
  for (const id of ["run-facts", "pauses", "timeline", "timeline-note"]) $(id).replaceChildren();
  await loadRun(runId);
  openStream(() => new URLSearchParams({ run_id: runId, since: state.since }).toString(), (type, data) => {
    if (type === "run") {
      if (data.run_id === runId && state.run && data.status !== state.run.run.status) scheduleRefresh();
    } else if (type === "dropped") {
      scheduleRefresh();
    } else if (type.startsWith("tool.")) {
      mergeEvent(data);
      renderCall(data.call_id || data.event_id);
    }
  });
}

async function loadRun(runId) {
  const answer = await api("api/runs/" + encodeURIComponent(runId));
  state.run = answer;
  state.since = answer.now;
  state.calls = new Map();
  for (const event of answer.events) mergeEvent(event);
  renderFacts(answer.run);
  const rest = renderTimeline(answer.truncated);
  await renderPauses(answer.run);
  painted("run", rest);
}

function renderFacts(run) {
  const facts = [
    ["Status", badge(run.status)],
    ["Workflow", run.workflow_id || "none"],
    ["Started", when(run.created)],
    ["Last change", when(run.updated)],
  ];
  if (run.error) facts.push(["Error", el("span", { className: "error" }, run.error)]);
  $("run-facts").replaceChildren(...facts.flatMap(([term, value]) => [el("dt", {}, term), el("dd", {}, value)]));
}

// The calls of a run from its events: one entry per call id, nested by parent_call_id.
function mergeEvent(event) {
  const id = event.call_id || event.event_id;
  if (!id || !event.type || event.type === "tool.registered") return;
  let call = state.calls.get(id);
  if (!call) {
    call = { id, status: "running", notes: [], started: event.timestamp };
    state.calls.set(id, call);
  }
  for (const name of ["tool_id", "tool_name", "tool_type", "agent_id", "agent_name", "node_id", "run_id", "parent_call_id"]) {
    if (event[name] !== undefined && event[name] !== null) call[name] = event[name];
  }
  if (event.type === "tool.invoked") {
    call.input = event.input;
    call.started = event.timestamp;
    if (event.metadata && event.metadata.replayed) call.replayed = true;
  } else if (["tool.completed", "tool.failed", "tool.timeout"].includes(event.type)) {
    call.status = event.type.slice(5);
    call.ended = event.timestamp;
    for (const name of ["output", "error", "error_type", "duration_ms", "attempts", "cached", "omitted"]) {
      if (event[name] !== undefined) call[name] = event[name];
    }
    if (call.input === undefined && event.input !== undefined) call.input = event.input;
  } else {
    call.notes.push({ type: event.type, timestamp: event.timestamp, metadata: event.metadata });
  }
}

// The calls nested by parent_call_id. The first screenful is drawn at once; the function returned draws
// the rest in chunks, so a run of thousands of calls shows its first calls without waiting for its last.
function renderTimeline(truncated) {
  const calls = [...state.calls.values()];
  const note = calls.length ? `${calls.length} call${calls.length === 1 ? "" : "s"}` : "No tool calls recorded.";
  $("timeline-note").textContent = truncated ? `${note} (the first ones only: the run has more events)` : note;
  const timeline = $("timeline");
  timeline.replaceChildren();
  delete timeline.dataset.complete;
  const span = timeSpan(calls);
  const token = ++state.renderToken;
  state.items = new Map();
  let next = 0;
  const chunk = (size) => {
    if (token !== state.renderToken) return; // another run (or a reload of this one) is drawn now
    const roots = document.createDocumentFragment();
    for (const end = Math.min(calls.length, next + size); next < end; next++) {
      const call = calls[next];
      const item = callItem(call, span);
      state.items.set(call.id, item);
      const parent = call.parent_call_id && state.items.get(call.parent_call_id);
      (parent && parent !== item ? parent.lastChild : roots).append(item);
    }
    timeline.append(roots);
    if (next < calls.length) return setTimeout(() => chunk(400), 0);
    timeline.dataset.complete = "true";
    for (const id of state.calls.keys()) if (!state.items.has(id)) renderCall(id); // arrived meanwhile
  };
  chunk(120);
  return () => setTimeout(() => chunk(400), 0);
}

function timeSpan(calls) {
  let first = Infinity;
  let last = -Infinity;
  for (const call of calls) {
    const start = Date.parse(call.started);
    if (!Number.isNaN(start)) first = Math.min(first, start);
    const end = start + (call.duration_ms || 0);
    if (!Number.isNaN(end)) last = Math.max(last, end);
  }
  return { first, length: Math.max(1, last - first) };
}

const CALL = el(
  "li",
  {},
  el(
    "details",
    { className: "call" },
    el(
      "summary",
      {},
      el("span", { className: "badge" }),
      el("strong"),
      el("span", { className: "agent" }),
      el("span", { className: "took" }),
      el("span", { className: "lane" }, el("span", { className: "bar", "aria-hidden": "true" })),
    ),
  ),
  el("ol"),
);

function callItem(call, span) {
  const item = CALL.cloneNode(true); // one copy of a ready subtree: a run may have thousands of calls
  item.id = "call-" + call.id;
  const details = item.firstChild;
  details.dataset.callId = call.id;
  details.dataset.status = call.status;
  const [mark, name, agent, time, lane] = details.firstChild.children;
  mark.textContent = call.status;
  mark.dataset.status = call.status;
  name.textContent = call.tool_name || call.tool_id || "tool";
  if (call.agent_name || call.agent_id) agent.textContent = `by ${call.agent_name || call.agent_id}`;
  time.textContent = took(call.duration_ms);
  const start = Date.parse(call.started) - span.first;
  if (!Number.isNaN(start) && Number.isFinite(span.first)) {
    lane.firstChild.style.marginLeft = `${(100 * start) / span.length}%`;
    lane.firstChild.style.width = `${Math.max(0.5, (100 * (call.duration_ms || 0)) / span.length)}%`;
  }
  return item;
}

// A call's details are drawn when it is first opened (one listener for the whole timeline).
function openCall(event) {
  const details = event.target;
  if (!(details instanceof HTMLDetailsElement) || !details.open || details.children.length > 1) return;
  const call = state.calls.get(details.dataset.callId);
  if (call) details.append(callBody(call));
}

function callBody(call) {
  const facts = [
    ["Tool", `${call.tool_id || ""}${call.tool_type ? ` (${call.tool_type})` : ""}`],
    ["Agent", call.agent_name ? `${call.agent_name} (${call.agent_id || "no id"})` : call.agent_id || "none"],
    ["Started", call.started || ""],
    ["Took", took(call.duration_ms)],
    ["Call", call.id],
  ];
  if (call.parent_call_id) facts.push(["Inside call", call.parent_call_id]);
  if (call.run_id) facts.push(["Run", call.run_id]);
  if (call.attempts > 1) facts.push(["Attempts", call.attempts]);
  if (call.cached) facts.push(["Cached", "answered from the result cache"]);
  if (call.replayed) facts.push(["Replayed", "answered from a recording"]);
  const body = el("div", { className: "call-body" }, el("dl", { className: "facts" }, ...facts.flatMap(([t, v]) => [el("dt", {}, t), el("dd", {}, v)])));
  if (call.error) body.append(el("h4", {}, `Error${call.error_type ? ` (${call.error_type})` : ""}`), el("pre", { className: "error" }, call.error));
  if (call.input !== undefined) body.append(el("h4", {}, "Input"), el("pre", {}, json(call.input)));
  if (call.output !== undefined) body.append(el("h4", {}, "Output"), el("pre", {}, json(call.output)));
  if (call.omitted) body.append(el("p", {}, `Not streamed: ${call.omitted}`));
  if (call.notes.length) {
    body.append(el("h4", {}, "Along the way"), el("ul", {}, ...call.notes.map((n) => el("li", {}, `${n.type} `, el("code", {}, json(n.metadata || {}))))));
  }
  return body;
}

// A live event: redraw its call in place (or add it under its parent).
function renderCall(id) {
  const call = state.calls.get(id);
  if (!call || !state.items) return;
  const old = state.items.get(id);
  if (!old && $("timeline").dataset.complete !== "true") return; // the chunks still to come draw it
  const item = callItem(call, timeSpan([...state.calls.values()]));
  state.items.set(id, item);
  if (old) {
    const wasOpen = old.firstChild.open;
    item.replaceChild(old.lastChild, item.lastChild); // keep its nested calls
    old.replaceWith(item);
    item.firstChild.open = wasOpen;
  } else {
    const parent = call.parent_call_id && state.items.get(call.parent_call_id);
    (parent ? parent.lastChild : $("timeline")).append(item);
  }
  const count = state.calls.size;
  $("timeline-note").textContent = `${count} call${count === 1 ? "" : "s"}`;
}

// -- decisions -------------------------------------------------------------------------------------

async function renderPauses(run) {
  const box = $("pauses");
  if (run.status !== "interrupted") return box.replaceChildren();
  const answer = await api("../workflows/runs/" + encodeURIComponent(run.run_id));
  const asks = (answer.state && answer.state.__interrupt__) || [];
  const send = (body) =>
    api("../workflows/runs/" + encodeURIComponent(run.run_id) + "/resume", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
  const forms = await Promise.all(
    asks.map(async (ask, index) => {
      const record = ask.type === "tool_approval" && ask.approval_id ? await approvalOf(ask.approval_id) : null;
      if (record && record.status === "expired") return expiredPause(ask, record);
      return pauseForm(ask, `pause-${index}`, send, () => loadRun(run.run_id));
    }),
  );
  box.replaceChildren(...forms);
}

// The stored approval of a paused call (null when it cannot be read: the form is shown, the server decides).
async function approvalOf(approvalId) {
  try {
    return await api("../tools/approvals/" + encodeURIComponent(approvalId));
  } catch (error) {
    if (error instanceof Unauthorized) throw error;
    return null;
  }
}

function expiredNote(record) {
  const since = record.expires_at || record.expired_at || record.decided_at;
  const parts = since ? [" since ", when(since), ": no longer decidable"] : [": no longer decidable"];
  return el("span", { className: "note" }, ...parts);
}

function expiredPause(ask, record) {
  const title = `${ask.tool || record.tool_name || record.tool_id} waited for approval`;
  return el("div", { className: "pause", dataset: { kind: "tool_approval", status: "expired" } }, el("h3", {}, title, " ", badge("expired")), expiredNote(record));
}

// The decision form of one pause: `send(body)` posts the decision, `done()` redraws what it changed.
function pauseForm(ask, index, send, done) {
  const kind = ask.type || "pause";
  const edit = el("textarea", { id: `edit-${index}`, rows: 6, cols: 60 });
  const comment = el("input", { id: `comment-${index}`, type: "text", size: 40 });
  const message = el("p", { className: "error", role: "alert" });
  const asker = ask.agent_name ? ` (asked by ${ask.agent_name})` : "";
  const heading =
    ask.title ||
    { mcp_elicitation: "A tool's server asks", tool_approval: `${ask.tool} waits for approval${asker}` }[kind] ||
    "Waiting for a decision";
  const title = el("h3", {}, heading);
  const form = el("form", { className: "pause", dataset: { kind } }, title);
  if (ask.message) form.append(el("p", {}, ask.message));
  const shown = kind === "hitl" ? ask.crew_result : kind === "tool_approval" ? ask.args : ask;
  if (shown !== undefined && shown !== null) form.append(el("pre", {}, json(shown)));
  let choices;
  if (kind === "mcp_elicitation") {
    edit.value = "{}";
    choices = [["accept", "Accept with this answer"], ["decline", "Decline"], ["cancel", "Cancel"]];
  } else {
    edit.value = kind === "tool_approval" ? json(ask.args || {}) : json(ask.crew_result ?? "");
    choices = [["approve", "Approve"], ["reject", "Reject"]];
    if (ask.allow_edit !== false) choices.push(["edit", kind === "tool_approval" ? "Run with these arguments" : "Approve with this text"]);
  }
  const editable = choices.some(([d]) => d === "edit" || d === "accept");
  if (editable) {
    const label = kind === "hitl" ? "Edited result" : kind === "tool_approval" ? "Arguments (JSON)" : "Answer (JSON)";
    const box = el("div", { className: "edit", hidden: true }, el("label", { for: edit.id }, label), edit);
    const toggle = () => {
      box.hidden = !box.hidden;
      if (!box.hidden) edit.focus();
    };
    form.append(el("button", { type: "button", "aria-expanded": "false", onclick: (e) => { toggle(); e.target.setAttribute("aria-expanded", String(!box.hidden)); } }, "Edit…"), box);
  }
  form.append(el("label", { for: comment.id }, "Comment"), comment);
  const buttons = choices.map(([decision, label]) =>
    el("button", { type: "submit", value: decision, dataset: { decision } }, label),
  );
  form.append(el("div", { className: "decisions" }, ...buttons), message);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const decision = event.submitter ? event.submitter.value : "approve";
    try {
      const body = decisionBody(kind, decision, edit.value, comment.value);
      buttons.forEach((b) => (b.disabled = true));
      await send(body);
      await done();
    } catch (error) {
      buttons.forEach((b) => (b.disabled = false));
      if (!(error instanceof Unauthorized)) message.textContent = error.message;
    }
  });
  return form;
}

function decisionBody(kind, decision, edited, comment) {
  const body = { decision };
  if (comment) body.comment = comment;
  if (decision === "accept") body.content = parseObject(edited);
  if (decision === "edit") body.edits = kind === "hitl" ? { crew_result: edited } : parseObject(edited);
  return body;
}

function parseObject(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new Error(`The answer is not JSON: ${error.message}`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw new Error("The answer must be a JSON object.");
  return value;
}

// -- navigation ------------------------------------------------------------------------------------

function report(error) {
  if (!(error instanceof Unauthorized)) fail(error.message);
}

async function route() {
  fail("");
  clearTimeout(state.refresh); // a refresh asked for by the view being left
  delete document.body.dataset.painted;
  const hash = location.hash || "#/";
  $("logout").hidden = !sessionStorage.getItem(KEY);
  try {
    if (hash.startsWith("#/run/")) {
      state.view = "run";
      await showRun(decodeURIComponent(hash.slice(6).split("?")[0]));
    } else {
      state.view = "list";
      await showList();
    }
  } catch (error) {
    report(error);
  }
}

function start() {
  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY, $("key").value);
    $("key").value = "";
    route();
  });
  $("logout").addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    askForKey("");
  });
  $("filters").addEventListener("submit", (event) => {
    event.preventDefault();
    const params = new URLSearchParams();
    for (const [name, value] of new FormData($("filters"))) if (value) params.set(name, String(value).trim());
    state.runs = [];
    const hash = "#/?" + params.toString();
    if (location.hash === hash) route();
    else location.hash = hash;
  });
  $("f-clear").addEventListener("click", () => {
    state.runs = [];
    location.hash = "#/";
  });
  $("more").addEventListener("click", () => loadRuns(true).catch(report));
  $("timeline").addEventListener("toggle", openCall, true); // toggle does not bubble: caught on its way down
  window.addEventListener("hashchange", route);
  // a stream left open by a page the tab moved away from would hold one of the browser's few connections
  // to this server (six over HTTP/1.1): close it, and open it again if the page comes back
  window.addEventListener("pagehide", closeStream);
  window.addEventListener("pageshow", (event) => event.persisted && route());
  route();
}

start();
