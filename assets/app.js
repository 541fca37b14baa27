() => document.addEventListener("click", (event) => {
  const token = event.target.closest("#chat .bita-tok, #branch .bita-tok"), box = document.querySelector("#picked textarea");
  const found = token && token.className.match(/bita-turn-(\d+|branch) bita-pass-(\d+) bita-slot-(\d+)/);
  if (!found || !box) return;
  box.value = `${found[1]}:${found[2]}:${found[3]}:${Date.now()}`;
  box.dispatchEvent(new Event("input", {bubbles: true}));
})
