// Follows an erasure request's rebuild jobs while they run: polls the
// request's progress (JSON, same origin) and updates the table, then reloads
// the page once the request is done so its certificate appears.
"use strict";

const POLL_MS = 1000;

async function poll(container) {
  const response = await fetch(container.dataset.url, { credentials: "same-origin" });
  if (!response.ok) return false;
  const body = await response.json();
  let done = 0;
  for (const job of body.jobs) {
    const row = container.querySelector(`tr[data-projection="${CSS.escape(job.projection)}"]`);
    if (row) {
      row.querySelector(".job-status").textContent = job.status;
      row.querySelector(".job-attempts").textContent = `${job.attempts} / ${job.max_attempts}`;
      row.querySelector(".job-error").textContent = job.last_error || "";
    }
    if (job.status === "done") done += 1;
  }
  const bar = document.getElementById("job-progress");
  bar.max = Math.max(body.jobs.length, 1);
  bar.value = done;
  document.getElementById("request-status").textContent = body.status;
  return body.done;
}

document.addEventListener("DOMContentLoaded", () => {
  const container = document.getElementById("progress");
  if (!container || container.dataset.done === "true") return;
  const timer = setInterval(async () => {
    try {
      if (await poll(container)) {
        clearInterval(timer);
        window.location.reload();
      }
    } catch (e) {
      clearInterval(timer);
    }
  }, POLL_MS);
});
