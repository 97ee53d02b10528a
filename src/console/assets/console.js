// The idemd console's only script: conveniences, never needed to act.
// Served from the binary (script-src 'self'); no inline code anywhere.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  // The list's order select shows the order the page was asked for.
  const params = new URLSearchParams(window.location.search);
  const order = document.querySelector("select[name=order]");
  if (order && params.get("order")) {
    order.value = params.get("order");
  }

  // UTC times in tables get the viewer's local time as a tooltip.
  const utc = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;
  for (const cell of document.querySelectorAll("td")) {
    const text = cell.textContent.trim().split(" ")[0];
    if (utc.test(text)) {
      cell.title = new Date(text).toLocaleString();
    }
  }

  // A confirmation's button can be pressed once: a double click must not
  // send the reconciliation twice (the server refuses the second by its
  // fence anyway).
  for (const form of document.querySelectorAll("section.confirm form")) {
    form.addEventListener("submit", () => {
      const button = form.querySelector("button[type=submit]");
      if (button) {
        button.disabled = true;
      }
    });
  }
});
