// Starting points on an empty chat: the chosen agent's suggested prompts (set per profile in
// the admin) fill the message box and send it; the line under the agent picker says what the
// chosen agent is for. chat.js calls `setUpSuggestions` once.

export function setUpSuggestions() {
  const select = document.getElementById("profile-select");
  const description = document.getElementById("profile-description");
  const composer = document.getElementById("composer");
  const input = document.getElementById("composer-input");
  if (!select || !composer || !input) return;

  select.addEventListener("change", () => {
    for (const list of document.querySelectorAll(".suggestions")) {
      list.hidden = list.dataset.profile !== select.value;
    }
    if (description) description.textContent = select.selectedOptions[0]?.dataset.description || "";
  });

  for (const button of document.querySelectorAll(".suggestion")) {
    button.addEventListener("click", () => {
      input.value = button.dataset.prompt;
      input.dispatchEvent(new Event("input")); // the box grows to fit, as when typed
      composer.requestSubmit();
    });
  }
}
