// The player of a decoding's page (viz/playback.py): Plotly, the figures' template and each decoding's frames arrive
// gzip-compressed and base64-encoded in <script type="application/gzip+base64"> elements; this unpacks them in the
// browser and steps the panes of the <section class="bita-player">, one decoding each, through their frames
// together: frame i shows each pane's pass i, or its last pass once its decoding has ended.
"use strict";

async function inflated(id) {
  const bytes = Uint8Array.from(atob(document.getElementById(id).textContent.trim()), c => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Response(stream).text();
}

function pane(element, template, frames) {
  const part = name => element.querySelector(".bita-" + name);
  const spans = [...part("answer").querySelectorAll("[class*='bita-pass-']")]
    .map(span => [span, Number(span.className.match(/bita-pass-(\d+)/)[1])]);
  const options = {responsive: true, displaylogo: false};
  const last = frames.length - 1;
  let drawn = null;

  function draw(target, figure) {
    Plotly.react(target, figure.data, {...figure.layout, template}, options);
  }
  function show(index) {
    const shown = Math.min(index, last), frame = frames[shown];
    for (const [span, pass] of spans) {
      span.hidden = pass > index;
      span.classList.toggle("bita-new", pass === index);
      span.classList.toggle("bita-faded", pass < index);
    }
    part("title").textContent = index > last ? `${frame.title}; it has ended` : frame.title;
    part("story").innerHTML = frame.story;
    element.dataset.shown = shown;
    if (drawn !== shown) {
      draw(part("tree"), frame.tree);
      draw(part("attention"), frame.attention);
      drawn = shown;
    }
  }
  return {last, show};
}

function player(section, panes) {
  const part = name => section.querySelector(".bita-" + name);
  const last = Math.max(...panes.map(one => one.last));
  let shown = 0, timer = null;

  function show(index) {
    shown = Math.max(0, Math.min(last, index));
    for (const one of panes) one.show(shown);
    part("frame").value = shown;
    part("counter").textContent = `pass ${shown} of ${last}`;
    section.dataset.shown = shown;
  }
  function pause() {
    clearInterval(timer);
    timer = null;
    part("play").textContent = "▶ Play";
  }
  function play() {
    if (shown === last) show(0);
    part("play").textContent = "⏸ Pause";
    timer = setInterval(() => {
      show(shown + 1);
      if (shown === last) pause();
    }, 1000 / Number(part("speed").value));
  }
  part("play").addEventListener("click", () => (timer ? pause() : play()));
  part("back").addEventListener("click", () => { pause(); show(shown - 1); });
  part("forward").addEventListener("click", () => { pause(); show(shown + 1); });
  part("frame").addEventListener("input", () => { pause(); show(Number(part("frame").value)); });
  part("speed").addEventListener("change", () => { if (timer) { clearInterval(timer); play(); } });
  section.addEventListener("keydown", event => {
    const key = {ArrowLeft: "back", ArrowRight: "forward", " ": "play"}[event.key];
    if (key && event.target.tagName !== "SELECT") { event.preventDefault(); part(key).click(); }
  });
  show(0);
}

(async () => {
  const script = document.createElement("script");
  script.textContent = await inflated("bita-plotly");
  document.head.appendChild(script);
  const template = JSON.parse(await inflated("bita-template"));
  for (const section of document.querySelectorAll(".bita-player")) {
    const panes = [];
    for (const element of section.querySelectorAll(".bita-pane")) {
      panes.push(pane(element, template, JSON.parse(await inflated(element.dataset.frames))));
    }
    player(section, panes);
  }
  document.querySelector(".bita-loading").remove();
  document.body.dataset.ready = "true";
})();
