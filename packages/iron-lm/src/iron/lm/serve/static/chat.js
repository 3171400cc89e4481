// The chat page of iron-lm serve: plain JavaScript, no build step, no
// request to any other site. It reads /health (the model's name and
// context) and streams answers from /v1/chat/completions (server-sent
// events of OpenAI's chunks, the last one carrying the usage).
"use strict";

const $ = (id) => document.getElementById(id);
const STORE = "iron-chat";

const state = {
  conversations: [],  // [{title, messages: [{role, content, stats}]}]
  current: 0,
  model: null,
  context: null,
  controller: null,  // the AbortController of the answer streaming, or null
};

function load() {
  try {
    const saved = JSON.parse(localStorage.getItem(STORE) || "null");
    if (saved && Array.isArray(saved.conversations) && saved.conversations.length) {
      state.conversations = saved.conversations;
      state.current = Math.min(saved.current || 0, saved.conversations.length - 1);
      for (const [key, id] of Object.entries(FIELDS)) {
        if (saved.settings && key in saved.settings) $(id).value = saved.settings[key];
      }
    }
  } catch (e) {
    console.warn("the saved conversations could not be read:", e);
  }
  if (!state.conversations.length) state.conversations = [{ title: "", messages: [] }];
  try {
    $("api-key").value = sessionStorage.getItem(STORE + "-key") || "";
  } catch (e) { /* storage off: the key is typed each time */ }
}

// the settings saved with the conversations (the API key is kept only for
// the browser tab's session)
const FIELDS = {
  system: "system-prompt", temperature: "temperature", top_p: "top-p",
  max_tokens: "max-tokens", seed: "seed", min_p: "min-p",
  repeat_penalty: "repeat-penalty", presence_penalty: "presence-penalty",
  frequency_penalty: "frequency-penalty",
};

// llama.cpp's sampling fields and the value at which each changes nothing:
// sent only when set otherwise, so a plain request stays batched with others
const NEUTRAL = {
  min_p: ["min-p", 0], repeat_penalty: ["repeat-penalty", 1],
  presence_penalty: ["presence-penalty", 0], frequency_penalty: ["frequency-penalty", 0],
};

function save() {
  const settings = {};
  for (const [key, id] of Object.entries(FIELDS)) settings[key] = $(id).value;
  try {
    localStorage.setItem(STORE, JSON.stringify({
      conversations: state.conversations, current: state.current, settings,
    }));
    sessionStorage.setItem(STORE + "-key", $("api-key").value);
  } catch (e) { /* storage full or off: the page still works */ }
}

const conversation = () => state.conversations[state.current];

// -- drawing -------------------------------------------------------------

function statsText(stats) {
  if (!stats) return "";
  const parts = [];
  if (stats.stopped) parts.push("stopped");
  if (stats.completion != null) parts.push(`${stats.completion} tokens`);
  if (stats.rate != null) parts.push(`${stats.rate.toFixed(1)} tokens/s`);
  if (stats.prompt != null) parts.push(`prompt ${stats.prompt} tokens, ${stats.cached} from the cache`);
  if (stats.finish) parts.push(`finish: ${stats.finish}`);
  return parts.join(" · ");
}

// the figures as data attributes too, for scripts reading the page
function markStats(element, stats) {
  if (!stats) return;
  for (const key of ["prompt", "cached", "completion"]) {
    if (stats[key] != null) element.dataset[key] = stats[key];
  }
}

function messageElement(message) {
  const box = document.createElement("article");
  box.className = `message ${message.role}`;
  const role = document.createElement("span");
  role.className = "role";
  role.textContent = message.role === "user" ? "You" : (state.model || "Assistant");
  const text = document.createElement("p");
  text.className = "text";
  text.textContent = message.content;
  const stats = document.createElement("p");
  stats.className = "stats";
  stats.textContent = statsText(message.stats);
  markStats(stats, message.stats);
  box.append(role, text, stats);
  return box;
}

function draw() {
  const list = $("conversation-list");
  list.replaceChildren();
  state.conversations.forEach((c, i) => {
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = c.title || "New chat";
    if (i === state.current) button.setAttribute("aria-current", "true");
    button.addEventListener("click", () => {
      if (state.controller) return;
      state.current = i;
      clearStatus();
      draw();
      save();
    });
    item.append(button);
    list.append(item);
  });
  const messages = $("messages");
  messages.replaceChildren(...conversation().messages.map(messageElement));
  messages.scrollTop = messages.scrollHeight;
  updateButtons();
}

function updateButtons() {
  const busy = state.controller !== null;
  const last = conversation().messages.at(-1);
  $("send").disabled = busy;
  $("stop").disabled = !busy;
  $("regenerate").disabled = busy || !last;
  $("new-chat").disabled = busy;
}

function showStatus(text) {
  $("status").textContent = text;
  $("status").hidden = false;
}

function clearStatus() {
  $("status").textContent = "";
  $("status").hidden = true;
}

function showContext(usage) {
  const used = usage ? usage.total_tokens : null;
  const limit = state.context;
  $("context-use").textContent = limit == null
    ? "context: –"
    : `context: ${used == null ? "–" : used} / ${limit} tokens`;
}

// -- the server ----------------------------------------------------------

async function health() {
  try {
    const response = await fetch("/health", { cache: "no-store" });
    const body = await response.json();
    state.model = body.model || null;
    state.context = Number.isInteger(body.context) ? body.context : null;
    $("model").textContent = `model: ${state.model || "?"}`;
    showContext(null);
    if (!response.ok) showStatus(describe(response.status, body));
  } catch (e) {
    $("model").textContent = "model: ?";
    showStatus(gone());
  }
}

function gone() {
  return `The server at ${location.origin} cannot be reached (network error): ` +
    "is iron-lm serve still running? Start it again, then reload this page.";
}

// A sentence for an error answer: its status, the server's own message, the fix.
function describe(status, body) {
  const message = body && body.error && body.error.message
    ? body.error.message : "(no message)";
  if (status === 401) {
    $("settings").hidden = false;
    $("toggle-settings").setAttribute("aria-expanded", "true");
    return `The server needs its API key (401): enter it under Settings, API key. ${message}`;
  }
  const code = body && body.error ? body.error.code : null;
  if (code === "model_unavailable") {
    return `The model can no longer answer (${status}): ${message}`;
  }
  if (code === "shutting_down") {
    return `The server is stopping (${status}): ${message}`;
  }
  if (status === 503 || status === 429) {
    return `The server is busy (${status}): ${message}. Try again in a moment.`;
  }
  return `The server refused the request (${status}): ${message}`;
}

function numberOf(id, integer) {
  const raw = $(id).value.trim();
  if (raw === "") return undefined;
  const value = Number(raw);
  return Number.isFinite(value) ? (integer ? Math.trunc(value) : value) : undefined;
}

function requestBody() {
  const messages = [];
  const system = $("system-prompt").value.trim();
  if (system) messages.push({ role: "system", content: system });
  for (const m of conversation().messages) messages.push({ role: m.role, content: m.content });
  const body = {
    model: state.model || "iron",
    messages,
    stream: true,
    stream_options: { include_usage: true },
  };
  const settings = {
    temperature: numberOf("temperature"), top_p: numberOf("top-p"),
    max_tokens: numberOf("max-tokens", true), seed: numberOf("seed", true),
  };
  for (const [key, [id, neutral]] of Object.entries(NEUTRAL)) {
    const value = numberOf(id);
    if (value !== undefined && value !== neutral) settings[key] = value;
  }
  for (const [key, value] of Object.entries(settings)) if (value !== undefined) body[key] = value;
  return body;
}

// Streams one answer to the conversation's last user message.
async function answer() {
  clearStatus();
  const reply = { role: "assistant", content: "", stats: null };
  const element = messageElement(reply);
  const text = element.querySelector(".text");
  const statsLine = element.querySelector(".stats");
  element.setAttribute("aria-busy", "true");
  $("messages").append(element);
  const controller = new AbortController();
  state.controller = controller;
  updateButtons();
  const headers = { "Content-Type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) headers.Authorization = `Bearer ${key}`;
  const started = performance.now();
  let usage = null;
  let finish = null;
  let failed = null;
  let stopped = false;
  try {
    const response = await fetch("/v1/chat/completions", {
      method: "POST", headers, body: JSON.stringify(requestBody()), signal: controller.signal,
    });
    if (!response.ok) {
      let body = null;
      try { body = await response.json(); } catch (e) { /* not JSON */ }
      failed = describe(response.status, body);
    } else {
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      let done = false;
      while (!done) {
        const chunk = await reader.read();
        if (chunk.done) break;
        buffer += decoder.decode(chunk.value, { stream: true });
        let end;
        while (!done && (end = buffer.indexOf("\n\n")) >= 0) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = event.split("\n").filter((l) => l.startsWith("data:"))
            .map((l) => l.slice(5).trim()).join("\n");
          if (!data) continue;
          if (data === "[DONE]") { done = true; break; }
          const parsed = JSON.parse(data);
          if (parsed.error) {  // an error in a stream already going
            failed = `The answer stopped with an error: ${parsed.error.message}`;
            done = true;
            break;
          }
          if (parsed.usage) usage = parsed.usage;
          const choice = parsed.choices && parsed.choices[0];
          if (!choice) continue;
          if (choice.finish_reason) finish = choice.finish_reason;
          const piece = choice.delta && choice.delta.content;
          if (piece) {
            reply.content += piece;
            text.textContent = reply.content;
            $("messages").scrollTop = $("messages").scrollHeight;
          }
        }
      }
      if (!done && !failed) {
        failed = "The server closed the stream before the answer ended: it may have stopped.";
      }
    }
  } catch (e) {
    if (e.name === "AbortError") stopped = true;
    else failed = e instanceof TypeError ? gone() : `The answer failed: ${e.message}`;
  } finally {
    state.controller = null;
    element.removeAttribute("aria-busy");
  }
  const ended = performance.now();
  if (failed && !reply.content) {
    element.remove();
  } else {
    const stats = { stopped };
    if (usage) {
      stats.completion = usage.completion_tokens;
      stats.prompt = usage.prompt_tokens;
      stats.cached = (usage.prompt_tokens_details || {}).cached_tokens || 0;
      // the answer's tokens over its whole time, the prompt's reading included
      const seconds = (ended - started) / 1000;
      if (seconds > 0) stats.rate = usage.completion_tokens / seconds;
    }
    if (finish) stats.finish = finish;
    reply.stats = stats;
    conversation().messages.push(reply);
    statsLine.textContent = statsText(stats);
    markStats(statsLine, stats);
  }
  if (usage) showContext(usage);
  if (failed) showStatus(failed);
  draw();
  save();
  $("prompt").focus();
}

// -- actions -------------------------------------------------------------

function send() {
  if (state.controller) return;
  const content = $("prompt").value;
  if (!content.trim()) return;
  const c = conversation();
  c.messages.push({ role: "user", content });
  if (!c.title) c.title = content.trim().slice(0, 40);
  $("prompt").value = "";
  draw();
  answer();
}

function stop() {
  if (state.controller) state.controller.abort();
}

function regenerate() {
  if (state.controller) return;
  const messages = conversation().messages;
  if (messages.at(-1) && messages.at(-1).role === "assistant") messages.pop();
  if (!messages.length) return;
  draw();
  answer();
}

function newChat() {
  if (state.controller) return;
  state.conversations.push({ title: "", messages: [] });
  state.current = state.conversations.length - 1;
  clearStatus();
  draw();
  save();
  $("prompt").focus();
}

document.addEventListener("DOMContentLoaded", () => {
  load();
  $("composer").addEventListener("submit", (event) => { event.preventDefault(); send(); });
  $("prompt").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && state.controller) {
      event.preventDefault();
      stop();
    }
  });
  $("stop").addEventListener("click", stop);
  $("regenerate").addEventListener("click", regenerate);
  $("new-chat").addEventListener("click", newChat);
  $("toggle-settings").addEventListener("click", () => {
    const open = $("settings").hidden;
    $("settings").hidden = !open;
    $("toggle-settings").setAttribute("aria-expanded", String(open));
    if (open) $("system-prompt").focus();  // the first field of the panel
  });
  for (const id of [...Object.values(FIELDS), "api-key"]) $(id).addEventListener("change", save);
  draw();
  health();
  $("prompt").focus();
});
