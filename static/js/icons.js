// The app's own icons, drawn as inline SVG: emoji need an emoji font, which many systems
// lack (👍 showed as a box). Decorative: the button that holds one carries the name.

const SVG = "http://www.w3.org/2000/svg";

const PATHS = {
  // A thumb with its cuff; "down" is the same shape turned over.
  thumb:
    "M7 10v11H4a1 1 0 0 1-1-1v-9a1 1 0 0 1 1-1h3zm0 0 4-7a2 2 0 0 1 3 2l-1 5h5.5a2 2 0 0 1 2 2.3l-1.3 7A2 2 0 0 1 17.2 21H7",
  // Three dots (a "more" menu): zero-length strokes with round caps.
  more: "M5 12h.01M12 12h.01M19 12h.01",
};

const STROKE_WIDTH = { more: "3.5" };

export function icon(name, { size = 16, flip = false } = {}) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("width", String(size));
  svg.setAttribute("height", String(size));
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  svg.classList.add("icon", `icon-${name}`);
  const path = document.createElementNS(SVG, "path");
  path.setAttribute("d", PATHS[name]);
  path.setAttribute("fill", "none");
  path.setAttribute("stroke", "currentColor");
  path.setAttribute("stroke-width", STROKE_WIDTH[name] || "2");
  path.setAttribute("stroke-linejoin", "round");
  path.setAttribute("stroke-linecap", "round");
  if (flip) path.setAttribute("transform", "rotate(180 12 12)");
  svg.append(path);
  return svg;
}
