// The schedule form: only the fields its "Repeats" choice uses are shown, and a new
// schedule starts in the browser's own time zone.
const form = document.getElementById("schedule-form");

function fieldBox(name) {
  return form.querySelector(`[data-field="${name}"]`);
}

function showFor(frequency) {
  const weekday = fieldBox("weekday");
  const nth = fieldBox("nth");
  if (weekday) weekday.hidden = !(frequency === "weekly" || frequency === "monthly");
  if (nth) nth.hidden = frequency !== "monthly";
}

if (form) {
  const frequency = form.querySelector("[name=frequency]");
  if (frequency) {
    showFor(frequency.value);
    frequency.addEventListener("change", () => showFor(frequency.value));
  }
  const zone = form.querySelector("[name=time_zone]");
  const browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const hasErrors = form.querySelector(".field-error, .form-errors");
  if (zone && form.dataset.new && browserZone && !hasErrors) zone.value = browserZone;
}
