// An evaluation's page in the admin, kept live over /ws/evaluations/<id>/ while its cases
// run (docs/protocol.md, "Evaluation progress"): the heading counts the cases checked, and
// each case's row shows pass or fail, its checks and its replay as the frame arrives. The
// socket's first frame is where the evaluation stands, so a page that reconnects misses
// nothing. Without scripts the page reloads itself instead (its <noscript> refresh).
import { gettext, interpolate, ngettext } from "./i18n.js";

const RETRY_MAX_MS = 30000;
const CLOSE_SIGNED_OUT = 4401;
const CLOSE_NOT_FOUND = 4404;

const report = document.getElementById("eval-report");
const heading = document.getElementById("eval-progress");
let attempt = 0;
let done = false;

function setHeading(evaluation) {
  heading.textContent =
    evaluation.status === "done"
      ? interpolate(gettext("%(passed)s of %(cases)s cases passed"), evaluation, true)
      : interpolate(gettext("Running: %(checked)s of %(cases)s cases checked"), evaluation, true);
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function resultCell(result) {
  const cell = document.createDocumentFragment();
  if (result.passed === null) {
    cell.append(element("span", "quiet", gettext("running…")));
    return cell;
  }
  cell.append(
    element(
      "strong",
      result.passed ? "eval-pass" : "eval-fail",
      result.passed ? gettext("pass") : gettext("fail"),
    ),
  );
  const list = element("ul", "eval-checks");
  for (const check of result.checks) {
    const item = element("li", "", `${check.passed ? "✓" : "✗"} ${check.expectation}`);
    if (check.detail && !check.passed) item.append(" ", element("span", "quiet", `(${check.detail})`));
    list.append(item);
  }
  cell.append(
    list,
    element(
      "span",
      "quiet",
      interpolate(
        ngettext("%(tokens)s tokens, %(steps)s step", "%(tokens)s tokens, %(steps)s steps", result.steps),
        { tokens: result.tokens, steps: result.steps },
        true,
      ),
    ),
  );
  return cell;
}

function showResult(result) {
  const row = report.querySelector(`tr[data-result="${result.id}"]`);
  if (!row) return;
  const state = result.passed === null ? "running" : result.passed ? "pass" : "fail";
  if (row.dataset.state !== state) {
    row.querySelector(".eval-result").replaceChildren(resultCell(result));
    row.dataset.state = state;
  }
  const replay = row.querySelector(".eval-replay");
  if (result.run_id && !replay.querySelector("a")) {
    const link = element(
      "a",
      "",
      interpolate(gettext("Run %(number)s"), { number: result.run_id }, true),
    );
    link.href = report.dataset.runUrl.replace("/0/", `/${result.run_id}/`);
    replay.replaceChildren(link);
  }
}

function onFrame(frame, ws) {
  if (frame.type !== "evaluation.progress") return;
  for (const result of frame.results) showResult(result);
  setHeading(frame.evaluation);
  report.dataset.status = frame.evaluation.status;
  report.dataset.checked = String(frame.evaluation.checked);
  if (frame.evaluation.status === "done") {
    done = true;
    ws.close(1000);
  }
}

function connect() {
  const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
  const id = report.dataset.evaluation;
  const ws = new WebSocket(`${scheme}//${window.location.host}/ws/evaluations/${id}/`);
  ws.addEventListener("open", () => {
    attempt = 0;
    report.dataset.live = "true";
  });
  ws.addEventListener("message", (event) => {
    let frame;
    try {
      frame = JSON.parse(event.data);
    } catch {
      return; // not a frame of ours
    }
    onFrame(frame, ws);
  });
  ws.addEventListener("close", (event) => {
    report.dataset.live = "false";
    if (done) return;
    // Signed out, or no longer allowed: the reload shows why.
    if (event.code === CLOSE_SIGNED_OUT || event.code === CLOSE_NOT_FOUND) {
      window.location.reload();
      return;
    }
    attempt += 1;
    setTimeout(connect, Math.min(RETRY_MAX_MS, 500 * 2 ** attempt));
  });
}

if (report && heading && report.dataset.status !== "done") connect();
