"""A decoding's playback page: one file holding every pass, Plotly once, nothing to fetch; in headless Chromium
(Debian's package, driven by Playwright) from file:// with the network cut off, it plays to the last pass, pauses and
steps back, showing each pass's tokens."""

import base64
import gzip
import json
import re
from pathlib import Path

import pytest
from plotly.offline import get_plotlyjs
from saved_records import tiny_decoding

from bita.saved import saved_run
from viz.playback import playback_html

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@pytest.fixture(scope="module")
def decoding():
    loaded, adapter, request, run = tiny_decoding()
    saved = saved_run(run, loaded, request, adapter, "random-adapter")
    return saved, playback_html(saved)


def unpacked(page: str, element: str) -> str:
    found = re.search(rf'<script type="application/gzip\+base64" id="{element}">([^<]*)</script>', page).group(1)
    return gzip.decompress(base64.b64decode(found)).decode()


def test_the_page_holds_every_pass_plotly_once_and_fetches_nothing(decoding):
    saved, page = decoding
    frames = json.loads(unpacked(page, "bita-frames-0"))["frames"]
    assert [frame["title"].split(" (")[0] for frame in frames] == [f"Pass {i} of {len(saved.steps) - 1}"
                                                                  for i in range(len(saved.steps))]
    assert all(frame["tree"]["data"] and frame["attention"]["data"][0]["type"] == "heatmap" for frame in frames)
    assert "After" in frames[1]["story"] and "<b>" in frames[1]["story"] and "**" not in frames[1]["story"]
    assert page.count('id="bita-plotly"') == 1 and unpacked(page, "bita-plotly") == get_plotlyjs()
    assert not re.search(r"<(script|link|img|iframe)\b[^>]*\b(src|href)=", page)  # nothing loaded from elsewhere
    assert not re.search(r"https?://", page.split('id="bita-plotly"')[0])
    assert page.count('class="bita-tok ') == len(saved.tokens)
    assert len(page) < 3_000_000


def visible_tokens(page) -> list[int]:
    return page.evaluate("[...document.querySelectorAll('.bita-answer .bita-tok')]"
                         ".filter(span => !span.hidden).map(span => Number(span.dataset.token))")


def test_the_page_plays_to_the_last_pass_pauses_and_steps_back_offline(decoding, tmp_path):
    from playwright.sync_api import sync_playwright

    saved, page_html = decoding
    path = tmp_path / "decoding.html"
    path.write_text(page_html)
    assert Path(CHROMIUM).exists(), "install Debian's chromium (setup.sh does: apt-get install chromium)"
    emitted = [step.emitted for step in saved.steps]
    last = len(emitted) - 1
    asked = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        context = browser.new_context(viewport={"width": 1280, "height": 1200})
        context.route(re.compile(r"^(?!file:)"), lambda route: (asked.append(route.request.url), route.abort()))
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(path.as_uri())
        page.wait_for_function("document.body.dataset.ready", timeout=60_000)
        first = visible_tokens(page)
        trees = page.evaluate("document.querySelector('.bita-tree').data.length")
        page.locator(".bita-play").click()
        page.locator(".bita-play").click()  # paused: no pass moves by itself now
        paused = int(page.locator(".bita-player").get_attribute("data-shown"))
        page.locator(".bita-forward").click()
        stepped = int(page.locator(".bita-player").get_attribute("data-shown"))
        page.locator(".bita-speed").select_option("30")
        page.locator(".bita-play").click()
        page.wait_for_function(f"document.querySelector('.bita-player').dataset.shown == {last}", timeout=60_000)
        page.get_by_text("▶ Play").wait_for(timeout=10_000)  # it stops at the last pass
        final = visible_tokens(page)
        page.locator(".bita-back").click()
        back = visible_tokens(page)
        counter = page.locator(".bita-counter").text_content()
        browser.close()
    assert not errors and not asked  # nothing fetched, nothing failed
    assert first == emitted[0] and trees >= 2
    assert stepped == paused + 1
    assert final == saved.tokens
    assert back == [t for step in emitted[:-1] for t in step] and counter == f"pass {last - 1} of {last}"
