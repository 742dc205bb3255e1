// The status page's script. It reads the daemon's token from the URL's fragment
// (#token=..., never sent to a server), keeps it in sessionStorage, and sends it as
// "Authorization: Bearer" on every call. The threads come from GET /live and the selected
// thread's events from GET /threads/:id/tail and /threads/:id/live, both server-sent event
// streams read with fetch (EventSource cannot send a header). Every text is set as text,
// never as markup.
"use strict";

const TOKEN_KEY = "condensate-token";
const RETRY_MS = 2000;

const state = {
  token: null,
  threads: new Map(),
  selected: null,
  windows: [],
  approvals: [],
  threadStream: null,
  rows: new Map(),
  shownAsk: undefined,
};

// -- the token and the API ------------------------------------------------------------------

function readToken() {
  const fragment = new URLSearchParams(window.location.hash.slice(1));
  const given = fragment.get("token");
  if (given) {
    sessionStorage.setItem(TOKEN_KEY, given);
    // Out of the address bar and the history: the token stays in this tab's storage only.
    history.replaceState(null, "", window.location.pathname + window.location.search);
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

class ApiError extends Error {
  constructor(status, body) {
    super(body && body.detail ? body.detail : `HTTP ${status}`);
    this.status = status;
    this.code = body && body.error ? body.error : "";
  }
}

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${state.token}` };
  const init = { method, headers, cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const answer = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, answer);
  return answer;
}

// Reads a server-sent event stream until it ends; calls onMessage(kind, data, id) for each
// message. Comments (the heartbeats) are skipped.
async function readStream(path, onMessage, signal) {
  const response = await fetch(path, {
    headers: { Authorization: `Bearer ${state.token}`, Accept: "text/event-stream" },
    cache: "no-store",
    signal,
  });
  if (!response.ok) {
    throw new ApiError(response.status, await response.json().catch(() => null));
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, "\n");
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      dispatch(block, onMessage);
      end = buffer.indexOf("\n\n");
    }
  }
}

function dispatch(block, onMessage) {
  let kind = "message";
  let id = null;
  const data = [];
  for (const line of block.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") kind = value;
    else if (field === "data") data.push(value);
    else if (field === "id") id = value;
  }
  if (data.length) onMessage(kind, JSON.parse(data.join("\n")), id);
}

// -- formatting -----------------------------------------------------------------------------

const integer = new Intl.NumberFormat("en-US");

function tokens(n) {
  return integer.format(n);
}

// A cost, or for models without a price the one line that names them and the setting.
function cost(usd, unpriced) {
  if (usd === null || usd === undefined) {
    return `no price for ${unpriced.join(", ")} (set CONDENSATE_PRICES)`;
  }
  return `$${usd.toFixed(usd < 1 ? 4 : 2)}`;
}

function when(iso) {
  const at = new Date(iso);
  return Number.isNaN(at.getTime()) ? iso : at.toLocaleString();
}

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "className") node.className = value;
    else if (name === "onclick") node.addEventListener("click", value);
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function say(text) {
  document.getElementById("answer-status").textContent = text;
}

function connection(text) {
  document.getElementById("connection").textContent = text;
}

// -- the threads table ----------------------------------------------------------------------

function usageBar(thread) {
  const used = thread.usage.used;
  const { line, ceiling } = thread;
  const scale = Math.max(line, ceiling, used, 1);
  const share = Math.round((100 * used) / Math.max(line, 1));
  const text =
    `${tokens(used)} of ${tokens(line)} tokens (${share} % of the line); ` +
    `ceiling ${tokens(ceiling)}`;
  const fill = element("div", { className: "fill" });
  fill.style.width = `${(100 * Math.min(used, scale)) / scale}%`;
  const lineMark = element("div", { className: "mark line" });
  lineMark.style.left = `${(100 * line) / scale}%`;
  const ceilingMark = element("div", { className: "mark ceiling" });
  ceilingMark.style.left = `${(100 * ceiling) / scale}%`;
  const bar = element(
    "div",
    {
      className: used > line ? "bar over" : "bar",
      role: "meter",
      "aria-valuemin": "0",
      "aria-valuemax": String(line),
      "aria-valuenow": String(used),
      "aria-label": `Usage of ${thread.id}`,
      "aria-valuetext": text,
    },
    fill,
    lineMark,
    ceilingMark,
  );
  return element(
    "div",
    { className: "usage" },
    bar,
    element("span", { className: "usage-text" }, `${tokens(used)} / ${tokens(line)} (${share} %)`,
      ` · ceiling ${tokens(ceiling)}`),
  );
}

// A thread's row is made once and its cells updated in place, so that a focused button
// keeps its focus while the numbers change.
function threadRow(id) {
  let row = state.rows.get(id);
  if (!row) {
    const select = element("button", { type: "button", className: "thread-id" }, id);
    select.addEventListener("click", () => selectThread(id));
    const cells = [0, 1, 2, 3, 4, 5].map(() => element("td"));
    const title = element("div", { className: "thread-title" });
    row = element("tr", { "data-thread": id }, element("td", {}, select, title), ...cells);
    state.rows.set(id, row);
  }
  return row;
}

function fillRow(row, thread) {
  const chosen = thread.id === state.selected;
  const [first, ...cells] = row.children;
  first.firstChild.setAttribute("aria-pressed", String(chosen));
  // What tells threads apart: the brief's first line, and where the thread works.
  first.lastChild.replaceChildren(thread.title ? `${thread.title} (${thread.cwd})` : "");
  if (chosen) row.setAttribute("aria-current", "true");
  else row.removeAttribute("aria-current");
  if (thread.usage === undefined) {
    // A thread another daemon of a fleet owns: what this daemon knows of it.
    cells[0].replaceChildren(`${thread.status} (daemon ${thread.owner})`);
    cells.slice(1).forEach((cell) => cell.replaceChildren());
    return;
  }
  const status = thread.pendingAsk ? `${thread.status}, ask pending` : thread.status;
  const contents = [
    [thread.head ? `${thread.engine} (head)` : thread.engine, ""],
    [thread.model, "mono"],
    [status, `status-${thread.status}`],
    [usageBar(thread), ""],
    [cost(thread.costs.usd, thread.costs.unpriced), "number"],
    [tokens(thread.costs.calls), "number"],
  ];
  contents.forEach(([content, className], i) => {
    cells[i].className = className;
    cells[i].replaceChildren(content);
  });
}

function renderThreads() {
  const body = document.querySelector("#threads tbody");
  for (const [id, row] of state.rows) {
    if (!state.threads.has(id)) {
      row.remove();
      state.rows.delete(id);
    }
  }
  for (const thread of state.threads.values()) {
    const row = threadRow(thread.id);
    fillRow(row, thread);
    if (row.parentNode !== body) body.append(row);
  }
  document.getElementById("no-threads").hidden = state.threads.size > 0;
}

// -- the selected thread --------------------------------------------------------------------

function selectThread(id) {
  if (state.selected === id) return;
  state.selected = id;
  state.windows = [];
  state.approvals = [];
  if (state.threadStream) state.threadStream.abort();
  state.threadStream = new AbortController();
  document.getElementById("detail").hidden = false;
  document.getElementById("detail-id").textContent = id;
  renderThreads();
  renderDetail();
  renderApprovals();
  renderWindows();
  followThread(id, state.threadStream.signal);
  refreshApprovals(id);
}

function renderDetail() {
  const thread = state.threads.get(state.selected);
  if (!thread) return;
  renderAsk(thread);
  renderCosts(thread);
}

// Drawn again only when the pending ask changes: its buttons stay put while numbers move.
function renderAsk(thread) {
  const box = document.getElementById("ask");
  const ask = thread.pendingAsk;
  const key = ask ? `${thread.id}/${ask.ask_id}` : `${thread.id}/none`;
  if (state.shownAsk === key) return;
  state.shownAsk = key;
  if (!ask) {
    box.replaceChildren(element("p", {}, "None."));
    return;
  }
  const textId = `ask-text-${ask.ask_id}`;
  const text = element(
    "p",
    { id: textId },
    `Ask ${ask.ask_id}: the thread is at ${tokens(ask.used)} tokens against its line of ` +
      `${tokens(ask.line)}. Answer by ${when(ask.deadline)}; nobody answering by then, ` +
      "the curator's summary is taken.",
  );
  const actions = element("div", { className: "actions", role: "group", "aria-labelledby": textId });
  for (const [mode, label] of [
    ["summary", "Summary"],
    ["microcompact", "Microcompact"],
    ["decline", "Decline"],
  ]) {
    actions.append(
      element("button", { type: "button", onclick: (e) => answerAsk(thread.id, ask, mode, e) }, label),
    );
  }
  box.replaceChildren(element("div", { className: "pending" }, text, actions));
}

async function answerAsk(threadId, ask, mode, event) {
  const buttons = event.target.parentElement.querySelectorAll("button");
  buttons.forEach((b) => { b.disabled = true; });
  try {
    const answer = await api("POST", `/threads/${threadId}/compact`, { mode });
    say(`Answered ${ask.ask_id} on ${threadId}: ${mode} (logged at seq ${answer.seq}).`);
  } catch (error) {
    say(`Could not answer ${ask.ask_id}: ${error.message}`);
    buttons.forEach((b) => { b.disabled = false; });
  }
}

async function refreshApprovals(id) {
  try {
    const answer = await api("GET", `/threads/${id}/approvals`);
    if (state.selected !== id) return;
    state.approvals = answer.approvals;
  } catch (error) {
    if (state.selected !== id) return;
    state.approvals = [];
    say(`Could not read the approvals of ${id}: ${error.message}`);
  }
  renderApprovals();
}

function renderApprovals() {
  const box = document.getElementById("approvals");
  if (!state.approvals.length) {
    box.replaceChildren(element("p", {}, "None."));
    return;
  }
  box.replaceChildren(
    ...state.approvals.map((approval) => {
      const textId = `approval-text-${approval.id}`;
      const text = element(
        "p",
        { id: textId },
        `${approval.tool}: `,
        element("code", {}, approval.argument),
        approval.detail ? ` (${approval.detail})` : "",
        `. Denied unless answered by ${when(approval.deadline)}.`,
      );
      const actions = element("div", { className: "actions", role: "group", "aria-labelledby": textId });
      for (const [decision, label] of [["allow", "Allow"], ["deny", "Deny"]]) {
        actions.append(
          element(
            "button",
            { type: "button", onclick: (e) => answerApproval(state.selected, approval, decision, e) },
            label,
          ),
        );
      }
      return element("div", { className: "pending" }, text, actions);
    }),
  );
}

async function answerApproval(threadId, approval, decision, event) {
  const buttons = event.target.parentElement.querySelectorAll("button");
  buttons.forEach((b) => { b.disabled = true; });
  try {
    const answer = await api("POST", `/threads/${threadId}/approvals`, {
      id: approval.id,
      decision,
    });
    say(`Answered ${approval.id} on ${threadId}: ${decision} (logged at seq ${answer.seq}).`);
  } catch (error) {
    say(`Could not answer ${approval.id}: ${error.message}`);
    buttons.forEach((b) => { b.disabled = false; });
  }
  refreshApprovals(threadId);
}

function renderWindows() {
  const list = document.getElementById("windows");
  list.replaceChildren(
    ...state.windows.map((w) => {
      // No author: the planner's own cheap tiers, or a compaction it carried out on request.
      const by = ` by ${w.author || "the planner"}`;
      const why = w.request ? `, as requested at seq ${w.request}` : w.ask ? `, answering ${w.ask}` : "";
      const forced = w.forced ? ", forced" : "";
      return element(
        "li",
        {},
        element("time", { datetime: w.at }, when(w.at)),
        ` ${w.window_kind}${by}${why}${forced}: freed about ${tokens(w.trigger.freed)} tokens ` +
          `(at ${tokens(w.trigger.used)} of ${tokens(w.trigger.line)}; seq ${w.seq})`,
      );
    }),
  );
  document.getElementById("no-windows").hidden = state.windows.length > 0;
}

function renderCosts(thread) {
  const byModel = new Map();
  for (const session of thread.costs.sessions) {
    const sum = byModel.get(session.model) || {
      calls: 0, input: 0, cacheWrite: 0, cacheRead: 0, output: 0, usd: 0,
    };
    sum.calls += session.calls;
    for (const key of ["input", "cacheWrite", "cacheRead", "output"]) sum[key] += session.tokens[key];
    sum.usd = sum.usd === null || session.usd === null ? null : sum.usd + session.usd;
    byModel.set(session.model, sum);
  }
  const rows = [...byModel.entries()].map(([model, sum]) =>
    element(
      "tr",
      {},
      element("td", { className: "mono" }, model || "(unnamed)"),
      ...["calls", "input", "cacheWrite", "cacheRead", "output"].map((key) =>
        element("td", { className: "number" }, tokens(sum[key])),
      ),
      element("td", { className: "number" }, cost(sum.usd, [model || "(unnamed)"])),
    ),
  );
  const total = thread.costs;
  rows.push(
    element(
      "tr",
      {},
      element("th", { scope: "row" }, "Total"),
      element("td", { className: "number" }, tokens(total.calls)),
      ...["input", "cacheWrite", "cacheRead", "output"].map((key) =>
        element("td", { className: "number" }, tokens(total.tokens[key])),
      ),
      element("td", { className: "number" }, cost(total.usd, total.unpriced)),
    ),
  );
  document.querySelector("#costs tbody").replaceChildren(...rows);
}

// The thread's windows from its whole log (a tail with history), then its live stream from
// where the tail ended; approvals are read again whenever one is asked or answered.
async function followThread(id, signal) {
  let after = 0;
  const onEvent = (kind, data) => {
    if (typeof data.seq === "number") after = Math.max(after, data.seq);
    if (kind === "window") {
      state.windows.push(data);
      renderWindows();
    } else if (kind === "approval.requested" || kind === "approval.answered") {
      refreshApprovals(id);
    }
  };
  try {
    for (;;) {
      const page = await api("GET", `/threads/${id}/tail?after=${after}&limit=1000&history=1`);
      page.events.forEach((event) => onEvent(event.kind, event));
      after = page.nextAfter;
      if (!page.hasMore) break;
    }
  } catch (error) {
    say(`Could not read the log of ${id}: ${error.message}`);
    return;
  }
  while (!signal.aborted) {
    let gone = false;
    try {
      await readStream(`/threads/${id}/live?after=${after}`, (kind, data) => {
        if (kind === "thread.gone") gone = true;
        else onEvent(kind, data);
      }, signal);
    } catch (error) {
      if (signal.aborted) return;
      if (error instanceof ApiError && error.status < 500) {
        say(`Stopped following ${id}: ${error.message}`);
        return;
      }
    }
    if (gone) return;
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
  }
}

// -- every thread, live ---------------------------------------------------------------------

function onLive(kind, data) {
  if (kind === "snapshot") {
    connection("Live");
    state.threads = new Map(data.threads.map((t) => [t.id, t]));
  } else if (kind === "thread") {
    state.threads.set(data.id, data);
  } else if (kind === "gone") {
    state.threads.delete(data.id);
    if (data.id === state.selected) say(`Thread ${data.id} left this daemon (archived, or taken by another).`);
  } else {
    return;
  }
  renderThreads();
  if (state.selected !== null && state.threads.has(state.selected)) renderDetail();
}

async function followAll() {
  for (;;) {
    try {
      await readStream("/live", onLive);
      connection("Reconnecting…");
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) {
        connection("The daemon refused this page's token.");
        document.getElementById("no-token").hidden = false;
        return;
      }
      connection(`Reconnecting… (${error.message})`);
    }
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
  }
}

function start() {
  state.token = readToken();
  if (!state.token) {
    connection("No token.");
    document.getElementById("no-token").hidden = false;
    return;
  }
  followAll();
}

start();
