// The page's language for the app's modules: Django's JavaScript catalog (/jsi18n/, loaded
// by a classic script before any module) defines gettext and friends on window. Without it
// (a page that does not load the catalog) the English text shows.

const catalog = globalThis;

export const gettext = (text) => (catalog.gettext ? catalog.gettext(text) : text);

export const ngettext = (singular, plural, count) =>
  catalog.ngettext ? catalog.ngettext(singular, plural, count) : count === 1 ? singular : plural;

export const pgettext = (context, text) => (catalog.pgettext ? catalog.pgettext(context, text) : text);

// interpolate("%(title)s", { title }, true) or interpolate("%s of %s", [a, b]).
export function interpolate(format, values, named = false) {
  if (catalog.interpolate) return catalog.interpolate(format, values, named);
  if (named) return format.replace(/%\(\w+\)s/g, (match) => String(values[match.slice(2, -2)]));
  let at = 0;
  return format.replace(/%s/g, () => String(values[at++]));
}

// The page's language as the browser knows it (<html lang>), for Intl and toLocale*.
export const pageLanguage = () => document.documentElement.lang || undefined;

// Marks a string for the catalog where it is defined; gettext() translates it where shown.
export const gettext_noop = (text) => text;
