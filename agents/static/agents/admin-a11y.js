// Django's two-list select widget (filter_horizontal) labels its filter icons with aria-label
// on a bare span, which assistive technology ignores; as an image the label is announced.
// The widget is built on window load, so this runs once every load handler has.
window.addEventListener("load", () => {
  setTimeout(() => {
    for (const icon of document.querySelectorAll(".search-label-icon[aria-label]:not([role])")) {
      icon.setAttribute("role", "img");
    }
  }, 0);
});
