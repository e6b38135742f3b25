// The conversation thread, drawn from protocol frames (docs/protocol.md).
//
// The page's stored events and the live socket go through the same `apply`, so a reload,
// a reconnect and a second tab all end up with the same picture. Every stored frame has a
// `seq`; one we have already applied is dropped. Model and tool text only ever reaches the
// page as textContent, except answers: a finished one is the server-sanitised `html`
// (agents/rendering.py), one still streaming is rendered and sanitised the same way here
// (markdown.js).
//
// The words the model is writing arrive as `thought.delta` / `answer.delta` frames with a
// segment and an offset (docs/protocol.md, "Live text"): a thought shows as a step being
// written and is replaced by the stored step when it lands.

import { decorateAnswer } from "./answer_tools.js";
import { el } from "./dom.js";
import { decorateCode, renderMarkdown } from "./markdown.js";

const LIMIT_NOTES = {
  max_iterations: "The agent reached its step limit before it was done; the answer is its best effort so far.",
  max_execution_time: "The agent ran out of time before it was done; the answer is its best effort so far.",
};

function framePayload(frame) {
  // Stored frames may carry their fields at the top level or under `payload`.
  return frame.payload && typeof frame.payload === "object" ? { ...frame.payload, ...frame } : frame;
}

function formatDuration(ms) {
  if (typeof ms !== "number" || Number.isNaN(ms)) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.floor(ms / 60000);
  return `${minutes} min ${Math.round((ms % 60000) / 1000)} s`;
}

// Live text by offset: the new text, or null when the frame brings nothing new.
function splice(live, p) {
  const text = typeof p.text === "string" ? p.text : "";
  const offset = Number(p.offset) || 0;
  if (!live || live.segment !== p.segment) return { segment: p.segment, start: offset, text };
  const have = live.start + live.text.length;
  if (offset > have || offset + text.length <= have) return null;
  return { ...live, text: live.text + text.slice(have - offset) };
}

function formatToolInput(input) {
  if (typeof input === "string") return input;
  try {
    return JSON.stringify(input, null, 2);
  } catch {
    return String(input);
  }
}

export class Thread {
  constructor(root, { onChange, onRegenerate, onEdit, onDecide, onContinue } = {}) {
    this.root = root;
    // Approval before side effects and Continue after a budget (docs/protocol.md).
    this.onDecide = onDecide || (() => {});
    this.onContinue = onContinue || (() => {});
    this.approvals = new Map(); // approval id -> {item, buttons, runId}
    this.onChange = onChange || (() => {});
    this.onRegenerate = onRegenerate || (() => {});
    this.onEdit = onEdit || (() => {});
    this.contiguousSeq = 0; // every seq up to this one has been applied
    this.seenAbove = new Set(); // applied seqs above it (only while a gap is open)
    this.runs = new Map();
    this.runOrder = [];
    this.messages = new Map(); // message id -> element
    this.pending = new Map(); // client_id -> {element, content}
    this.summary = null;
    this.summaryNode = null;
  }

  // ---------------------------------------------------------------- seq bookkeeping

  lastSeq() {
    return this.contiguousSeq;
  }

  markSeen(seq) {
    if (seq <= this.contiguousSeq || this.seenAbove.has(seq)) return false;
    this.seenAbove.add(seq);
    while (this.seenAbove.has(this.contiguousSeq + 1)) {
      this.contiguousSeq += 1;
      this.seenAbove.delete(this.contiguousSeq);
    }
    return true;
  }

  apply(frame) {
    if (typeof frame.seq === "number" && !this.markSeen(frame.seq)) return false;
    const p = framePayload(frame);
    const wasNearBottom = this.nearBottom();
    switch (frame.type) {
      case "message.created":
        this.messageCreated(p);
        break;
      case "run.started":
        this.runStarted(p);
        break;
      case "step":
        this.stepAdded(p);
        break;
      case "thought.delta":
        this.thoughtDelta(p);
        break;
      case "answer.delta":
        this.answerDelta(p);
        break;
      case "run.finished":
        this.runFinished(p);
        break;
      case "run.failed":
        this.runFailed(p);
        break;
      case "run.cancelled":
        this.runCancelled(p);
        break;
      case "approval.requested":
        this.approvalRequested(p);
        break;
      case "approval.decided":
        this.approvalDecided(p);
        break;
      case "run.budget_reached":
        this.budgetReached(p);
        break;
      case "run.continued":
        this.runContinued(p);
        break;
      case "memory.summarized":
        this.setSummary({ through_message_id: p.covers_through, text: p.text || "" });
        break;
      default:
        return false;
    }
    this.placeSummaryMarker();
    this.refreshControls();
    if (wasNearBottom) this.scrollToEnd();
    this.onChange(this);
    return true;
  }

  nearBottom() {
    const { scrollTop, scrollHeight, clientHeight } = this.root;
    return scrollHeight - scrollTop - clientHeight < 120;
  }

  scrollToEnd() {
    this.root.scrollTop = this.root.scrollHeight;
  }

  // ---------------------------------------------------------------- messages

  addPending(clientId, content) {
    const element = this.userBubble(content, null);
    element.classList.add("pending");
    element.dataset.clientId = clientId;
    this.append(element);
    this.pending.set(clientId, { element, content });
    this.scrollToEnd();
  }

  // A send the server refused: take the bubble away and give the text back.
  dropPending(clientId) {
    const entry = this.pending.get(clientId);
    if (!entry) return null;
    this.pending.delete(clientId);
    entry.element.remove();
    return entry.content;
  }

  // Every unsent message (the conversation is gone): their bubbles go, their texts return.
  dropAllPending() {
    return [...this.pending.keys()].map((clientId) => this.dropPending(clientId));
  }

  messageCreated(p) {
    const message = p.message || {};
    const runId = p.run_id ?? message.run_id ?? null;
    if (message.role === "assistant") {
      const run = this.ensureRun(runId);
      if (run) {
        run.messageId = message.id;
        this.messages.set(message.id, run.root);
        if (!run.finished && message.content) this.setAnswerText(run, message.content);
      }
      return;
    }
    if (this.messages.has(message.id)) return;
    const pending = message.client_id && this.pending.get(message.client_id);
    let element;
    if (pending) {
      this.pending.delete(message.client_id);
      element = pending.element;
      element.classList.remove("pending");
      this.attachUserTools(element, message.id, message.content);
    } else {
      element = this.userBubble(message.content || "", message.id);
      this.append(element);
    }
    element.dataset.messageId = message.id;
    if (message.edited_from) {
      element.querySelector(".msg-tools")?.prepend(
        el("span", { className: "muted small", text: "edited and asked again" }),
      );
    }
    this.messages.set(message.id, element);
    if (runId !== null && runId !== undefined) this.ensureRun(runId);
  }

  userBubble(content, messageId) {
    const bubble = el("div", { className: "bubble", text: content });
    const article = el(
      "article",
      { className: "msg user", attrs: { "aria-label": "You said" } },
      bubble,
    );
    if (messageId !== null && messageId !== undefined) {
      article.dataset.messageId = messageId;
      this.attachUserTools(article, messageId, content);
    }
    return article;
  }

  attachUserTools(article, messageId, content) {
    if (article.querySelector(".msg-tools")) return;
    const edit = el("button", {
      text: "Edit",
      attrs: { type: "button", "aria-label": "Edit this message and ask again" },
    });
    edit.addEventListener("click", () => this.openEditor(article, messageId, content));
    article.append(el("div", { className: "msg-tools" }, edit));
  }

  openEditor(article, messageId, content) {
    if (article.querySelector(".edit-box")) return;
    const bubble = article.querySelector(".bubble");
    const tools = article.querySelector(".msg-tools");
    const textarea = el("textarea", { attrs: { "aria-label": "Edit your message" } });
    textarea.value = content;
    const cancel = el("button", { className: "button", text: "Cancel", attrs: { type: "button" } });
    const save = el("button", {
      className: "button primary",
      text: "Send as a new question",
      attrs: { type: "submit" },
    });
    const form = el(
      "form",
      { className: "edit-box" },
      textarea,
      el("div", { className: "dialog-buttons" }, cancel, save),
    );
    const close = () => {
      form.remove();
      bubble.hidden = false;
      tools.hidden = false;
      tools.querySelector("button")?.focus();
    };
    cancel.addEventListener("click", close);
    form.addEventListener("keydown", (event) => {
      if (event.key === "Escape") close();
      // Like the composer: Enter sends, Shift+Enter adds a line.
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const text = textarea.value.trim();
      if (!text) return;
      save.disabled = true;
      try {
        await this.onEdit(messageId, text);
        close();
      } catch {
        save.disabled = false;
      }
    });
    bubble.hidden = true;
    tools.hidden = true;
    article.append(form);
    textarea.focus();
  }

  // ---------------------------------------------------------------- runs

  ensureRun(runId) {
    if (runId === null || runId === undefined) return null;
    let run = this.runs.get(runId);
    if (run) return run;
    const summaryText = el("span", { className: "steps-title", text: "Waiting for the agent…" });
    const spinner = el("span", { className: "spinner", attrs: { "aria-hidden": "true" } });
    const summary = el("summary", {}, spinner, summaryText);
    const list = el("ol", { className: "step-list", attrs: { "aria-label": "Agent steps" } });
    const details = el("details", { className: "steps", attrs: { open: "" } }, summary, list);
    const answer = el("div", {
      className: "answer",
      attrs: { "aria-live": "polite", "aria-busy": "true", "aria-label": "Answer" },
    });
    const footer = el("div", { className: "run-footer" });
    const root = el(
      "article",
      { className: "msg assistant", attrs: { "aria-label": "Assistant" }, dataset: { runId } },
      details,
      answer,
      footer,
    );
    run = {
      id: runId,
      root,
      details,
      summaryText,
      spinner,
      list,
      answer,
      footer,
      stepCount: 0,
      liveThought: null, // {segment, start, text, item} while the model writes a thought
      liveAnswer: null, // {segment, start, text} while it writes the answer
      renderQueued: false,
      deltaText: "",
      finished: false,
      status: "queued",
      stopping: false,
      userToggled: false,
    };
    summary.addEventListener("click", () => {
      run.userToggled = true;
    });
    this.runs.set(runId, run);
    this.runOrder.push(runId);
    this.append(root);
    return run;
  }

  runStarted(p) {
    const run = this.ensureRun(p.run_id);
    if (!run || run.finished) return;
    run.status = "running";
    // After a pause the owner ended (a decision, a Continue) nothing was interrupted.
    const afterPause = run.resumedByPerson;
    run.resumedByPerson = false;
    if (p.attempt > 1 && !afterPause) {
      // What an interrupted attempt was writing will be written again.
      this.dropLiveThought(run);
      run.liveAnswer = null;
      run.deltaText = "";
      run.answer.replaceChildren();
      run.list.append(
        el("li", {
          className: "step note",
          text: `Picked up again after an interruption (attempt ${p.attempt}); no step is repeated.`,
        }),
      );
    }
    this.updateStepsTitle(run);
  }

  updateStepsTitle(run) {
    const n = run.stepCount;
    const count = `${n} step${n === 1 ? "" : "s"}`;
    if (!run.finished) {
      const done = n ? ` · ${count}` : "";
      let title = `Working…${done}`;
      if (run.stopping) title = "Stopping…";
      else if (run.liveAnswer) title = `Writing the answer…${done}`;
      else if (run.liveThought) title = `Thinking…${done}`;
      else if (run.status === "awaiting_approval") title = `Waiting for your approval${done}`;
      else if (run.status === "out_of_budget") title = `Stopped at its budget${done}`;
      else if (run.status === "queued" && n === 0) title = "Waiting for the agent…";
      run.summaryText.textContent = title;
    } else {
      run.summaryText.textContent = n ? `${count}` : "No steps";
    }
  }

  stepAdded(p) {
    const run = this.ensureRun(p.run_id);
    if (!run) return;
    const item = this.stepItem(p);
    if (!item) return;
    if (typeof p.seq === "number") item.dataset.seq = p.seq;
    // The stored step replaces the thought that was being written (and any step ends it).
    if (p.kind === "thought" && run.liveThought) run.liveThought.item.replaceWith(item);
    this.dropLiveThought(run);
    // The engine reports a failed tool twice: an error step for the record, then the same
    // text as the observation the model reads. Show it once: the observation, marked with
    // the error's code.
    const previous = run.list.lastElementChild;
    if (p.kind === "observation" && p.is_error && previous?.classList.contains("error")) {
      item.querySelector(".badge").textContent = `error · ${previous.dataset.code || "failed"}`;
      previous.remove();
      run.stepCount -= 1;
    }
    if (!item.isConnected) run.list.append(item);
    run.stepCount += 1;
    if (run.status === "queued") run.status = "running";
    this.updateStepsTitle(run);
  }

  stepItem(p) {
    switch (p.kind) {
      case "thought":
        return el(
          "li",
          { className: "step thought" },
          el("span", { className: "step-label", text: "Thought" }),
          el("span", { className: "step-text", text: p.text || "" }),
        );
      case "action":
        return el(
          "li",
          { className: "step action" },
          el("span", { className: "step-label", text: "Action" }),
          el("code", { className: "tool-name", text: p.tool || "" }),
          el("pre", {
            className: "tool-input",
            text: formatToolInput(p.tool_input ?? ""),
            attrs: { "aria-label": "Tool input" },
          }),
        );
      case "observation": {
        const item = el(
          "li",
          { className: `step observation${p.is_error ? " is-error" : ""}` },
          el("span", { className: "step-label", text: "Observation" }),
          p.tool ? el("code", { className: "tool-name", text: p.tool }) : null,
          p.is_error ? el("span", { className: "badge", text: "error" }) : null,
          el("pre", { className: "observation-text", text: p.text || "" }),
        );
        if (p.truncated) {
          item.append(el("p", { className: "muted small", text: "(cut short for the model)" }));
        }
        return item;
      }
      case "error":
        return el(
          "li",
          { className: "step error", dataset: { code: p.code || "" } },
          el("span", { className: "step-label", text: "Error" }),
          p.code ? el("code", { className: "tool-name", text: p.code }) : null,
          el("span", { className: "step-text", text: ` ${p.message || ""}` }),
        );
      default:
        return null;
    }
  }

  thoughtDelta(p) {
    const run = this.ensureRun(p.run_id);
    if (!run || run.finished) return;
    const next = splice(run.liveThought, p);
    if (!next) return;
    if (!run.liveThought || run.liveThought.segment !== next.segment) {
      this.dropLiveThought(run);
      const text = el("span", { className: "step-text" });
      next.item = el(
        "li",
        { className: "step thought live", attrs: { "aria-busy": "true" } },
        el("span", { className: "step-label", text: "Thought" }),
        text,
      );
      run.list.append(next.item);
      run.details.hidden = false;
      if (!run.userToggled) run.details.open = true;
    }
    next.item.querySelector(".step-text").textContent = next.text;
    run.liveThought = next;
    if (run.status === "queued") run.status = "running";
    this.updateStepsTitle(run);
  }

  dropLiveThought(run) {
    if (!run.liveThought) return;
    if (run.liveThought.item.isConnected && run.liveThought.item.parentNode === run.list) {
      run.liveThought.item.remove();
    }
    run.liveThought = null;
  }

  answerDelta(p) {
    const run = this.ensureRun(p.run_id);
    if (!run || run.finished) return;
    const next = splice(run.liveAnswer, p);
    if (!next) return;
    // An empty text of a new segment takes back what was shown: it was not the answer.
    run.liveAnswer = next.text ? next : null;
    run.deltaText = next.text;
    this.setAnswerText(run, next.text);
    this.updateStepsTitle(run);
  }

  // The answer so far, as Markdown. Rendering waits for the next frame, so a burst of
  // deltas costs one render.
  setAnswerText(run, text) {
    run.answer.classList.add("streaming");
    run.pendingAnswer = text;
    if (run.renderQueued) return;
    run.renderQueued = true;
    window.requestAnimationFrame(() => {
      run.renderQueued = false;
      if (run.finished) return;
      const wasNearBottom = this.nearBottom();
      run.answer.classList.toggle("streaming", Boolean(run.pendingAnswer));
      run.answer.replaceChildren(renderMarkdown(run.pendingAnswer));
      decorateCode(run.answer);
      if (wasNearBottom) this.scrollToEnd();
    });
  }

  // Stop was pressed: say so at once; run.cancelled says when it is done.
  markStopping(runId) {
    const run = this.runs.get(runId);
    if (!run || run.finished) return;
    run.stopping = true;
    this.updateStepsTitle(run);
  }

  finish(run, status) {
    run.finished = true;
    run.status = status;
    run.stopping = false;
    // A paused run that ended (stopped) takes no decision and no Continue any more.
    for (const entry of this.approvals.values()) {
      if (entry.runId === run.id && entry.item.classList.contains("pending")) {
        entry.buttons.remove();
        entry.item.classList.remove("pending");
      }
    }
    run.continueNote?.querySelector("button")?.remove();
    run.root.classList.remove("paused");
    this.dropLiveThought(run);
    run.liveAnswer = null;
    run.spinner.remove();
    run.answer.classList.remove("streaming");
    run.answer.setAttribute("aria-busy", "false");
    this.updateStepsTitle(run);
    if (run.stepCount === 0) run.details.hidden = true;
    else if (!run.userToggled) run.details.open = false;
  }

  runFinished(p) {
    const run = this.ensureRun(p.run_id);
    if (!run || run.finished) return;
    const message = p.message || {};
    if (message.id !== undefined) {
      run.messageId = message.id;
      this.messages.set(message.id, run.root);
    }
    const limitNote = LIMIT_NOTES[p.stop_reason];
    if (limitNote) {
      run.list.append(el("li", { className: "step note", text: limitNote }));
    }
    this.finish(run, "succeeded");
    if (typeof message.html === "string") {
      // Sanitised on the server by agents/rendering.py; model text is never parsed here.
      run.answer.innerHTML = message.html;
      decorateCode(run.answer);
    } else {
      run.answer.textContent = message.content || run.deltaText;
    }
    this.setUsage(run, p.usage || {}, limitNote);
    decorateAnswer(run.footer, message);
  }

  setUsage(run, usage, limitNote) {
    const parts = [];
    const duration = formatDuration(usage.duration_ms);
    if (duration) parts.push(duration);
    const prompt = Number(usage.prompt_tokens) || 0;
    const completion = Number(usage.completion_tokens) || 0;
    if (prompt || completion) {
      const total = (prompt + completion).toLocaleString();
      parts.push(`${total} tokens (${prompt.toLocaleString()} in, ${completion.toLocaleString()} out)`);
    }
    if (limitNote) parts.push("stopped at a limit");
    run.footer.replaceChildren(el("span", { className: "usage", text: parts.join(" · ") }));
  }

  runFailed(p) {
    const run = this.ensureRun(p.run_id);
    if (!run || run.finished) return;
    this.finish(run, "failed");
    const text = p.message || "Something went wrong.";
    run.answer.replaceChildren(
      el(
        "p",
        { className: "run-status failed", attrs: { role: "status" } },
        el("strong", { text: "The run failed. " }),
        el("span", { text }),
        p.code ? el("span", { className: "muted small", text: ` (${p.code})` }) : null,
      ),
    );
  }

  runCancelled(p) {
    const run = this.ensureRun(p.run_id);
    if (!run || run.finished) return;
    this.finish(run, "cancelled");
    const partial = p.partial_answer || run.deltaText || "";
    run.answer.replaceChildren();
    if (p.message && typeof p.message.html === "string") {
      // Sanitised on the server, like a finished answer.
      run.answer.innerHTML = p.message.html;
      decorateCode(run.answer);
    } else if (partial) {
      run.answer.append(el("p", { className: "step-text", text: partial }));
    }
    run.answer.append(
      el("p", { className: "run-status cancelled", attrs: { role: "status" }, text: "Stopped" }),
    );
  }

  // ---------------------------------------------------------------- pauses

  // The run waits for the owner to approve or deny one tool call (approval.requested).
  approvalRequested(p) {
    const run = this.ensureRun(p.run_id);
    if (!run || run.finished || this.approvals.has(p.approval_id)) return;
    this.dropLiveThought(run);
    run.status = "awaiting_approval";
    run.root.classList.add("paused");
    const reason = el("input", {
      className: "approval-reason",
      attrs: { type: "text", maxlength: "2000", "aria-label": "Reason for denying (optional)", placeholder: "Reason (optional)" },
    });
    const approve = el("button", { className: "button primary approve", text: "Approve", attrs: { type: "button" } });
    const deny = el("button", { className: "button deny", text: "Deny", attrs: { type: "button" } });
    const buttons = el("div", { className: "approval-buttons" }, approve, deny, reason);
    const status = el("p", { className: "approval-status", attrs: { role: "status" } });
    const item = el(
      "li",
      { className: "step approval pending", dataset: { approvalId: p.approval_id } },
      el("span", { className: "step-label", text: "Approval needed" }),
      el("code", { className: "tool-name", text: p.tool || "" }),
      el("pre", { className: "tool-input", text: formatToolInput(p.tool_input ?? ""), attrs: { "aria-label": "Tool input" } }),
      buttons,
      status,
    );
    const decide = (approved) => {
      approve.disabled = true;
      deny.disabled = true;
      Promise.resolve(this.onDecide(p.approval_id, approved, approved ? "" : reason.value.trim())).catch(() => {
        approve.disabled = false;
        deny.disabled = false;
      });
    };
    approve.addEventListener("click", () => decide(true));
    deny.addEventListener("click", () => decide(false));
    reason.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.isComposing) {
        event.preventDefault();
        decide(false);
      }
    });
    this.approvals.set(p.approval_id, { item, buttons, status, runId: run.id });
    run.list.append(item);
    run.details.hidden = false;
    run.details.open = true;
    this.updateStepsTitle(run);
  }

  // A decision (here, in another tab, or the expiry): the buttons give way to what it was.
  approvalDecided(p) {
    const run = this.ensureRun(p.run_id);
    const entry = this.approvals.get(p.approval_id);
    if (entry) {
      entry.buttons.remove();
      entry.item.classList.remove("pending");
      entry.item.classList.add(p.approved ? "approved" : "declined");
      let text = p.approved ? "Approved" : p.decision === "expired" ? "Declined: nobody decided in time" : "Denied";
      if (p.decided_by) text += ` by ${p.decided_by}`;
      if (!p.approved && p.reason && p.decision !== "expired") text += ` (reason: ${p.reason})`;
      entry.status.textContent = text;
    }
    if (run && !run.finished) {
      if (![...this.approvals.values()].some((a) => a.runId === run.id && a.item.classList.contains("pending"))) {
        run.status = "queued";
        run.resumedByPerson = true;
        run.root.classList.remove("paused");
      }
      this.updateStepsTitle(run);
    }
  }

  // The run stopped at a budget: say which, and offer to go on (run.budget_reached).
  budgetReached(p) {
    const run = this.ensureRun(p.run_id);
    if (!run || run.finished) return;
    this.dropLiveThought(run);
    run.status = "out_of_budget";
    run.root.classList.add("paused");
    const steps = Number(p.continue_steps) || 0;
    const label = steps ? `Continue (+${steps} step${steps === 1 ? "" : "s"})` : "Continue";
    const button = el("button", { className: "button primary continue-run", text: label, attrs: { type: "button" } });
    button.addEventListener("click", () => {
      button.disabled = true;
      Promise.resolve(this.onContinue(run.id)).catch(() => {
        button.disabled = false;
      });
    });
    run.continueNote?.remove();
    run.continueNote = el(
      "li",
      { className: "step note budget" },
      el("span", { text: p.message || "The run reached its budget." }),
      " ",
      button,
    );
    run.list.append(run.continueNote);
    run.details.hidden = false;
    run.details.open = true;
    this.updateStepsTitle(run);
  }

  runContinued(p) {
    const run = this.ensureRun(p.run_id);
    if (!run || run.finished) return;
    run.continueNote?.querySelector("button")?.remove();
    run.continueNote?.append(el("span", { className: "muted small", text: " Continued." }));
    run.continueNote = null;
    run.status = "queued";
    run.resumedByPerson = true;
    run.root.classList.remove("paused");
    this.updateStepsTitle(run);
  }

  // ---------------------------------------------------------------- the rest

  // Runs a worker is on now: not finished and not paused for the owner.
  workingRunIds() {
    return this.activeRunIds().filter((id) => {
      const status = this.runs.get(id).status;
      return status !== "awaiting_approval" && status !== "out_of_budget";
    });
  }

  activeRunIds() {
    return this.runOrder.filter((id) => !this.runs.get(id).finished);
  }

  lastRun() {
    const id = this.runOrder[this.runOrder.length - 1];
    return id === undefined ? null : this.runs.get(id);
  }

  refreshControls() {
    for (const button of this.root.querySelectorAll(".regenerate")) button.remove();
    const last = this.lastRun();
    if (!last || !last.finished || this.activeRunIds().length) return;
    const button = el("button", {
      className: "regenerate",
      text: "Regenerate",
      attrs: { type: "button", title: "Ask the last question again" },
    });
    button.addEventListener("click", () => {
      button.disabled = true;
      Promise.resolve(this.onRegenerate()).finally(() => {
        button.disabled = false;
      });
    });
    last.footer.append(button);
  }

  // Memory folded the turns up to one message into a summary (agents/memory/): a quiet,
  // openable marker after that message. Only the newest summary is in use, so one marker.
  setSummary(summary) {
    this.summary = summary || null;
    if (this.summary && !this.summaryNode) {
      this.summaryNode = el(
        "details",
        { className: "summary-marker" },
        el("summary", { text: "Earlier messages are summarised for the agent" }),
      );
    }
    if (this.summary && this.summaryNode) {
      this.summaryNode.querySelector(".summary-text")?.remove();
      if (this.summary.text) {
        this.summaryNode.append(el("p", { className: "summary-text", text: this.summary.text }));
      }
    }
    this.placeSummaryMarker();
  }

  placeSummaryMarker() {
    if (!this.summary || !this.summaryNode) return;
    const after = this.messages.get(this.summary.through_message_id);
    if (after && after.nextSibling !== this.summaryNode) after.after(this.summaryNode);
  }

  append(node) {
    this.root.querySelector("#empty-state")?.remove();
    this.root.append(node);
  }
}
