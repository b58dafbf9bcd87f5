"use strict";
// What every page of the dashboard shares: building elements, writing sizes and times, reading JSON.

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  for (const child of children) node.append(child instanceof Node ? child : String(child ?? ""));
  return node;
}

function size(bytes) {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (bytes >= 1000 && i < units.length - 1) { bytes /= 1000; i++; }
  return i === 0 ? `${bytes} B` : `${bytes.toFixed(1)} ${units[i]}`;
}
const time = (iso) => iso ? iso.replace("T", " ").replace(/\.\d+/, "").replace(/\+00:00$/, "") : "";

async function getJSON(url) {
  const response = await fetch(url, {cache: "no-store"});
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

// An event stream closed as its page is left: a browser keeps six connections per host, and a
// stream the server still holds open would make the seventh page wait for a free one.
function follow(url) {
  const source = new EventSource(url);
  window.addEventListener("pagehide", () => source.close());
  return source;
}

// Search hits (a dataset's full-text search, a segment's nearest frames) as table rows: the segment's
// page, the hit's time, its text or distance, and Rerun's viewer opened on the segment at that time.
function hitRows(dataset, hits, measure) {
  return hits.map((h) => el("tr", {"data-segment": h.segment, "data-time": h.time ?? ""},
    el("td", {}, el("a", {href: `/datasets/${encodeURIComponent(dataset)}/segments/${encodeURIComponent(h.segment)}`},
                     h.segment)),
    el("td", {}, h.time_text || "static"),
    el("td", {class: "wrap"}, h.text ?? ""),
    el("td", {}, h[measure].toFixed(4)),
    el("td", {}, h.viewer ? el("a", {href: h.viewer, target: "_blank", class: "viewer-hit"}, "open in viewer") : "")));
}
