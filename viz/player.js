// The player of a decoding's page (viz/playback.py): Plotly and each player's frames arrive gzip-compressed and
// base64-encoded in <script type="application/gzip+base64"> elements; this unpacks them in the browser and steps
// each <section class="bita-player"> through its frames, one forward pass each.
"use strict";

async function inflated(id) {
  const bytes = Uint8Array.from(atob(document.getElementById(id).textContent.trim()), c => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Response(stream).text();
}

function player(section, template, frames) {
  const part = name => section.querySelector(".bita-" + name);
  const spans = [...part("answer").querySelectorAll("[class*='bita-pass-']")]
    .map(span => [span, Number(span.className.match(/bita-pass-(\d+)/)[1])]);
  const options = {responsive: true, displaylogo: false};
  const last = frames.length - 1;
  let shown = 0, timer = null;

  function draw(element, figure) {
    Plotly.react(element, figure.data, {...figure.layout, template}, options);
  }
  function show(index) {
    shown = Math.max(0, Math.min(last, index));
    const frame = frames[shown];
    for (const [span, pass] of spans) {
      span.hidden = pass > shown;
      span.classList.toggle("bita-new", pass === shown);
      span.classList.toggle("bita-faded", pass < shown);
    }
    part("title").textContent = frame.title;
    part("story").innerHTML = frame.story;
    part("frame").value = shown;
    part("counter").textContent = `pass ${shown} of ${last}`;
    section.dataset.shown = shown;
    draw(part("tree"), frame.tree);
    draw(part("attention"), frame.attention);
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
  for (const section of document.querySelectorAll(".bita-player")) {
    const {template, frames} = JSON.parse(await inflated(section.dataset.frames));
    player(section, template, frames);
  }
  document.querySelector(".bita-loading").remove();
  document.body.dataset.ready = "true";
})();
