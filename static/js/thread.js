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
//
// A conversation is a tree (docs/architecture.md, "The message tree"): regenerated answers
// and edited questions are siblings. The log holds every branch, so every frame is applied
// and kept; the thread shows one branch, from the first message down to `leaf`, and a
// ‹ 2 / 3 › switcher on each message that has siblings. The page starts with the server's
// tree and active leaf (#chat-state `tree`); live frames then move the leaf as the server
// does: to a new question, to the question a new run answers, and on to that run's answer.

import { decorateAnswer } from "./answer_tools.js";
import { el } from "./dom.js";
import { gettext, gettext_noop, interpolate, ngettext, pageLanguage } from "./i18n.js";

// The renderers (markdown-it and DOMPurify in markdown.js, highlight.js in code_blocks.js)
// load when an answer first needs them, not with the page: an empty chat has no use for
// them, and they weigh several times the rest of the page (bench/first_load.py).
let markdown = null; // markdown.js, once loaded
let markdownLoad = null;
function loadMarkdown() {
  markdownLoad ??= import("./markdown.js").then((module) => {
    markdown = module;
    return module;
  });
  return markdownLoad;
}

let codeBlocksLoad = null;
let mathLoad = null;
function decorateCode(container) {
  typesetMath(container);
  if (!container.querySelector("pre")) return;
  codeBlocksLoad ??= import("./code_blocks.js");
  codeBlocksLoad.then((module) => module.decorateCode(container));
}

// KaTeX (math.js) loads only for an answer that may hold math: `$$…$$`, or `$…$` whose text
// neither starts nor ends with a space ("$5 and $10" is money), as math.js reads them.
function typesetMath(container) {
  if (!/\$\$[^$]+\$\$|(?<![\\$\w])\$(?![\s$])[^$\n]*[^\s\\$]\$(?![\w$])/.test(container.textContent)) return;
  mathLoad ??= import("./math.js");
  mathLoad.then((module) => module.typesetMath(container));
}

const LIMIT_NOTES = {
  max_iterations: gettext_noop("The agent reached its step limit before it was done; the answer is its best effort so far."),
  max_execution_time: gettext_noop("The agent ran out of time before it was done; the answer is its best effort so far."),
};

// A failed run's message is stored in English by the worker (agents/llm/errors.py,
// agents/services/execution.py); the page shows it in its own language by the code, keeping
// the reference staff look up. Where the page is English the stored words stay.
const FAILURE_REASONS = {
  model_auth: gettext_noop("The AI model service did not accept this site's credentials. The site's staff can fix this."),
  model_misconfigured: gettext_noop("The AI model is not set up correctly. The site's staff can fix this."),
  model_quota: gettext_noop("The AI model service has used up this site's quota. The site's staff can fix this."),
  model_rate_limited: gettext_noop("The AI model service is too busy right now. Please try again in a little while."),
  model_unavailable: gettext_noop("The AI model's server could not be reached. Please try again in a little while."),
  model_server_error: gettext_noop("The AI model's server reported an error. Please try again in a little while."),
  model_timeout: gettext_noop("The AI model took too long to answer. Please try again in a little while."),
  model_bad_response: gettext_noop("The AI model sent an answer that could not be used. Please try again in a little while."),
  too_many_attempts: gettext_noop("The run was interrupted too many times and was given up."),
  no_profile: gettext_noop("The agent this run used was deleted."),
  internal_error: gettext_noop("The agent stopped because of an internal error."),
  run_timeout: gettext_noop("The run took too long and was stopped."),
};

function failureText(p) {
  const reason = FAILURE_REASONS[p.code];
  const translated = reason ? gettext(reason) : null;
  if (!translated || translated === reason) return p.message || gettext("Something went wrong.");
  const reference = /\(Reference: ([^)]+?)\.\)/.exec(p.message || "");
  if (!reference) return translated;
  // The worker writes "run 12" (agents/llm/errors.py): the word is said in the page's language.
  const run = /^run (\d+)$/.exec(reference[1]);
  const label = run ? interpolate(gettext("run %s"), [run[1]]) : reference[1];
  return `${translated} ${interpolate(gettext("(Reference: %s.)"), [label])}`;
}

function framePayload(frame) {
  // Stored frames may carry their fields at the top level or under `payload`.
  return frame.payload && typeof frame.payload === "object" ? { ...frame.payload, ...frame } : frame;
}

function formatDuration(ms) {
  if (typeof ms !== "number" || Number.isNaN(ms)) return "";
  if (ms < 1000) return interpolate(gettext("%s ms"), [Math.round(ms)]);
  if (ms < 60000) return interpolate(gettext("%s s"), [(ms / 1000).toFixed(1)]);
  const minutes = Math.floor(ms / 60000);
  const seconds = Math.round((ms % 60000) / 1000);
  return interpolate(gettext("%(minutes)s min %(seconds)s s"), { minutes, seconds }, true);
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

// What became of a call that waited for approval, in the page's language.
function approvalOutcome(p) {
  if (p.decision === "expired") return gettext("Declined: nobody decided in time");
  if (p.approved) {
    return p.decided_by ? interpolate(gettext("Approved by %s"), [p.decided_by]) : gettext("Approved");
  }
  let text = p.decided_by ? interpolate(gettext("Denied by %s"), [p.decided_by]) : gettext("Denied");
  if (p.reason) text += ` ${interpolate(gettext("(reason: %s)"), [p.reason])}`;
  return text;
}

// Error codes of a model reply that could not be used: each is a step of the run's budget
// (agents/react/executor.py), like a reply that calls tools.
const UNUSABLE_REPLIES = new Set(["parse_error", "empty_reply", "repeated_call_id"]);

// "3 steps · 4 tool calls", or "" before the first step.
function countsText(run) {
  if (!run.turns) return "";
  const steps = interpolate(ngettext("%s step", "%s steps", run.turns), [run.turns]);
  if (!run.toolCalls) return steps;
  const calls = interpolate(ngettext("%s tool call", "%s tool calls", run.toolCalls), [run.toolCalls]);
  return `${steps} · ${calls}`;
}

// After this long without a word about a working run, its title says what it waits for and
// counts the seconds, so a slow or hanging model does not look like a page that froze.
const SILENCE_HINT_MS = 4000;

// The engine's reason is English; the page says it by the limit's kind.
function budgetReachedText(p) {
  if (p.limit === "steps") return gettext("The run used its budget of steps.");
  if (p.limit === "tokens") return gettext("The run used its budget of tokens.");
  if (p.limit === "tool_calls" && p.tool) {
    return interpolate(gettext("The run used its budget of calls to %s."), [p.tool]);
  }
  return gettext("The run reached its budget.");
}

export class Thread {
  constructor(root, { onChange, onRegenerate, onFork, onEdit, onSwitch, onDecide, onContinue, onContinueAnswer, onAnswerShown, latestButton } = {}) {
    this.root = root;
    // An answer's server HTML was put in place (static/js/citations.js links its citations).
    this.onAnswerShown = onAnswerShown || (() => {});
    // "↓ Latest": shown while an answer is being written below where the reader scrolled to.
    this.latestButton = latestButton || null;
    if (this.latestButton) {
      this.latestButton.addEventListener("click", () => {
        this.scrollToEnd();
        this.updateLatestButton();
      });
      root.addEventListener("scroll", () => this.updateLatestButton(), { passive: true });
    }
    // Approval before side effects and Continue after a budget (docs/protocol.md).
    this.onDecide = onDecide || (() => {});
    this.onContinue = onContinue || (() => {});
    this.approvals = new Map(); // approval id -> {item, buttons, runId}
    this.onChange = onChange || (() => {});
    this.onRegenerate = onRegenerate || (() => {});
    // "Continue" on an answer that was stopped: a new run writes the rest of it.
    this.onContinueAnswer = onContinueAnswer || (() => {});
    this.onFork = onFork || (() => {});
    this.onEdit = onEdit || (() => {});
    this.onSwitch = onSwitch || (() => {});
    // The tree: every message's parent and role, each answer's run, each run's question.
    this.parentOf = new Map();
    this.roleOf = new Map();
    this.childrenOf = new Map(); // parent id (or "root") -> child ids
    this.runOfAnswer = new Map();
    this.answerOfRun = new Map();
    this.triggerOfRun = new Map();
    // A sub-agent's run -> the run whose call started it: drawn inside that run's steps.
    this.parentOfRun = new Map();
    this.leaf = null; // the message the shown branch ends at
    this.tailRun = null; // the run drawn last, if the branch ends with one
    this.live = false; // frames from now on move the leaf (the stored ones were replayed)
    this.shownRuns = [];
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

  // ---------------------------------------------------------------- the tree

  loadTree(tree) {
    if (!tree) return;
    for (const [id, parentId, role, runId] of tree.messages || []) {
      this.addNode(id, parentId, role);
      if (runId !== null && runId !== undefined) this.linkAnswer(id, runId);
    }
    for (const [runId, triggerId] of Object.entries(tree.run_triggers || {})) {
      this.triggerOfRun.set(Number(runId), triggerId);
    }
    this.leaf = tree.active_leaf_id ?? null;
  }

  // The stored frames are drawn: from now on frames are news, and the branch is shown.
  startLive() {
    this.live = true;
    // A run still going when the page opened (paused for approval, say) has its state said
    // once: the replay wrote only the title, and a status region left empty tells nothing.
    for (const run of this.runs.values()) if (!run.finished) this.updateStepsTitle(run);
    this.layout();
    this.refreshControls();
    window.setInterval(() => this.tickSilences(), 1000);
  }

  // A frame about a run: the silence it may have been in is over.
  heardFrom(runId) {
    const run = this.runs.get(runId);
    if (!run) return;
    run.heardAt = Date.now();
    if (run.silent) {
      run.silent = false;
      if (!run.finished) this.updateStepsTitle(run);
    }
  }

  // "Still waiting for the model… 12 s" on a running run nothing was heard of for a while:
  // after a tool call it is the tool that is awaited. The count changes in the title only;
  // the live region says once that the wait began.
  tickSilences() {
    const now = Date.now();
    for (const run of this.runs.values()) {
      if (run.finished || run.stopping || run.status !== "running" || run.waitingOnChild) continue;
      const quiet = now - run.heardAt;
      if (quiet < SILENCE_HINT_MS) continue;
      const lastStep = run.list.lastElementChild;
      const onTool = lastStep?.classList.contains("action") && !run.liveThought;
      const seconds = Math.floor(quiet / 1000);
      run.summaryText.textContent = onTool
        ? interpolate(gettext("Still waiting for the tool… %s s"), [seconds])
        : interpolate(gettext("Still waiting for the model… %s s"), [seconds]);
      if (!run.silent) {
        run.silent = true;
        run.progress.textContent = onTool
          ? gettext("Still waiting for the tool…")
          : gettext("Still waiting for the model…");
      }
    }
  }

  addNode(id, parentId, role) {
    if (id === undefined || id === null || this.roleOf.has(id)) return;
    const parent = parentId ?? null;
    this.parentOf.set(id, parent);
    this.roleOf.set(id, role);
    const key = parent === null ? "root" : parent;
    if (!this.childrenOf.has(key)) this.childrenOf.set(key, []);
    const children = this.childrenOf.get(key);
    children.push(id);
    children.sort((a, b) => a - b);
  }

  linkAnswer(messageId, runId) {
    this.runOfAnswer.set(messageId, runId);
    this.answerOfRun.set(runId, messageId);
  }

  // A run's question became known; a new run seen live is what the branch now waits on.
  noteTrigger(runId, triggerId) {
    if (runId === null || runId === undefined || triggerId === null || triggerId === undefined) {
      return;
    }
    if (this.triggerOfRun.has(runId)) return;
    this.triggerOfRun.set(runId, triggerId);
    if (this.live && !this.answerOfRun.has(runId)) this.leaf = triggerId;
  }

  // A regenerate the server accepted: show its run under the question at once.
  expectRun(runId, triggerId) {
    this.noteTrigger(runId, triggerId);
    this.ensureRun(runId);
    this.layout();
    this.refreshControls();
    this.onChange(this);
  }

  // A Continue of a stopped answer the server accepted: the new run takes the stopped
  // answer's place on the branch, starting with its text, and writes on from there (its
  // live answer repeats that text first, then the rest).
  expectContinuation(runId, triggerId, stoppedRunId) {
    this.expectRun(runId, triggerId);
    const stopped = this.runs.get(stoppedRunId);
    const run = this.runs.get(runId);
    if (run && stopped?.partialText && !run.liveAnswer && !run.finished) {
      this.setAnswerText(run, stopped.partialText);
    }
  }

  branch() {
    const path = [];
    const seen = new Set();
    for (let id = this.leaf; id !== null && id !== undefined && !seen.has(id); ) {
      seen.add(id);
      path.push(id);
      id = this.parentOf.get(id) ?? null;
    }
    return path.reverse();
  }

  siblings(id) {
    const parent = this.parentOf.get(id) ?? null;
    const role = this.roleOf.get(id);
    const all = this.childrenOf.get(parent === null ? "root" : parent) || [];
    return all.filter((other) => this.roleOf.get(other) === role);
  }

  answersOf(questionId) {
    return (this.childrenOf.get(questionId) || []).filter(
      (id) => this.roleOf.get(id) === "assistant",
    );
  }

  // Where a switch to `id` ends: the newest message below it (children come after parents,
  // so the newest is a leaf), as the server decides (agents/selectors.py).
  newestBelow(id) {
    let newest = id;
    const stack = [id];
    while (stack.length) {
      const node = stack.pop();
      if (node > newest) newest = node;
      stack.push(...(this.childrenOf.get(node) || []));
    }
    return newest;
  }

  // After a question the branch does not answer (it ends there, or goes on with another
  // question): its newest run, if no answer of it is newer (failed, stopped, or going).
  openRuns() {
    const newestOpen = new Map();
    const newestAnswered = new Map();
    for (const runId of this.runOrder) {
      const trigger = this.triggerOfRun.get(runId);
      if (trigger === undefined) continue;
      const target = this.answerOfRun.has(runId) ? newestAnswered : newestOpen;
      target.set(trigger, Math.max(target.get(trigger) || 0, runId));
    }
    const open = new Map();
    for (const [trigger, runId] of newestOpen) {
      if (runId > (newestAnswered.get(trigger) || 0)) open.set(trigger, runId);
    }
    return open;
  }

  switchTo(messageId) {
    const previous = this.leaf;
    const pressed = document.activeElement?.closest?.(".branch-switch button");
    this.leaf = this.newestBelow(messageId);
    this.layout();
    this.refreshControls();
    if (pressed) this.focusSwitcherOf(messageId, pressed.className);
    this.onChange(this);
    Promise.resolve(this.onSwitch(messageId)).then(
      (leaf) => {
        if (typeof leaf === "number" && leaf !== this.leaf) {
          // The server knew more of the branch (an answer whose frame is still on its way).
          const stillPressed = document.activeElement?.closest?.(".branch-switch button");
          this.leaf = leaf;
          this.layout();
          this.refreshControls();
          if (stillPressed) this.focusSwitcherOf(messageId, stillPressed.className);
        }
      },
      () => {
        this.leaf = previous; // not saved: show what the server still has
        this.layout();
        this.refreshControls();
      },
    );
  }

  // Keyboard users stay on the switcher they pressed, now drawn for the version shown.
  focusSwitcherOf(messageId, buttonClass) {
    const runId = this.runOfAnswer.get(messageId);
    const article = runId !== undefined ? this.runs.get(runId)?.root : this.messages.get(messageId);
    const bar = article?.querySelector(".branch-switch");
    if (!bar) return;
    const same = bar.querySelector(`.${buttonClass}`);
    (same && !same.disabled ? same : bar.querySelector("button:not(:disabled)"))?.focus();
  }

  // Draw the branch: each question, then the run that answered it on this branch.
  layout() {
    if (!this.live) return;
    const path = this.branch();
    const open = this.openRuns();
    const nodes = [];
    const shownRuns = [];
    const showRun = (runId) => {
      const run = this.runs.get(runId);
      if (!run) return;
      nodes.push(run.root);
      shownRuns.push(run);
    };
    path.forEach((id, index) => {
      if (this.roleOf.get(id) === "assistant") {
        const runId = this.runOfAnswer.get(id);
        if (runId !== undefined) {
          showRun(runId);
          this.setSwitcher(this.runs.get(runId), id);
        }
        return;
      }
      const element = this.messages.get(id);
      if (element) {
        nodes.push(element);
        this.setUserSwitcher(element, id);
      }
      const next = path[index + 1];
      if ((next === undefined || this.roleOf.get(next) !== "assistant") && open.has(id)) {
        const run = this.runs.get(open.get(id));
        showRun(open.get(id));
        if (run) this.setOpenRunSwitcher(run, id);
      }
    });
    // A run whose question is not known yet (its first frame is on the way) goes last.
    for (const runId of this.runOrder) {
      if (this.parentOfRun.has(runId)) continue; // drawn inside its parent's steps
      if (!this.triggerOfRun.has(runId) && !this.answerOfRun.has(runId)) showRun(runId);
    }
    const tail = nodes[nodes.length - 1];
    this.tailRun = shownRuns.find((run) => run.root === tail) || null;
    for (const { element } of this.pending.values()) nodes.push(element);
    if (nodes.length) this.root.querySelector("#empty-state")?.remove();
    this.place(nodes);
    this.shownRuns = shownRuns;
    this.placeSummaryMarker();
  }

  // Put `nodes` in the thread in order, moving as little as possible: a message being
  // edited keeps its focus when a frame of another branch arrives.
  place(nodes) {
    const current = [...this.root.children].filter(
      (node) => node !== this.summaryNode && node.id !== "empty-state",
    );
    const kept = current.findIndex((node, index) => node !== nodes[index]);
    const prefix = kept === -1 ? current.length : kept;
    if (prefix === current.length) {
      this.root.append(...nodes.slice(prefix));
      return;
    }
    const empty = this.root.querySelector("#empty-state");
    this.root.replaceChildren(...(empty ? [empty] : []), ...nodes);
  }

  switcher(label, position, count, onPrevious, onNext) {
    const previous = el("button", {
      className: "branch-previous",
      text: "‹",
      attrs: { type: "button", "aria-label": gettext("Previous version"), disabled: position <= 1 },
    });
    const next = el("button", {
      className: "branch-next",
      text: "›",
      attrs: { type: "button", "aria-label": gettext("Next version"), disabled: position >= count },
    });
    previous.addEventListener("click", onPrevious);
    next.addEventListener("click", onNext);
    return el(
      "div",
      { className: "branch-switch", attrs: { role: "group", "aria-label": label } },
      previous,
      el("span", { className: "branch-position", text: `${position} / ${count}` }),
      next,
    );
  }

  placeSwitcher(container, bar) {
    const old = container.querySelector(":scope > .branch-switch");
    if (old && bar) old.replaceWith(bar);
    else if (old) old.remove();
    else if (bar) container.append(bar);
  }

  setUserSwitcher(article, id) {
    const versions = this.siblings(id);
    const at = versions.indexOf(id);
    const bar =
      versions.length > 1
        ? this.switcher(
            gettext("Versions of this question"),
            at + 1,
            versions.length,
            () => this.switchTo(versions[at - 1]),
            () => this.switchTo(versions[at + 1]),
          )
        : null;
    const tools = article.querySelector(".msg-tools");
    if (tools) this.placeSwitcher(tools, bar);
  }

  setSwitcher(run, answerId) {
    if (!run) return;
    const versions = this.siblings(answerId);
    const at = versions.indexOf(answerId);
    const bar =
      versions.length > 1
        ? this.switcher(
            gettext("Versions of this answer"),
            at + 1,
            versions.length,
            () => this.switchTo(versions[at - 1]),
            () => this.switchTo(versions[at + 1]),
          )
        : null;
    this.placeSwitcher(run.branchBar, bar);
  }

  // A run with no answer after answers of the same question: it is the newest version.
  setOpenRunSwitcher(run, questionId) {
    const answers = this.answersOf(questionId);
    const bar = answers.length
      ? this.switcher(
          gettext("Versions of this answer"),
          answers.length + 1,
          answers.length + 1,
          () => this.switchTo(answers[answers.length - 1]),
          () => {},
        )
      : null;
    this.placeSwitcher(run.branchBar, bar);
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
      case "run.waiting":
        this.runWaiting(p);
        break;
      case "memory.summarized":
        // A summary of another branch is not this branch's memory.
        if (this.branch().includes(p.covers_through)) {
          this.setSummary({ through_message_id: p.covers_through, text: p.text || "" });
        }
        break;
      default:
        return false;
    }
    if (this.live && p.run_id !== undefined && p.run_id !== null) this.heardFrom(p.run_id);
    if (this.treeChanged) {
      this.treeChanged = false;
      this.layout();
    }
    this.placeSummaryMarker();
    this.refreshControls();
    // The end of a run adds its footer below the answer; following it would pull the answer
    // up under the reader's eyes.
    if (wasNearBottom && frame.type !== "run.finished") this.scrollToEnd();
    this.updateLatestButton();
    this.onChange(this);
    return true;
  }

  updateLatestButton() {
    if (!this.latestButton) return;
    this.latestButton.hidden = this.nearBottom() || this.workingRunIds().length === 0;
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
    this.root.querySelector("#empty-state")?.remove();
    this.root.append(element);
    this.pending.set(clientId, { element, content });
    this.scrollToEnd();
  }

  // A message held back until the answer being written ends (static/js/chat.js): it says so,
  // and Cancel takes it back before it is sent.
  markQueued(clientId, onCancel) {
    const entry = this.pending.get(clientId);
    if (!entry) return;
    entry.element.classList.add("queued");
    const cancel = el("button", {
      className: "cancel-queued",
      text: gettext("Cancel"),
      attrs: { type: "button", "aria-label": gettext("Cancel this queued message") },
    });
    cancel.addEventListener("click", () => onCancel(clientId));
    entry.note = el(
      "p",
      { className: "queued-note", attrs: { role: "status" } },
      el("span", { text: gettext("Queued: it will be sent when the answer finishes.") }),
      " ",
      cancel,
    );
    entry.element.append(entry.note);
  }

  // A queued message went to the server: it is an ordinary pending one now.
  markSent(clientId) {
    const entry = this.pending.get(clientId);
    if (!entry?.note) return;
    entry.note.remove();
    entry.note = null;
    entry.element.classList.remove("queued");
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
      this.answerArrived(message, runId);
      const run = this.ensureRun(runId);
      if (run) {
        run.messageId = message.id;
        this.messages.set(message.id, run.root);
        if (!run.finished && message.content) this.setAnswerText(run, message.content);
      }
      return;
    }
    if (this.messages.has(message.id)) return;
    this.addNode(message.id, message.parent_id, "user");
    if (this.live) this.leaf = message.id;
    if (runId !== null && runId !== undefined && !this.triggerOfRun.has(runId)) {
      this.triggerOfRun.set(runId, message.id);
    }
    this.treeChanged = true;
    const pending = message.client_id && this.pending.get(message.client_id);
    let element;
    if (pending) {
      this.pending.delete(message.client_id);
      element = pending.element;
      element.classList.remove("pending");
      this.attachUserTools(element, message.id, message.content);
    } else {
      element = this.userBubble(message.content || "", message.id);
    }
    element.dataset.messageId = message.id;
    if (message.edited_from) {
      element.querySelector(".msg-tools")?.prepend(
        el("span", { className: "muted small", text: gettext("edited and asked again") }),
      );
    }
    this.messages.set(message.id, element);
    if (runId !== null && runId !== undefined) this.ensureRun(runId);
  }

  userBubble(content, messageId) {
    const bubble = el("div", { className: "bubble", text: content });
    const article = el(
      "article",
      { className: "msg user", attrs: { "aria-label": gettext("You said") } },
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
      text: gettext("Edit"),
      attrs: { type: "button", "aria-label": gettext("Edit this message and ask again") },
    });
    edit.addEventListener("click", () => this.openEditor(article, messageId, content));
    article.append(el("div", { className: "msg-tools" }, edit));
  }

  openEditor(article, messageId, content) {
    if (article.querySelector(".edit-box")) return;
    const bubble = article.querySelector(".bubble");
    const tools = article.querySelector(".msg-tools");
    const textarea = el("textarea", { attrs: { "aria-label": gettext("Edit your message") } });
    textarea.value = content;
    const cancel = el("button", { className: "button", text: gettext("Cancel"), attrs: { type: "button" } });
    const save = el("button", {
      className: "button primary",
      text: gettext("Send as a new question"),
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
    const summaryText = el("span", { className: "steps-title", text: gettext("Waiting for the agent…") });
    const spinner = el("span", { className: "spinner", attrs: { "aria-hidden": "true" } });
    const summary = el("summary", {}, spinner, summaryText);
    const list = el("ol", { className: "step-list", attrs: { "aria-label": gettext("Agent steps") } });
    const details = el("details", { className: "steps", attrs: { open: "" } }, summary, list);
    // The steps' progress, said to screen readers as it changes (the summary is not live).
    const progress = el("span", { className: "visually-hidden steps-progress", attrs: { role: "status" } });
    const answer = el("div", {
      className: "answer",
      attrs: { role: "group", "aria-live": "polite", "aria-busy": "true", "aria-label": gettext("Answer") },
    });
    const footer = el("div", { className: "run-footer" });
    const root = el(
      "article",
      { className: "msg assistant in-progress", attrs: { "aria-label": gettext("Assistant") }, dataset: { runId } },
      details,
      progress,
      answer,
      footer,
    );
    const branchBar = el("div", { className: "branch-bar" });
    root.append(branchBar);
    run = {
      id: runId,
      root,
      branchBar,
      details,
      summaryText,
      progress,
      spinner,
      list,
      answer,
      footer,
      stepCount: 0, // items in the list
      turns: 0, // steps as budgets count them (countStep)
      toolCalls: 0,
      lastKind: "",
      heardAt: Date.now(), // when a frame about the run last came (tickSilences)
      silent: false,
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
    this.treeChanged = true;
    // A run that may still write its answer here: fetch the renderer before its words come.
    if (this.live) loadMarkdown();
    return run;
  }

  // An answer was stored: it joins the tree under its question, and ends the branch if the
  // branch still ended at that question (as on the server). The page's tree is read before
  // its frames, so an answer it does not know yet was stored after that read, stored frames
  // included: the server moved the branch to it then too.
  answerArrived(message, runId) {
    if (!message || message.id === undefined || this.roleOf.has(message.id)) return;
    const question = message.parent_id ?? this.triggerOfRun.get(runId) ?? null;
    this.addNode(message.id, question, "assistant");
    if (runId !== null && runId !== undefined) this.linkAnswer(message.id, runId);
    if (question !== null && this.leaf === question) this.leaf = message.id;
    this.treeChanged = true;
  }

  runStarted(p) {
    if (p.parent_run_id !== undefined && p.parent_run_id !== null) {
      this.nestChildRun(p);
    } else {
      this.noteTrigger(p.run_id, p.trigger_message_id);
    }
    const run = this.ensureRun(p.run_id);
    if (!run || run.finished) return;
    // After a pause that ended (a decision, a Continue, the end of its sub-agents) nothing
    // was interrupted.
    const afterPause = run.resumedAfterPause || run.status === "awaiting_subagent";
    run.status = "running";
    run.resumedAfterPause = false;
    if (p.attempt > 1 && !afterPause) {
      // What an interrupted attempt was writing will be written again.
      this.dropLiveThought(run);
      run.liveAnswer = null;
      run.deltaText = "";
      run.answer.replaceChildren();
      run.list.append(
        el("li", {
          className: "step note",
          text: interpolate(gettext("Picked up again after an interruption (attempt %s); no step is repeated."), [p.attempt]),
        }),
      );
    }
    this.updateStepsTitle(run);
  }

  // A sub-agent's run (docs/protocol.md, run.started's parent_run_id): its steps and answer
  // are drawn as one step of its parent, under the call that started it.
  nestChildRun(p) {
    if (this.parentOfRun.has(p.run_id)) return;
    this.parentOfRun.set(p.run_id, p.parent_run_id);
    const parent = this.ensureRun(p.parent_run_id);
    const child = this.ensureRun(p.run_id);
    if (!parent || !child) return;
    child.root.classList.add("subagent");
    child.root.setAttribute("aria-label", interpolate(gettext("Sub-agent %s"), [p.profile || ""]));
    child.root.dataset.parentRunId = p.parent_run_id;
    child.branchBar.remove();
    const label = el("span", { className: "step-label", text: interpolate(gettext("Sub-agent %s"), [p.profile || ""]) });
    const item = el("li", { className: "step subagent-step", dataset: { callId: p.parent_call_id || "" } }, label, child.root);
    parent.list.append(item);
    parent.stepCount += 1;
    this.updateStepsTitle(parent);
  }

  // The count is in steps as budgets count them (docs/protocol.md, "Steps"): one model reply
  // that calls tools, or that could not be used, is one step however many items it shows.
  updateStepsTitle(run) {
    const done = countsText(run);
    if (!run.finished) {
      const after = done ? ` · ${done}` : "";
      let title = `${gettext("Working…")}${after}`;
      if (run.stopping) title = gettext("Stopping…");
      else if (run.liveAnswer) title = `${gettext("Writing the answer…")}${after}`;
      else if (run.liveThought) title = `${gettext("Thinking…")}${after}`;
      // A run whose sub-agent waits for approval waits for the owner too.
      else if (run.status === "awaiting_approval" || run.waitingOnChild) title = `${gettext("Waiting for you: approve or deny the call")}${after}`;
      else if (run.status === "out_of_budget") title = `${gettext("Waiting for you: the run reached its budget")}${after}`;
      else if (run.status === "awaiting_subagent") title = `${gettext("Waiting for its sub-agent…")}${after}`;
      else if (run.status === "queued" && run.stepCount === 0) title = gettext("Waiting for the agent…");
      run.summaryText.textContent = title;
    } else if (done) {
      run.summaryText.textContent = done;
    } else {
      run.summaryText.textContent = run.stepCount ? gettext("Reasoning") : gettext("No steps");
    }
    // Live, and only while the run goes on: a finished run is not news, and the replayed
    // frames are not said one by one (startLive says where they left the run).
    if (this.live && !run.finished && run.progress.textContent !== run.summaryText.textContent) {
      run.progress.textContent = run.summaryText.textContent;
    }
  }

  // A step (as budgets count) begins with the first call of a reply, or with a reply that
  // could not be used; the calls are counted apart.
  countStep(run, p) {
    if (p.kind === "action") {
      if (run.lastKind !== "action") run.turns += 1;
      run.toolCalls += 1;
    } else if (p.kind === "error" && UNUSABLE_REPLIES.has(p.code)) {
      run.turns += 1;
    }
    run.lastKind = p.kind;
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
      item.querySelector(".badge").textContent = `${gettext("error")} · ${previous.dataset.code || gettext("failed")}`;
      previous.remove();
      run.stepCount -= 1;
    }
    if (!item.isConnected) run.list.append(item);
    run.stepCount += 1;
    this.countStep(run, p);
    if (run.status === "queued") run.status = "running";
    this.updateStepsTitle(run);
  }

  stepItem(p) {
    switch (p.kind) {
      case "thought":
        return el(
          "li",
          { className: "step thought" },
          el("span", { className: "step-label", text: gettext("Thought") }),
          el("span", { className: "step-text", text: p.text || "" }),
        );
      case "action":
        return el(
          "li",
          { className: "step action" },
          el("span", { className: "step-label", text: gettext("Action") }),
          el("code", { className: "tool-name", text: p.tool || "" }),
          el("pre", {
            className: "tool-input",
            text: formatToolInput(p.tool_input ?? ""),
            attrs: { "aria-label": gettext("Tool input") },
          }),
        );
      case "observation": {
        const item = el(
          "li",
          { className: `step observation${p.is_error ? " is-error" : ""}` },
          el("span", { className: "step-label", text: gettext("Observation") }),
          p.tool ? el("code", { className: "tool-name", text: p.tool }) : null,
          p.is_error ? el("span", { className: "badge", text: gettext("error") }) : null,
          el("pre", { className: "observation-text", text: p.text || "" }),
        );
        const files = sandboxFiles(p.text || "");
        if (files) item.append(files);
        if (p.truncated) {
          item.append(el("p", { className: "muted small", text: gettext("(cut short for the model)") }));
        }
        return item;
      }
      case "error":
        return el(
          "li",
          { className: "step error", dataset: { code: p.code || "" } },
          el("span", { className: "step-label", text: gettext("Error") }),
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
        el("span", { className: "step-label", text: gettext("Thought") }),
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
    // The steps fold when the answer starts, not when the run ends: folding then would pull
    // the answer up under the reader's eyes. What the reader opened stays open.
    if (text && !run.answerStarted) {
      run.answerStarted = true;
      if (!run.userToggled) run.details.open = false;
    }
    if (run.renderQueued) return;
    run.renderQueued = true;
    window.requestAnimationFrame(() => {
      run.renderQueued = false;
      if (run.finished) return;
      if (!markdown) {
        loadMarkdown().then(() => {
          if (!run.finished) this.setAnswerText(run, run.pendingAnswer);
        });
        return;
      }
      const wasNearBottom = this.nearBottom();
      run.answer.classList.toggle("streaming", Boolean(run.pendingAnswer));
      run.answer.replaceChildren(markdown.renderMarkdown(run.pendingAnswer));
      decorateCode(run.answer);
      if (wasNearBottom) this.scrollToEnd();
      this.updateLatestButton();
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
        entry.status.textContent = gettext("Stopped before a decision: the call did not run");
      }
    }
    run.continueNote?.querySelector("button")?.remove();
    run.root.classList.remove("paused", "in-progress");
    this.childEnded(run);
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
      this.answerArrived(message, p.run_id);
    }
    const limitNote = LIMIT_NOTES[p.stop_reason] ? gettext(LIMIT_NOTES[p.stop_reason]) : undefined;
    if (limitNote) {
      run.list.append(el("li", { className: "step note", text: limitNote }));
    }
    this.finish(run, "succeeded");
    if (typeof message.html === "string") {
      // Sanitised on the server by agents/rendering.py; model text is never parsed here.
      run.answer.innerHTML = message.html;
      decorateCode(run.answer);
      this.onAnswerShown(run.answer);
    } else {
      // A sub-agent's answer is its parent's observation, not a message: plain text.
      run.answer.textContent = message.content || p.answer || run.deltaText;
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
      const total = (prompt + completion).toLocaleString(pageLanguage());
      parts.push(
        interpolate(
          gettext("%(total)s tokens (%(prompt)s in, %(completion)s out)"),
          { total, prompt: prompt.toLocaleString(pageLanguage()), completion: completion.toLocaleString(pageLanguage()) },
          true,
        ),
      );
    }
    if (limitNote) parts.push(gettext("stopped at a limit"));
    run.footer.replaceChildren(el("span", { className: "usage", text: parts.join(" · ") }));
  }

  runFailed(p) {
    const run = this.ensureRun(p.run_id);
    if (!run || run.finished) return;
    this.finish(run, "failed");
    const text = failureText(p);
    run.answer.replaceChildren(
      el(
        "p",
        { className: "run-status failed", attrs: { role: "status" } },
        el("strong", { text: `${gettext("The run failed.")} ` }),
        el("span", { text }),
      ),
    );
  }

  runCancelled(p) {
    const run = this.ensureRun(p.run_id);
    if (!run || run.finished) return;
    if (p.message && p.message.id !== undefined) {
      run.messageId = p.message.id;
      this.messages.set(p.message.id, run.root);
      this.answerArrived(p.message, p.run_id);
    }
    this.finish(run, "cancelled");
    const partial = p.partial_answer || run.deltaText || "";
    // What was kept of the answer (a message): Copy takes it, and Continue writes the rest.
    run.partialText = p.message && p.message.id !== undefined ? p.message.content || "" : "";
    if (p.message && typeof p.message.html === "string") {
      // Sanitised on the server, like a finished answer.
      run.answer.innerHTML = p.message.html;
      decorateCode(run.answer);
      this.onAnswerShown(run.answer);
    } else if (partial) {
      run.answer.append(el("p", { className: "step-text", text: partial }));
    }
    run.answer.append(
      el("p", { className: "run-status cancelled", attrs: { role: "status" }, text: gettext("Stopped") }),
    );
    if (run.partialText) decorateAnswer(run.footer, p.message);
  }

  // ---------------------------------------------------------------- pauses

  // The run waits for the owner to approve or deny one tool call (approval.requested).
  approvalRequested(p) {
    const run = this.ensureRun(p.run_id);
    if (!run || run.finished || this.approvals.has(p.approval_id)) return;
    // The runs waiting on this sub-agent wait for the owner too.
    for (let up = this.parentOfRun.get(run.id); up !== undefined; up = this.parentOfRun.get(up)) {
      const waiting = this.runs.get(up);
      if (!waiting || waiting.finished) break;
      waiting.root.classList.add("paused");
      waiting.waitingOnChild = true;
      this.updateStepsTitle(waiting);
    }
    this.dropLiveThought(run);
    run.status = "awaiting_approval";
    run.root.classList.add("paused");
    const reason = el("input", {
      className: "approval-reason",
      attrs: { type: "text", maxlength: "2000", "aria-label": gettext("Reason for denying (optional)"), placeholder: gettext("Reason (optional)") },
    });
    const approve = el("button", { className: "button primary approve", text: gettext("Approve"), attrs: { type: "button" } });
    const deny = el("button", { className: "button deny", text: gettext("Deny"), attrs: { type: "button" } });
    const buttons = el("div", { className: "approval-buttons" }, approve, deny, reason);
    const status = el("p", { className: "approval-status", attrs: { role: "status" } });
    const item = el(
      "li",
      { className: "step approval pending", dataset: { approvalId: p.approval_id } },
      el("span", { className: "step-label", text: gettext("Approval needed") }),
      el("code", { className: "tool-name", text: p.tool || "" }),
      el("pre", { className: "tool-input", text: formatToolInput(p.tool_input ?? ""), attrs: { "aria-label": gettext("Tool input") } }),
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
      entry.status.textContent = approvalOutcome(p);
    }
    if (run && !run.finished) {
      if (![...this.approvals.values()].some((a) => a.runId === run.id && a.item.classList.contains("pending"))) {
        run.status = "queued";
        run.resumedAfterPause = true;
        run.root.classList.remove("paused");
        for (let up = this.parentOfRun.get(run.id); up !== undefined; up = this.parentOfRun.get(up)) {
          const waiting = this.runs.get(up);
          if (!waiting || waiting.finished) break;
          waiting.root.classList.remove("paused");
          waiting.waitingOnChild = false;
          this.updateStepsTitle(waiting);
        }
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
    const label = steps
      ? interpolate(ngettext("Continue (+%s step)", "Continue (+%s steps)", steps), [steps])
      : gettext("Continue");
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
      el("span", { text: budgetReachedText(p) }),
      " ",
      button,
    );
    run.list.append(run.continueNote);
    run.details.hidden = false;
    run.details.open = true;
    this.updateStepsTitle(run);
  }

  // The run paused, holding no worker, until its sub-agents have ended (run.waiting); the
  // end of the last one queues it again.
  runWaiting(p) {
    const run = this.ensureRun(p.run_id);
    if (!run || run.finished) return;
    this.dropLiveThought(run);
    run.status = "awaiting_subagent";
    this.updateStepsTitle(run);
  }

  // A sub-agent ended: a parent waiting for it goes on once none of its children is left.
  childEnded(child) {
    const parentId = this.parentOfRun.get(child.id);
    const parent = parentId === undefined ? undefined : this.runs.get(parentId);
    if (!parent || parent.finished) return;
    const left = [...this.parentOfRun]
      .filter(([id, up]) => up === parentId && !this.runs.get(id)?.finished)
      .map(([id]) => this.runs.get(id));
    // Still waiting for the owner only if another of its sub-agents is.
    parent.waitingOnChild = left.some((other) => other.status === "awaiting_approval" || other.waitingOnChild);
    if (!parent.waitingOnChild) parent.root.classList.remove("paused");
    if (parent.status === "awaiting_subagent" && !left.length) {
      parent.status = "queued";
      parent.resumedAfterPause = true;
    }
    this.updateStepsTitle(parent);
  }

  runContinued(p) {
    const run = this.ensureRun(p.run_id);
    if (!run || run.finished) return;
    run.continueNote?.querySelector("button")?.remove();
    run.continueNote?.append(el("span", { className: "muted small", text: ` ${gettext("Continued.")}` }));
    run.continueNote = null;
    run.status = "queued";
    run.resumedAfterPause = true;
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

  // The last run the shown branch draws: its Regenerate asks the branch's question again.
  lastRun() {
    return this.pending.size ? null : this.tailRun;
  }

  refreshControls() {
    this.refreshForkButtons();
    for (const button of this.root.querySelectorAll(".regenerate, .continue-answer")) button.remove();
    const last = this.lastRun();
    if (!last || !last.finished || this.activeRunIds().length) return;
    if (last.status === "cancelled" && last.partialText && last.messageId !== undefined) {
      const more = el("button", {
        className: "continue-answer",
        text: gettext("Continue"),
        attrs: {
          type: "button",
          "aria-label": gettext("Continue writing this answer"),
          title: gettext("Write the rest of this answer from where it was stopped"),
        },
      });
      more.addEventListener("click", () => {
        more.disabled = true;
        Promise.resolve(this.onContinueAnswer(last.messageId, last.id)).finally(() => {
          more.disabled = false;
        });
      });
      last.footer.append(more);
    }
    const button = el("button", {
      className: "regenerate",
      text: gettext("Regenerate"),
      attrs: { type: "button", title: gettext("Ask the last question again") },
    });
    button.addEventListener("click", () => {
      button.disabled = true;
      Promise.resolve(this.onRegenerate()).finally(() => {
        button.disabled = false;
      });
    });
    last.footer.append(button);
  }

  // "Retry from here" on each turn of an ended run (docs/architecture.md, "Forking a run"):
  // a thought, or an action that follows no thought or action of its own reply. The server
  // cuts at the same place.
  refreshForkButtons() {
    const busy = this.activeRunIds().length > 0;
    for (const [runId, run] of this.runs) {
      for (const button of run.list.querySelectorAll(".fork-step")) button.remove();
      if (!run.finished || busy) continue;
      for (const item of run.list.querySelectorAll("li.step[data-seq]")) {
        const previous = item.previousElementSibling;
        const startsTurn =
          item.classList.contains("thought") ||
          (item.classList.contains("action") &&
            !(previous?.classList.contains("thought") || previous?.classList.contains("action")));
        if (!startsTurn) continue;
        const button = el("button", {
          className: "fork-step",
          text: gettext("Retry from here"),
          attrs: {
            type: "button",
            title: gettext("Keep the steps before this one and ask the agent again from here"),
          },
        });
        button.addEventListener("click", () => {
          button.disabled = true;
          Promise.resolve(this.onFork(runId, Number(item.dataset.seq))).finally(() => {
            button.disabled = false;
          });
        });
        item.append(button);
      }
    }
  }

  // Memory folded the turns up to one message into a summary (agents/memory/): a quiet,
  // openable marker after that message. Only the newest summary is in use, so one marker.
  setSummary(summary) {
    this.summary = summary || null;
    if (this.summary && !this.summaryNode) {
      this.summaryNode = el(
        "details",
        { className: "summary-marker" },
        el("summary", { text: gettext("Earlier messages are summarised for the agent") }),
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
    if (!this.summaryNode) return;
    const after = this.summary && this.messages.get(this.summary.through_message_id);
    if (!after || !after.isConnected) {
      this.summaryNode.remove(); // its message is not on the branch shown
      return;
    }
    if (after.nextSibling !== this.summaryNode) after.after(this.summaryNode);
  }
}

// The files the python tool saved, named in its observation by their URL (docs/protocol.md,
// "Sandbox files"): PNG figures shown under the step, other files as downloads. The server
// serves them only to the conversation's owner; anyone else's page gets a 404.
const SANDBOX_FILE = /^- (.+) \(([\w.+-]+\/[\w.+-]+), [^)]*\): (\/sandbox-files\/[0-9a-f-]{36}\/[^\s/]+)$/gm;

function sandboxFiles(text) {
  const found = [...text.matchAll(SANDBOX_FILE)];
  if (!found.length) return null;
  const list = el("ul", { className: "sandbox-files" });
  for (const [, name, type, url] of found) {
    const link = el("a", { text: name, attrs: { href: url, download: name } });
    const item = el("li", {}, link);
    if (type === "image/png") {
      item.prepend(el("img", { attrs: { src: url, alt: name, loading: "lazy" } }));
    }
    list.append(item);
  }
  return list;
}
