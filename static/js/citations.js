// An answer cites a file it used as [report.pdf p.3], [towns.csv rows 2-40] or [notes.txt]
// (agents/tools/builtin/attachments.py). Where the name is one of the conversation's files,
// the citation becomes a link that opens the file there: a PDF at its page (#page=3), a
// table at its row (the rows page), anything else the file itself. Text stays text: only
// text nodes are read, and links are built with the DOM.

const CITATION = /\[([^\[\]\n]{1,200}?)(?: (p\.\s?(\d+)|slide (\d+)|(?:[^\[\]\n]* )?rows? (\d+)(?:-\d+)?))?\]/g;
const SKIP = new Set(["A", "CODE", "PRE"]);

// Whether `root`'s text holds anything shaped like a citation of a file (a name with an
// extension in brackets): only then are the conversation's files asked for.
export function mayCite(root) {
  return /\[[^\[\]\n]{1,200}\.[A-Za-z0-9]{1,5}(?: [^\[\]\n]*)?\]/.test(root?.textContent || "");
}

export function citationHref(file, page, row) {
  if (file.kind === "pdf" && page) return `${file.url}#page=${page}`;
  if (file.rows_url && row) return `${file.rows_url}?row=${row}#row-${row}`;
  return file.url;
}

// Link the citations under `root`; `files`: the conversation's files by name.
export function linkCitations(root, files) {
  if (!root || !files.size) return;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const texts = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    let parent = node.parentElement;
    let skipped = false;
    while (parent && parent !== root) {
      if (SKIP.has(parent.tagName)) skipped = true;
      parent = parent.parentElement;
    }
    if (!skipped && node.nodeValue.includes("[")) texts.push(node);
  }
  for (const node of texts) {
    const text = node.nodeValue;
    const pieces = [];
    let last = 0;
    for (const match of text.matchAll(CITATION)) {
      const file = files.get(match[1].trim());
      if (!file) continue;
      pieces.push(text.slice(last, match.index));
      const link = document.createElement("a");
      link.className = "citation";
      link.href = citationHref(file, match[3] || match[4], match[5]);
      link.target = "_blank";
      link.rel = "noopener";
      link.textContent = match[0];
      pieces.push(link);
      last = match.index + match[0].length;
    }
    if (!pieces.length) continue;
    pieces.push(text.slice(last));
    node.replaceWith(...pieces);
  }
}
