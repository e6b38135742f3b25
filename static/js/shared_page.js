// The shared page (templates/agents/shared.html): its answers' code blocks get the chat
// page's colours and Copy buttons. Everything else on the page works without a script.

import { decorateCode } from "./code_blocks.js";

for (const answer of document.querySelectorAll(".shared-thread .answer")) decorateCode(answer);
