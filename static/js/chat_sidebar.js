// The chat page's conversation list, shown from the first paint (chat_start.js), and the
// channel on which this browser's other tabs hear about deletions and renames. chat.js, the
// rest of the page, takes both from here: one list and one channel per page.

import { Sidebar } from "./sidebar.js";

export const state = JSON.parse(document.getElementById("chat-state").textContent);

// Other tabs of this browser hear about deletions at once (a stale sidebar, a dead chat).
export const tabs = "BroadcastChannel" in window ? new BroadcastChannel("chatsite") : null;

export const sidebar = new Sidebar({
  list: document.getElementById("conversation-list"),
  search: document.getElementById("search"),
  status: document.getElementById("search-status"),
  currentId: state.conversation ? state.conversation.id : null,
  conversations: state.conversations || [],
  folders: state.folders || [],
  toast: document.getElementById("sidebar-toast"),
  onDeleted: (id) => tabs?.postMessage({ type: "conversation.deleted", id }),
  onChanged: () => tabs?.postMessage({ type: "sidebar.changed" }),
  tools: {
    newFolder: document.getElementById("new-folder"),
    selectToggle: document.getElementById("select-toggle"),
    bulkBar: document.getElementById("bulk-bar"),
    bulkCount: document.getElementById("bulk-count"),
    bulkArchive: document.getElementById("bulk-archive"),
    bulkDelete: document.getElementById("bulk-delete"),
    bulkCancel: document.getElementById("bulk-cancel"),
    folderDeleteDialog: document.getElementById("folder-delete-dialog"),
  },
});
// Deleted or renamed in another tab: the list follows, even before the rest of the page loads.
tabs?.addEventListener("message", (event) => {
  if (event.data?.type === "conversation.deleted") sidebar.forget(event.data.id);
  // Folders made, renamed or deleted, or a conversation moved, in another tab.
  if (event.data?.type === "sidebar.changed") sidebar.refresh();
  if (event.data?.type === "conversation.renamed") sidebar.retitle(event.data.id, event.data.title);
});
